// Engine ops sort, argsort and topk: values and indices against the kernels' references
// along the last dim and along dim 0 (moved last and back), backward of the values against
// central finite differences, the error for k out of range, and zero-size inputs of every
// indexing op.
#include "patchbay/kernels/sort_topk.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "indexing_test_util.hpp"

using namespace patchbay::engine;
using namespace patchbay::engine::testing;
namespace pk = patchbay::kernels;

namespace {

// x [rows, length] with ties: values from {-1, -0.5, 0, 0.5, 1}.
Tensor tied_matrix(int64_t rows, int64_t length) {
  std::vector<float> v(size_t(rows * length));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f * float(int((i * 37 + 11) % 5) - 2);
  return Tensor::from_vector(v, {rows, length});
}

}  // namespace

TEST_CASE("sort and argsort match the stable reference, along the last dim and dim 0") {
  Tensor x = tied_matrix(6, 9);
  for (bool descending : {false, true}) {
    CAPTURE(descending);
    const auto order = descending ? pk::SortOrder::kDescending : pk::SortOrder::kAscending;
    std::vector<float> values(54);
    std::vector<int64_t> indices(54);
    pk::sort_last_dim_reference(x.data<float>(), 6, 9, order, values.data(), indices.data());
    ValuesIndices sorted = sort(x, -1, descending);
    CHECK(sorted.values.to_vector() == values);
    CHECK(int64_values(sorted.indices) == indices);
    CHECK(int64_values(argsort(x, 1, descending)) == indices);

    // Along dim 0: the same as sorting the transpose along its last dim.
    Tensor xt = x.transpose(0, 1).contiguous();  // [9, 6]
    pk::sort_last_dim_reference(xt.data<float>(), 9, 6, order, values.data(), indices.data());
    ValuesIndices by_column = sort(x, 0, descending);
    CHECK(by_column.values.shape() == Shape{6, 9});
    CHECK(by_column.values.transpose(0, 1).contiguous().to_vector() == values);
    CHECK(int64_values(by_column.indices.transpose(0, 1)) == indices);
  }
}

TEST_CASE("topk matches the reference, along the last dim and dim 0") {
  Tensor x = tied_matrix(5, 8);
  for (bool largest : {true, false}) {
    CAPTURE(largest);
    std::vector<float> values(15);
    std::vector<int64_t> indices(15);
    pk::topk_last_dim_reference(x.data<float>(), 5, 8, 3, largest, values.data(), indices.data());
    ValuesIndices top = topk(x, 3, -1, largest);
    CHECK(top.values.shape() == Shape{5, 3});
    CHECK(top.values.to_vector() == values);
    CHECK(int64_values(top.indices) == indices);

    Tensor xt = x.transpose(0, 1).contiguous();  // [8, 5]
    std::vector<float> column_values(16);
    std::vector<int64_t> column_indices(16);
    pk::topk_last_dim_reference(xt.data<float>(), 8, 5, 2, largest, column_values.data(),
                                column_indices.data());
    ValuesIndices by_column = topk(x, 2, 0, largest);
    CHECK(by_column.values.shape() == Shape{2, 8});
    CHECK(by_column.values.transpose(0, 1).contiguous().to_vector() == column_values);
    CHECK(int64_values(by_column.indices.transpose(0, 1)) == column_indices);
  }
  CHECK(topk(x, 0).values.shape() == Shape{5, 0});
}

TEST_CASE("sort and topk backward match finite differences; indices carry no gradient") {
  // Distinct values spaced well beyond the finite-difference step, so no order flips.
  std::vector<float> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1f * float((i * 5) % 12) - 0.6f;
  Tensor x = Tensor::from_vector(v, {3, 4});
  x.set_requires_grad(true);
  check_gradients([](const std::vector<Tensor>& in) { return sort(in[0], -1, true).values; }, {x},
                  "sort values");
  check_gradients([](const std::vector<Tensor>& in) { return sort(in[0], 0).values; }, {x},
                  "sort values dim 0");
  check_gradients([](const std::vector<Tensor>& in) { return topk(in[0], 2).values; }, {x},
                  "topk values");
  check_gradients([](const std::vector<Tensor>& in) { return topk(in[0], 1, 0, false).values; },
                  {x}, "topk smallest dim 0");
  ValuesIndices top = topk(x, 2);
  CHECK(top.values.requires_grad());
  CHECK(!top.indices.requires_grad());
  CHECK(top.indices.dtype() == DType::kI64);
}

TEST_CASE("topk refuses k outside [0, size]") {
  Tensor x = random_tensor({2, 4}, 40);
  check_error_mentions([&] { topk(x, 5); }, {"topk", "[0, 4]", "found 5"});
  check_error_mentions([&] { topk(x, -1, 0); }, {"topk", "[0, 2]"});
}

TEST_CASE("indexing ops accept zero-size tensors") {
  Tensor empty_rows = Tensor::empty({0, 4});
  CHECK(sort(empty_rows).values.shape() == Shape{0, 4});
  CHECK(topk(Tensor::empty({3, 0}), 0).indices.shape() == Shape{3, 0});
  CHECK(cumsum(empty_rows, 0).shape() == Shape{0, 4});
  CHECK(gather(random_tensor({2, 3}, 41), 1, index_tensor<int64_t>({}, {2, 0})).shape() ==
        Shape{2, 0});
  CHECK(embedding(random_tensor({5, 3}, 42), index_tensor<int32_t>({}, {0})).shape() ==
        Shape{0, 3});
  Tensor no_logits = Tensor::empty({0, 7});
  Tensor no_targets = index_tensor<int64_t>({}, {0});
  CHECK(cross_entropy(no_logits, no_targets, {.reduction = LossReduction::kSum}).item() == 0.0);
  CHECK(std::isnan(cross_entropy(no_logits, no_targets).item()));
}
