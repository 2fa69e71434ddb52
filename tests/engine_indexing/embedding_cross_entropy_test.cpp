// Engine ops embedding and cross_entropy: forward against the kernels' references (and
// cross-entropy against log_softmax + gather), backward against central finite
// differences, and the errors for out-of-range ids / targets and bad arguments.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "indexing_test_util.hpp"
#include "patchbay/kernels/cross_entropy.hpp"
#include "patchbay/kernels/embedding.hpp"

using namespace patchbay::engine;
using namespace patchbay::engine::testing;
namespace pk = patchbay::kernels;

// ---------------------------------------------------------------- embedding

TEST_CASE_TEMPLATE("embedding forward matches the reference and keeps the ids' shape", Index,
                   int32_t, int64_t) {
  Tensor weights = random_tensor({11, 4}, 1);
  const std::vector<Index> ids = {3, 0, 10, 3, 7, 1};
  Tensor out = embedding(weights, index_tensor(ids, {2, 3}));
  CHECK(out.shape() == Shape{2, 3, 4});
  CHECK(out.dtype() == DType::kF32);
  std::vector<float> expected(24);
  pk::embedding_forward_reference(weights.data<float>(), 11, 4, ids.data(), 6, expected.data());
  CHECK(out.to_vector() == expected);
}

TEST_CASE("embedding backward sums repeated ids (finite differences and a known answer)") {
  Tensor weights = random_tensor({6, 3}, 2, -1.0, 1.0, true);
  Tensor ids = index_tensor<int64_t>({1, 4, 1, 1, 5}, {5});
  check_gradients([&](const std::vector<Tensor>& in) { return embedding(in[0], ids); }, {weights},
                  "embedding");

  weights.zero_grad();
  backward(sum(embedding(weights, ids)));
  const std::vector<float> grad = weights.grad().to_vector();
  CHECK(grad[1 * 3] == 3.0f);  // id 1 appears three times
  CHECK(grad[4 * 3] == 1.0f);
  CHECK(grad[0] == 0.0f);  // id 0 never appears
}

TEST_CASE("embedding on a non-contiguous bf16 table returns bf16") {
  Tensor table = random_tensor({4, 9}, 3).transpose(0, 1);  // [9, 4], strided
  Tensor out = embedding(table.to(DType::kBF16), index_tensor<int32_t>({8, 0}, {2}));
  CHECK(out.dtype() == DType::kBF16);
  CHECK(out.shape() == Shape{2, 4});
  const std::vector<float> expected = table.contiguous().to_vector();
  const std::vector<float> got = out.to_vector();
  for (int64_t d = 0; d < 4; ++d)  // bf16 keeps 8 bits of mantissa
    CHECK(got[size_t(d)] == doctest::Approx(expected[size_t(8 * 4 + d)]).epsilon(1e-2));
}

TEST_CASE("embedding refuses out-of-range ids, naming the id, where it is and V") {
  Tensor weights = random_tensor({50, 2}, 4);
  check_error_mentions(
      [&] {
        embedding(weights, index_tensor<int32_t>({0, 99, 1}, {3}));
      },
      {"embedding", "id value 99", "at [1]", "< 50"});
  check_error_mentions(
      [&] {
        embedding(weights, index_tensor<int64_t>({0, 1, 2, -3}, {2, 2}));
      },
      {"id value -3", "at [1, 1]"});
  check_error_mentions([&] { embedding(weights, random_tensor({3}, 5)); }, {"i32 or i64"});
  check_error_mentions([&] { embedding(random_tensor({50}, 6), index_tensor<int32_t>({0}, {1})); },
                       {"[V, D]"});
}

// ---------------------------------------------------------------- cross_entropy

namespace {

// Per-row losses from the kernels' double-precision reference, for logits [rows, classes].
template <class Index>
std::vector<double> reference_row_losses(const Tensor& logits, const std::vector<Index>& targets,
                                         const pk::CrossEntropyOptions& options) {
  const int64_t classes = logits.size(-1), rows = int64_t(targets.size());
  std::vector<float> loss(targets.size()), lse(targets.size());
  Tensor c = logits.contiguous();
  pk::cross_entropy_forward_reference(c.data<float>(), targets.data(), rows, classes, options,
                                      loss.data(), lse.data());
  return as_doubles(loss);
}

}  // namespace

TEST_CASE_TEMPLATE("cross_entropy forward matches the reference for every reduction", Index,
                   int32_t, int64_t) {
  Tensor logits = random_tensor({2, 3, 7}, 10, -3.0, 3.0);
  const std::vector<Index> target_values = {6, 0, -100, 3, 3, 1};
  Tensor targets = index_tensor(target_values, {2, 3});
  for (double smoothing : {0.0, 0.1}) {
    CAPTURE(smoothing);
    const auto expected = reference_row_losses(logits, target_values,
                                               {.label_smoothing = static_cast<float>(smoothing)});
    CrossEntropyOptions options{.label_smoothing = smoothing};
    options.reduction = LossReduction::kNone;
    Tensor rows = cross_entropy(logits, targets, options);
    CHECK(rows.shape() == Shape{2, 3});
    check_close(as_doubles(rows.to_vector()), expected, 1e-6, 1e-6, "row losses");
    double total = 0.0;
    for (double l : expected) total += l;
    options.reduction = LossReduction::kSum;
    Tensor summed = cross_entropy(logits, targets, options);
    CHECK(summed.shape() == Shape{});
    CHECK(summed.item() == doctest::Approx(total).epsilon(1e-6));
    options.reduction = LossReduction::kMean;
    CHECK(cross_entropy(logits, targets, options).item() ==
          doctest::Approx(total / 5).epsilon(1e-6));
  }
  CHECK(count_targets(targets) == 5);
  CHECK(count_targets(targets, 3) == 4);
}

TEST_CASE("cross_entropy equals -mean(log_softmax gathered at the targets)") {
  Tensor logits = random_tensor({5, 9}, 11, -4.0, 4.0);
  Tensor targets = index_tensor<int64_t>({8, 0, 4, 4, 2}, {5});
  Tensor picked = gather(log_softmax(logits), 1, targets.reshape({5, 1}));
  const double expected = -mean(picked).item();
  CHECK(cross_entropy(logits, targets).item() == doctest::Approx(expected).epsilon(1e-6));
}

TEST_CASE("cross_entropy backward matches finite differences for every reduction") {
  Tensor logits = random_tensor({4, 6}, 12, -2.0, 2.0, true);
  Tensor targets = index_tensor<int32_t>({5, -100, 0, 2}, {4});
  for (auto reduction : {LossReduction::kMean, LossReduction::kSum, LossReduction::kNone}) {
    const CrossEntropyOptions options{.label_smoothing = 0.2, .reduction = reduction};
    check_gradients(
        [&](const std::vector<Tensor>& in) { return cross_entropy(in[0], targets, options); },
        {logits}, "cross_entropy reduction " + std::to_string(int(reduction)));
  }
  // The ignored row gets no gradient.
  logits.zero_grad();
  backward(cross_entropy(logits, targets));
  const std::vector<float> grad = logits.grad().to_vector();
  for (int64_t j = 0; j < 6; ++j) CHECK(grad[size_t(6 + j)] == 0.0f);
}

TEST_CASE("cross_entropy is finite for huge logits, f32 for bf16 logits, NaN when all ignored") {
  Tensor huge = mul_scalar(random_tensor({3, 5}, 13), 1.0e4);
  Tensor targets = index_tensor<int64_t>({0, 4, 2}, {3});
  CHECK(std::isfinite(cross_entropy(huge, targets).item()));

  Tensor logits = random_tensor({3, 5}, 14);
  Tensor bf16_loss = cross_entropy(logits.to(DType::kBF16), targets);
  CHECK(bf16_loss.dtype() == DType::kF32);
  CHECK(bf16_loss.item() == doctest::Approx(cross_entropy(logits, targets).item()).epsilon(1e-2));

  Tensor leaf = random_tensor({2, 5}, 15, -1.0, 1.0, true);
  Tensor all_ignored = index_tensor<int32_t>({-100, -100}, {2});
  Tensor loss = cross_entropy(leaf, all_ignored);
  CHECK(std::isnan(loss.item()));
  backward(loss);
  for (float g : leaf.grad().to_vector()) CHECK(g == 0.0f);
}

TEST_CASE("cross_entropy refuses bad targets and arguments with clear messages") {
  Tensor logits = random_tensor({2, 3, 7}, 16);
  check_error_mentions(
      [&] {
        cross_entropy(logits, index_tensor<int64_t>({0, 1, 2, 3, 4, 9}, {2, 3}));
      },
      {"cross_entropy", "target value 9", "at [1, 2]", "< 7", "ignore_index -100"});
  check_error_mentions(
      [&] {
        cross_entropy(logits, index_tensor<int64_t>({0, 1}, {2}));
      },
      {"leading shape [2, 3]"});
  check_error_mentions(
      [&] {
        cross_entropy(logits, index_tensor<int64_t>({0, 1, 2, 3, 4, 5}, {2, 3}),
                      {.label_smoothing = 1.5});
      },
      {"label_smoothing"});
}
