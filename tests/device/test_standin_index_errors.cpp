// Index errors on a device, in CI (engine/device_index_errors.hpp): on the host stand-in the
// index-checking ops (cross_entropy, embedding, gather, scatter_add) take the GPU's path: the
// CPU twin of the CUDA check kernel records a bad entry in the device's error record and the op
// carries on; the next read from the device raises the CPU's message (op, value, valid range,
// what to do), once. Ordinary steps read nothing back; the CPU still refuses at once; a clean
// cross-entropy mean (the count now on the device) keeps the CPU's bits.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/device_index_errors.hpp"
#include "engine/host_standin_device.hpp"
#include "engine/ops.hpp"
#include "engine/ops_device.hpp"
#include "engine/ops_indexing.hpp"

namespace {

using namespace patchbay::engine;

Device standin() {
  const Device dev = install_host_standin_device();
  raise_index_errors(dev);  // a clean record, whatever earlier tests left
  return dev;
}

Tensor random_f32(const Shape& shape, uint64_t seed, Device device = cpu()) {
  Generator gen(seed);
  return uniform(shape, gen, -2.0, 2.0).to(device);
}

Tensor ids_tensor(const std::vector<int64_t>& values, const Shape& shape, Device device) {
  return Tensor::from_data(values.data(), shape, DType::kI64, device);
}

uint32_t bits_of(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// The message the next read from the device raises (empty when it raises nothing).
std::string raised_by_read(const Tensor& on_device) {
  try {
    (void)on_device.to(cpu());
  } catch (const patchbay::Error& e) {
    return e.what();
  }
  return {};
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a bad cross-entropy target on a device is raised at the next read, once") {
  const Device dev = standin();
  const Tensor logits = random_f32({2, 3, 5}, 1, dev);
  const Tensor targets = ids_tensor({0, 4, -100, 7, 1, 2}, {2, 3}, dev);
  const size_t before = standin_transfer_counts().device_to_host;
  Tensor loss;
  CHECK_NOTHROW(loss = cross_entropy(logits, targets));  // no wait, no read
  CHECK(standin_transfer_counts().device_to_host == before);
  const std::string message = raised_by_read(loss);
  CAPTURE(message);
  CHECK(has(message, "cross_entropy: target value 7"));
  CHECK(has(message, "flat position 3"));
  CHECK(has(message, "expected 0 <= target < 5"));
  CHECK(has(message, "ignore_index -100"));
  CHECK(has(message, "cuda:0"));
  CHECK(has(message, "fix the input and rerun"));
  // Raised once: the record is cleared, the next read of a clean op passes.
  CHECK(raised_by_read(loss).empty());
  const Tensor good = ids_tensor({0, 4, -100, 3, 1, 2}, {2, 3}, dev);
  CHECK(raised_by_read(cross_entropy(logits, good)).empty());
  // The CPU refuses at once, naming the same value.
  try {
    (void)cross_entropy(logits.to(cpu()), targets.to(cpu()));
    FAIL("expected the CPU's cross_entropy to refuse target 7");
  } catch (const patchbay::Error& e) {
    CHECK(has(e.what(), "target value 7"));
  }
}

TEST_CASE("bad embedding ids and gather / scatter_add indices on a device are raised at a read") {
  const Device dev = standin();
  const Tensor weights = random_f32({6, 4}, 2, dev);
  Tensor rows = embedding(weights, ids_tensor({1, 6, 2}, {3}, dev));
  std::string message = raised_by_read(rows);
  CAPTURE(message);
  CHECK(has(message, "embedding: id value 6 at flat position 1"));
  CHECK(has(message, "0 <= id < 6"));
  CHECK(has(message, "vocabulary size"));

  const Tensor input = random_f32({3, 4}, 3, dev);
  const Tensor bad_index = ids_tensor({0, 1, 2, 3, 0, 4, 1, 2}, {2, 4}, dev);
  const Tensor gathered = gather(input, 1, bad_index);
  message = raised_by_read(gathered);
  CHECK(has(message, "gather: index value 4 at flat position 5"));
  CHECK(has(message, "the size of dim 1"));

  const Tensor scattered =
      scatter_add(zeros({3, 4}, DType::kF32, dev), 1, bad_index, random_f32({2, 4}, 4, dev));
  message = raised_by_read(scattered);
  CHECK(has(message, "scatter_add: index value 4"));
}

TEST_CASE("the first index error on a device wins until it is read") {
  const Device dev = standin();
  const Tensor weights = random_f32({6, 4}, 5, dev);
  const Tensor rows = embedding(weights, ids_tensor({9}, {1}, dev));
  const Tensor loss = cross_entropy(random_f32({2, 3}, 6, dev), ids_tensor({0, 5}, {2}, dev));
  const std::string message = raised_by_read(loss);
  CHECK(has(message, "embedding: id value 9"));
  CHECK_FALSE(has(message, "cross_entropy"));
  CHECK(raised_by_read(rows).empty());
}

TEST_CASE("index checks read nothing back until a read, then one 64-byte record with it") {
  const Device dev = standin();
  const Tensor weights = random_f32({6, 4}, 7, dev);
  const Tensor ids = ids_tensor({1, 2, 3}, {3}, dev);
  const TransferCounts before = standin_transfer_counts();
  Tensor loss = cross_entropy(matmul(embedding(weights, ids), random_f32({4, 6}, 8, dev)), ids);
  CHECK(standin_transfer_counts().device_to_host == before.device_to_host);
  (void)loss.item();  // the loss, then the record (a check ran since the last look)
  CHECK(standin_transfer_counts().device_to_host == before.device_to_host + 2);
  CHECK(standin_transfer_counts().device_to_host_bytes == before.device_to_host_bytes + 4 + 64);
  (void)loss.item();  // no check since: the loss alone
  CHECK(standin_transfer_counts().device_to_host == before.device_to_host + 3);
}

TEST_CASE("cross-entropy's mean on a device (the count on the device) keeps the CPU's bits") {
  const Device dev = standin();
  const Tensor logits = random_f32({7, 11}, 9);
  const std::vector<int64_t> targets = {3, -100, 10, 0, -100, 5, 5};
  for (const double smoothing : {0.0, 0.1}) {
    CrossEntropyOptions options;
    options.label_smoothing = smoothing;
    Tensor cpu_logits = logits.detach().set_requires_grad(true);
    Tensor cpu_loss = cross_entropy(cpu_logits, ids_tensor(targets, {7}, cpu()), options);
    backward(cpu_loss);
    Tensor dev_logits = logits.to(dev).set_requires_grad(true);
    Tensor dev_loss = cross_entropy(dev_logits, ids_tensor(targets, {7}, dev), options);
    backward(dev_loss);
    CHECK(bits_of(static_cast<float>(dev_loss.item())) ==
          bits_of(static_cast<float>(cpu_loss.item())));
    const std::vector<float> want = cpu_logits.grad().to_vector(),
                             got = dev_logits.grad().to_vector();
    REQUIRE(got.size() == want.size());
    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
  }
  // Every row ignored: NaN loss, zero gradient, on both.
  Tensor dev_logits = logits.to(dev).set_requires_grad(true);
  Tensor all_ignored =
      cross_entropy(dev_logits, ids_tensor(std::vector<int64_t>(7, -100), {7}, dev));
  backward(all_ignored);
  CHECK(std::isnan(all_ignored.item()));
  for (const float g : dev_logits.grad().to_vector()) CHECK(g == 0.f);
}
