// The engine on a second device, in CI: the host stand-in (core/engine/host_standin_device.hpp)
// registered as cuda:0 with the CPU kernels aliased to it. Checks what device code must get
// right without a GPU: bit-exact round trips host <-> device for every dtype and layout,
// results that stay on the device and equal the CPU's, gradients that travel back across
// to(device), refusals naming op and device (a missing kernel, mixed devices), separate
// memory statistics, a forward + backward pass that copies nothing back to the host, and
// packed-sequence attention (segment ids) on the device, and bf16 autocast attention routed to
// the device kernel with bf16 operands.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/autocast.hpp"
#include "engine/host_standin_device.hpp"
#include "engine/kernel_registry.hpp"
#include "engine/ops.hpp"
#include "engine/ops_device.hpp"
#include "engine/ops_indexing.hpp"
#include "engine/ops_table.hpp"
#include "patchbay/tensor.hpp"

namespace {

using namespace patchbay::engine;

Device standin() { return install_host_standin_device(); }

// The raw bytes of a CPU tensor (contiguous copy).
std::vector<unsigned char> bytes_of(const Tensor& cpu_tensor) {
  Tensor c = cpu_tensor.contiguous();
  std::vector<unsigned char> out(c.nbytes());
  if (!out.empty()) std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}

Tensor random_f32(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return uniform(shape, gen, -2.0, 2.0);
}

std::string error_of(auto&& fn) {
  try {
    fn();
  } catch (const patchbay::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("host -> device -> host is bit-exact for every dtype, view and special value") {
  const Device dev = standin();
  Tensor f32 = random_f32({3, 5}, 1);
  f32.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  f32.data<float>()[1] = -0.0f;
  f32.data<float>()[2] = std::numeric_limits<float>::infinity();
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kI64}) {
    CAPTURE(dtype_name(dtype));
    Tensor host = dtype == DType::kI32 || dtype == DType::kI64
                      ? arange(-7, 8, 1, dtype).reshape({3, 5})
                      : f32.to(dtype);
    Tensor on_device = host.to(dev);
    CHECK(on_device.device() == dev);
    CHECK(on_device.dtype() == dtype);
    CHECK(on_device.shape() == host.shape());
    CHECK(on_device.data_ptr() != host.data_ptr());
    Tensor back = on_device.to(cpu());
    CHECK(back.device() == cpu());
    CHECK(bytes_of(back) == bytes_of(host));
  }
  // A strided view (transpose, slice) travels as its elements in row-major order.
  Tensor view = f32.transpose(0, 1).slice(0, 1, 5, 2);
  CHECK(bytes_of(view.to(dev).to(cpu())) == bytes_of(view));
  // Zero elements.
  Tensor empty = Tensor::empty({0, 4});
  CHECK(empty.to(dev).to(cpu()).shape() == Shape{0, 4});
}

TEST_CASE("transfers are counted by direction; item() and to_vector() read through one") {
  const Device dev = standin();
  const TransferCounts before = standin_transfer_counts();
  Tensor x = random_f32({4, 4}, 2).to(dev);
  CHECK(standin_transfer_counts().host_to_device == before.host_to_device + 1);
  CHECK(standin_transfer_counts().host_to_device_bytes == before.host_to_device_bytes + 64);
  std::vector<float> values = x.to_vector();
  CHECK(values.size() == 16);
  CHECK(standin_transfer_counts().device_to_host == before.device_to_host + 1);
  const double total = sum(x).item();
  CHECK(standin_transfer_counts().device_to_host == before.device_to_host + 2);
  double expected = 0;
  for (float v : values) expected += v;
  CHECK(total == doctest::Approx(expected).epsilon(1e-6));
}

TEST_CASE("ops on device tensors run the device's kernels and stay on the device") {
  const Device dev = standin();
  Tensor a = random_f32({4, 8}, 3), b = random_f32({8, 6}, 4);
  Tensor gain = random_f32({6}, 5), bias = random_f32({6}, 6);
  auto pipeline = [&](const Tensor& x, const Tensor& w, const Tensor& g, const Tensor& bb) {
    Tensor h = layer_norm(gelu_tanh(matmul(x, w)), g, bb);
    return softmax(h * 2.0 + 1.0);
  };
  Tensor on_cpu = pipeline(a, b, gain, bias);
  Tensor on_dev = pipeline(a.to(dev), b.to(dev), gain.to(dev), bias.to(dev));
  CHECK(on_dev.device() == dev);
  CHECK(bytes_of(on_dev.to(cpu())) == bytes_of(on_cpu));  // same kernels: same bits
  // Creation on the device.
  Tensor z = zeros({3}, DType::kF32, dev);
  CHECK(z.device() == dev);
  CHECK(z.to_vector() == std::vector<float>{0, 0, 0});
  Generator g1(7), g2(7);
  CHECK(bytes_of(randn({5}, g1, DType::kF32, dev).to(cpu())) == bytes_of(randn({5}, g2)));
}

TEST_CASE("gradients flow back across to(device) to the CPU leaves") {
  const Device dev = standin();
  Tensor w = random_f32({5, 3}, 8).set_requires_grad(true);
  Tensor x = random_f32({2, 5}, 9);
  Tensor ids = Tensor::from_data(std::vector<int64_t>{2, 0}.data(), {2}, DType::kI64);
  Tensor loss = cross_entropy(matmul(x.to(dev), w.to(dev)), ids.to(dev));
  CHECK(loss.device() == dev);
  backward(loss);
  REQUIRE(w.grad().defined());
  CHECK(w.grad().device() == cpu());

  Tensor w2 = w.detach().clone().set_requires_grad(true);
  backward(cross_entropy(matmul(x, w2), ids));
  CHECK(bytes_of(w.grad()) == bytes_of(w2.grad()));
}

TEST_CASE("an op without a kernel for the device fails naming the op and the device") {
  const Device dev = install_host_standin_device({{"softmax"}});
  Tensor x = random_f32({2, 3}, 10).to(dev);
  const std::string message = error_of([&] { (void)softmax(x); });
  CHECK(message.find("'softmax'") != std::string::npos);
  CHECK(message.find("cuda") != std::string::npos);
  CHECK_FALSE(has_kernel("softmax", DeviceType::kCuda));
  CHECK(has_kernel("matmul", DeviceType::kCuda));
  CHECK(kernels_missing_for(DeviceType::kCuda) == std::vector<std::string>{"softmax"});
  install_host_standin_device();  // every kernel again, for the other cases
  CHECK(kernels_missing_for(DeviceType::kCuda).empty());
  CHECK(softmax(x).device() == dev);
}

TEST_CASE("mixing devices in one op is refused naming both tensors") {
  const Device dev = standin();
  Tensor a = random_f32({2, 2}, 11);
  const std::string message = error_of([&] { (void)add(a, a.to(dev)); });
  CHECK(message.find("cpu:0") != std::string::npos);
  CHECK(message.find("cuda:0") != std::string::npos);
}

TEST_CASE("copy_ across devices, and the device's own memory statistics") {
  const Device dev = standin();
  const MemoryStats cpu_before = memory_stats(cpu());
  const MemoryStats dev_before = memory_stats(dev);
  Tensor big = Tensor::empty({1024, 256}, DType::kF32, dev);  // 1 MiB on the device
  CHECK(memory_stats(dev).current_bytes == dev_before.current_bytes + (1u << 20));
  CHECK(memory_stats(cpu()).current_bytes == cpu_before.current_bytes);

  Tensor host = random_f32({1024, 256}, 12);
  copy_(big, host);  // same layout: one transfer
  CHECK(bytes_of(big.to(cpu())) == bytes_of(host));
  Tensor strided = Tensor::empty({256, 1024}, DType::kBF16, dev);
  Tensor target = strided.transpose(0, 1);
  copy_(target, host);  // another dtype and layout: transfer, then the device's copy kernel
  CHECK(bytes_of(target.to(cpu())) == bytes_of(host.to(DType::kBF16)));
}

TEST_CASE("a forward and backward pass on the device copies nothing back to the host") {
  const Device dev = standin();
  Generator gen(13);
  Tensor w1 = randn({16, 32}, gen, DType::kF32, dev).set_requires_grad(true);
  Tensor w2 = randn({32, 10}, gen, DType::kF32, dev).set_requires_grad(true);
  Tensor gain = ones({32}, DType::kF32, dev).set_requires_grad(true);
  Tensor x = randn({8, 16}, gen, DType::kF32, dev);
  Tensor ids =
      Tensor::from_data(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}.data(), {8}, DType::kI64, dev);
  const size_t before = standin_transfer_counts().device_to_host;
  Tensor h = rms_norm(gelu_tanh(matmul(x, w1)), gain);
  Tensor loss = cross_entropy(matmul(h, w2), ids);
  backward(loss);
  CHECK(standin_transfer_counts().device_to_host == before);
  CHECK(w1.grad().device() == dev);
  CHECK(w2.grad().device() == dev);
  CHECK(gain.grad().device() == dev);
}

TEST_CASE("ops table version 11: device tensors from a plugin's side") {
  (void)standin();
  const pb_ops_table* ops = host_ops_table();
  REQUIRE(ops->version >= 11);
  REQUIRE(patchbay::has_device_tensors(ops));
  const std::vector<float> values{1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 7.0f};
  const int64_t shape[] = {2, 3};
  pb_tensor* handle = nullptr;
  REQUIRE(ops->from_data_on_device(values.data(), shape, 2, PB_DTYPE_F32, PB_DEVICE_CUDA, 0,
                                   &handle) == nullptr);
  patchbay::Tensor on_device(ops, handle);
  CHECK(ops->device_type(handle) == PB_DEVICE_CUDA);
  std::vector<float> back(6, 99.0f);
  REQUIRE(ops->copy_to_host(handle, back.data(), back.size() * sizeof(float)) == nullptr);
  CHECK(std::memcmp(back.data(), values.data(), back.size() * sizeof(float)) == 0);

  const std::vector<float> other{9, 8, 7, 6, 5, 4};
  REQUIRE(ops->copy_from_host(handle, other.data(), other.size() * sizeof(float)) == nullptr);
  patchbay::Tensor on_cpu = patchbay::to_device(on_device, PB_DEVICE_CPU);
  CHECK(ops->device_type(on_cpu.handle()) == PB_DEVICE_CPU);
  CHECK(std::memcmp(on_cpu.data<float>(), other.data(), other.size() * sizeof(float)) == 0);
  // The same device: the tensor itself.
  patchbay::Tensor same = patchbay::to_device(on_device, PB_DEVICE_CUDA, 0);
  CHECK(ops_table_tensor(same.handle()).data_ptr() == ops_table_tensor(handle).data_ptr());
  // data_ptr stays CPU-only; an unknown device type is refused with a status.
  void* raw = nullptr;
  pb_status* refused = ops->data_ptr(handle, &raw);
  REQUIRE(refused != nullptr);
  CHECK(std::string(ops->status_message(refused)).find("cuda:0") != std::string::npos);
  ops->status_free(refused);
  pb_tensor* nowhere = nullptr;
  pb_status* unknown = ops->to_device(handle, static_cast<pb_device_type>(7), 0, &nowhere);
  REQUIRE(unknown != nullptr);
  CHECK(ops->status_code(unknown) == PB_STATUS_INVALID_ARGUMENT);
  CHECK(nowhere == nullptr);
  ops->status_free(unknown);
}

TEST_CASE("attention with packed segment ids runs on a device: the CPU's bits, ids read once") {
  const Device dev = standin();
  AttentionOptions options;
  options.causal = true;
  const std::vector<int64_t> ids = {0, 0, 0, 1, 1, 2, 2, 2, 0, 1, 1, 1, 1, 1, 3, 3};
  options.segment_ids = Tensor::from_data(ids.data(), {2, 8}, DType::kI64);
  const Tensor q = random_f32({2, 2, 8, 16}, 40), k = random_f32({2, 2, 8, 16}, 41),
               v = random_f32({2, 2, 8, 16}, 42);
  const Tensor want = scaled_dot_product_attention(q, k, v, options);
  const size_t before = standin_transfer_counts().device_to_host;
  const Tensor got = scaled_dot_product_attention(q.to(dev), k.to(dev), v.to(dev), options);
  CHECK(standin_transfer_counts().device_to_host == before);  // host ids: nothing read back
  CHECK(got.device() == dev);
  CHECK(bytes_of(got.to(cpu())) == bytes_of(want));
  AttentionOptions on_device = options;
  on_device.segment_ids = options.segment_ids.to(dev);
  const size_t before_device_ids = standin_transfer_counts().device_to_host;
  const Tensor again = scaled_dot_product_attention(q.to(dev), k.to(dev), v.to(dev), on_device);
  CHECK(standin_transfer_counts().device_to_host == before_device_ids + 1);  // the ids, once
  CHECK(bytes_of(again.to(cpu())) == bytes_of(want));
}

TEST_CASE("bf16 autocast attention on a device: bf16 operands reach the device's kernel") {
  // On CUDA a bf16 autocast sends q, k, v rounded to bf16 to the device's attention kernel for
  // plain causal attention at head dim 64 (CUDA's tensor-core kernel; engine/ops/attention.cpp).
  // The stand-in aliases the CPU kernel, which widens bf16 operands it has no bf16 kernel for
  // (packed segments) back to f32: so the device's result is, bit for bit, the CPU's f32
  // attention of the rounded operands, and not the unrounded one.
  const Device dev = standin();
  AttentionOptions options;
  options.causal = true;
  std::vector<int64_t> ids(2 * 80);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t(i % 80 < 30 ? 0 : 1);
  options.segment_ids = Tensor::from_data(ids.data(), {2, 80}, DType::kI64);
  const Tensor q = random_f32({2, 2, 80, 64}, 50), k = random_f32({2, 2, 80, 64}, 51),
               v = random_f32({2, 2, 80, 64}, 52);
  auto rounded = [](const Tensor& x) { return x.to(DType::kBF16).to(DType::kF32); };
  const Tensor want = scaled_dot_product_attention(rounded(q), rounded(k), rounded(v), options);
  const Tensor unrounded = scaled_dot_product_attention(q, k, v, options);
  Tensor qd = q.to(dev), kd = k.to(dev), vd = v.to(dev);
  for (Tensor* x : {&qd, &kd, &vd}) x->set_requires_grad(true);
  Tensor got;
  {
    const AutocastGuard bf16(DType::kBF16);
    got = scaled_dot_product_attention(qd, kd, vd, options);
    backward(sum(got));
  }
  CHECK(got.device() == dev);
  CHECK(bytes_of(got.to(cpu())) == bytes_of(want));
  CHECK(bytes_of(got.to(cpu())) != bytes_of(unrounded));
  // The gradients: the CPU's f32 backward of the rounded operands (dout = 1 is exact in bf16).
  Tensor qr = rounded(q), kr = rounded(k), vr = rounded(v);
  for (Tensor* x : {&qr, &kr, &vr}) x->set_requires_grad(true);
  backward(sum(scaled_dot_product_attention(qr, kr, vr, options)));
  CHECK(bytes_of(qd.grad().to(cpu())) == bytes_of(qr.grad()));
  CHECK(bytes_of(kd.grad().to(cpu())) == bytes_of(kr.grad()));
  CHECK(bytes_of(vd.grad().to(cpu())) == bytes_of(vr.grad()));
}
