// Engine ops cumsum, gather and scatter_add: forward against the kernels' references along
// every dim (strided inputs included), backward against central finite differences, and
// the errors for out-of-range indices and mismatched shapes.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "indexing_test_util.hpp"
#include "patchbay/kernels/cumsum.hpp"
#include "patchbay/kernels/gather_scatter.hpp"

using namespace patchbay::engine;
using namespace patchbay::engine::testing;
namespace pk = patchbay::kernels;

// ---------------------------------------------------------------- cumsum

TEST_CASE("cumsum matches the reference along every dim, both directions") {
  const Shape shape = {3, 4, 5};
  Tensor x = random_tensor(shape, 20);
  for (int64_t dim = -3; dim < 3; ++dim) {
    for (bool reverse : {false, true}) {
      CAPTURE(dim);
      CAPTURE(reverse);
      const int64_t d = dim < 0 ? dim + 3 : dim;
      const int64_t outer = d == 0 ? 1 : (d == 1 ? 3 : 12);
      const int64_t inner = d == 2 ? 1 : (d == 1 ? 5 : 20);
      std::vector<float> expected(60);
      pk::cumsum_forward_reference(x.data<float>(), outer, shape[size_t(d)], inner, reverse,
                                   expected.data());
      check_close(as_doubles(cumsum(x, dim, reverse).to_vector()), as_doubles(expected), 1e-6, 1e-6,
                  "cumsum");
    }
  }
  // A strided input gives the same answer as its contiguous copy.
  Tensor t = x.transpose(0, 2);
  CHECK(cumsum(t, 1).to_vector() == cumsum(t.contiguous(), 1).to_vector());
}

TEST_CASE("cumsum backward matches finite differences") {
  Tensor x = random_tensor({3, 4, 2}, 21, -1.0, 1.0, true);
  for (int64_t dim : {0, 1, -1})
    for (bool reverse : {false, true})
      check_gradients([&](const std::vector<Tensor>& in) { return cumsum(in[0], dim, reverse); },
                      {x}, "cumsum dim " + std::to_string(dim));
}

// ---------------------------------------------------------------- gather / scatter_add

TEST_CASE_TEMPLATE("gather matches the reference along every dim", Index, int32_t, int64_t) {
  const Shape input_shape = {4, 5, 6};
  Tensor input = random_tensor(input_shape, 22);
  for (int64_t dim = 0; dim < 3; ++dim) {
    CAPTURE(dim);
    Shape index_shape = {3, 4, 5};  // smaller than input in the other dims
    index_shape[size_t(dim)] = 7;   // and longer along dim (entries repeat)
    std::vector<Index> index_values(size_t(shape_numel(index_shape)));
    for (size_t i = 0; i < index_values.size(); ++i)
      index_values[i] = Index((i * 7 + 3) % size_t(input_shape[size_t(dim)]));
    Tensor out = gather(input, dim, index_tensor(index_values, index_shape));
    CHECK(out.shape() == index_shape);
    std::vector<float> expected(index_values.size());
    pk::gather_forward_reference(input.data<float>(), input_shape, int(dim), index_values.data(),
                                 index_shape, expected.data());
    CHECK(out.to_vector() == expected);
  }
}

TEST_CASE("scatter_add matches the reference and leaves self unchanged") {
  Tensor self = random_tensor({3, 4}, 23);
  const std::vector<float> self_before = self.to_vector();
  Tensor src = random_tensor({3, 5}, 24);  // larger than the index in dim 1
  const std::vector<int64_t> index_values = {0, 0, 3, 1, 2, 2, 2, 0};
  const Shape index_shape = {2, 4};
  Tensor out = scatter_add(self, 1, index_tensor(index_values, index_shape), src);
  std::vector<float> expected = self_before;
  pk::scatter_add_reference(expected.data(), Shape{3, 4}, 1, index_values.data(), index_shape,
                            src.data<float>(), Shape{3, 5});
  CHECK(out.to_vector() == expected);
  CHECK(self.to_vector() == self_before);
}

TEST_CASE("gather and scatter_add backward match finite differences") {
  Tensor input = random_tensor({4, 3}, 25, -1.0, 1.0, true);
  Tensor index = index_tensor<int32_t>({3, 3, 0, 1, 2, 3}, {2, 3});  // repeats along dim 0
  check_gradients([&](const std::vector<Tensor>& in) { return gather(in[0], 0, index); }, {input},
                  "gather dim 0");
  Tensor along_last = index_tensor<int64_t>({2, 2, 0, 1}, {4, 1});
  check_gradients([&](const std::vector<Tensor>& in) { return gather(in[0], -1, along_last); },
                  {input}, "gather dim -1");

  Tensor self = random_tensor({3, 4}, 26, -1.0, 1.0, true);
  Tensor src = random_tensor({2, 5}, 27, -1.0, 1.0, true);  // src larger than index in dim 1
  Tensor scatter_index = index_tensor<int64_t>({0, 2, 2, 1, 1, 1, 0, 2}, {2, 4});
  check_gradients(
      [&](const std::vector<Tensor>& in) { return scatter_add(in[0], 0, scatter_index, in[1]); },
      {self, src}, "scatter_add dim 0");
  // src's last column lies outside the index: its gradient is exactly 0.
  const std::vector<float> grad_src = src.grad().to_vector();
  CHECK(grad_src[4] == 0.0f);
  CHECK(grad_src[9] == 0.0f);
}

TEST_CASE("gather and scatter_add refuse bad indices and shapes") {
  Tensor input = random_tensor({4, 3}, 28);
  check_error_mentions(
      [&] {
        gather(input, 1, index_tensor<int64_t>({0, 1, 5, 2}, {2, 2}));
      },
      {"gather", "index value 5", "at [1, 0]", "< 3", "dim 1"});
  check_error_mentions(
      [&] {
        gather(input, 0, index_tensor<int64_t>({0, 1, 2, 3}, {1, 4}));
      },
      {"gather", "no larger size"});
  check_error_mentions([&] { gather(input, 0, index_tensor<int64_t>({0, 1}, {2})); }, {"rank"});
  check_error_mentions(
      [&] {
        scatter_add(input, 0, index_tensor<int32_t>({0, -1}, {1, 2}), random_tensor({1, 2}, 29));
      },
      {"scatter_add", "index value -1", "at [0, 1]"});
  check_error_mentions(
      [&] {
        scatter_add(input, 0, index_tensor<int32_t>({0, 1, 2}, {1, 3}), random_tensor({1, 2}, 30));
      },
      {"scatter_add", "src"});
}
