// Gather / scatter-add kernels: the PyTorch documentation's known answer, agreement with the
// coordinate-by-coordinate references for every dim of rank-3 tensors whose index is
// smaller than the data in the other dims (both index types, sizes that run threads), and
// both backward passes checked by adjoint identities.
#include "patchbay/kernels/gather_scatter.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "random_fill.hpp"

namespace pk = patchbay::kernels;
using pk::testing::dot;
using pk::testing::random_floats;
using pk::testing::random_ids;

namespace {

size_t numel(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t s : shape) n *= size_t(s);
  return n;
}

}  // namespace

TEST_CASE("gather known answer (torch.gather documentation)") {
  // t = [[1, 2], [3, 4]]; gather(t, 1, [[0, 0], [1, 0]]) = [[1, 1], [4, 3]].
  const std::vector<float> t = {1, 2, 3, 4};
  const std::vector<int64_t> index = {0, 0, 1, 0};
  const std::vector<int64_t> shape = {2, 2};
  std::vector<float> out(4);
  pk::gather_forward(t.data(), shape, 1, index.data(), shape, out.data());
  CHECK(out == std::vector<float>{1, 1, 4, 3});
  // Along dim 0: out[i][j] = t[index[i][j]][j] = [[1, 2], [3, 2]].
  pk::gather_forward(t.data(), shape, 0, index.data(), shape, out.data());
  CHECK(out == std::vector<float>{1, 2, 3, 2});
}

TEST_CASE("scatter_add known answer with repeated indices") {
  // self = zeros(2, 3); scatter_add(1, [[0, 0, 2]], [[1, 2, 3]]) → [[3, 0, 3], [0, 0, 0]].
  std::vector<float> self(6, 0.0f);
  const std::vector<int32_t> index = {0, 0, 2};
  const std::vector<float> src = {1, 2, 3};
  const std::vector<int64_t> self_shape = {2, 3}, index_shape = {1, 3};
  pk::scatter_add(self.data(), self_shape, 1, index.data(), index_shape, src.data(), index_shape);
  CHECK(self == std::vector<float>{3, 0, 3, 0, 0, 0});
}

TEST_CASE_TEMPLATE("gather and scatter_add match the references along every dim", Index, int32_t,
                   int64_t) {
  const std::vector<int64_t> data_shape = {9, 40, 130};
  for (int dim = 0; dim < 3; ++dim) {
    CAPTURE(dim);
    // Index smaller than the data in the other dims, longer along dim (gather may repeat).
    std::vector<int64_t> index_shape = {8, 31, 120};
    index_shape[size_t(dim)] = data_shape[size_t(dim)] + 5;
    const auto input = random_floats(numel(data_shape), uint32_t(60 + dim));
    const auto index =
        random_ids<Index>(numel(index_shape), data_shape[size_t(dim)], uint32_t(70 + dim));

    std::vector<float> out(numel(index_shape)), expected(out.size());
    pk::gather_forward(input.data(), data_shape, dim, index.data(), index_shape, out.data());
    pk::gather_forward_reference(input.data(), data_shape, dim, index.data(), index_shape,
                                 expected.data());
    CHECK(out == expected);

    // src larger than the index everywhere: only its index-shaped corner is read.
    std::vector<int64_t> src_shape = index_shape;
    for (auto& s : src_shape) s += 2;
    const auto src = random_floats(numel(src_shape), uint32_t(80 + dim));
    auto self = random_floats(numel(data_shape), uint32_t(90 + dim));
    auto self_expected = self;
    pk::scatter_add(self.data(), data_shape, dim, index.data(), index_shape, src.data(), src_shape);
    pk::scatter_add_reference(self_expected.data(), data_shape, dim, index.data(), index_shape,
                              src.data(), src_shape);
    // Each destination element receives its terms in the same order in both.
    CHECK(self == self_expected);
  }
}

TEST_CASE("gather_backward and scatter_add_backward_src are adjoints of their forwards") {
  const std::vector<int64_t> data_shape = {5, 6, 7};
  const std::vector<int64_t> index_shape = {4, 9, 5};
  const std::vector<int64_t> src_shape = {5, 10, 6};
  const int dim = 1;
  const auto index = random_ids<int64_t>(numel(index_shape), data_shape[1], 101);

  // gather: <g, gather(x)> = <gather_backward(g), x>.
  const auto x = random_floats(numel(data_shape), 102);
  const auto g = random_floats(numel(index_shape), 103);
  std::vector<float> y(numel(index_shape)), grad_x(numel(data_shape), 0.0f);
  pk::gather_forward(x.data(), data_shape, dim, index.data(), index_shape, y.data());
  pk::gather_backward(g.data(), index.data(), index_shape, dim, grad_x.data(), data_shape);
  CHECK(dot(g, y) == doctest::Approx(dot(grad_x, x)).epsilon(1e-5));

  // scatter_add in src: <h, scatter_add(0, src)> = <scatter_add_backward_src(h), src>.
  const auto src = random_floats(numel(src_shape), 104);
  const auto h = random_floats(numel(data_shape), 105);
  std::vector<float> scattered(numel(data_shape), 0.0f);
  std::vector<float> grad_src(numel(src_shape), 7.0f);  // overwritten, including the margin
  pk::scatter_add(scattered.data(), data_shape, dim, index.data(), index_shape, src.data(),
                  src_shape);
  pk::scatter_add_backward_src(h.data(), data_shape, dim, index.data(), index_shape,
                               grad_src.data(), src_shape);
  CHECK(dot(h, scattered) == doctest::Approx(dot(grad_src, src)).epsilon(1e-5));
  CHECK(grad_src.back() == 0.0f);  // outside the index-shaped corner
}
