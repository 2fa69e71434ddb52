// GPU tests of gather / scatter-add / scatter-add's src gradient, sort, top-k and the selection
// backward (indexing.hpp) against their CPU twins (indexing_reference.hpp, themselves equal to
// the CPU engine's kernels bit for bit: tests/cuda/indexing_twin_test.cpp). Every comparison is
// bit for bit: the kernels do the twins' arithmetic in the twins' order. Outputs are poisoned
// with NaN first; inputs have many ties, NaN, +-0 and +-inf (sort), and many ids per slot
// (scatter-add, where an order change would show in the bits).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "gpu_test_harness.hpp"
#include "patchbay/kernels/cuda/fill.hpp"
#include "patchbay/kernels/cuda/indexing.hpp"
#include "patchbay/kernels/cuda/indexing_reference.hpp"

namespace cuda = patchbay::kernels::cuda;
using cuda::testing::DeviceBuffer;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<float> tie_heavy(cuda::testing::TestContext& t, size_t count) {
  const float pool[] = {-1.5f, -0.0f, 0.0f, 1.0f, 2.5f, INFINITY, -INFINITY, NAN, -NAN, 1e-30f};
  auto values = t.normal(count);
  for (auto& v : values)
    if (t.random()() % 10 < 7) v = pool[t.random()() % 10];
  return values;
}

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

template <class Index>
void check_gather_scatter(cuda::testing::TestContext& t, const std::vector<int64_t>& data_shape,
                          const std::vector<int64_t>& index_shape,
                          const std::vector<int64_t>& src_shape, int dim) {
  const int rank = int(data_shape.size());
  const std::string where = "rank " + std::to_string(rank) + " dim " + std::to_string(dim);
  const auto data = t.normal(size_t(product(data_shape)));
  const auto src = t.normal(size_t(product(src_shape)), 1e3f);
  const auto index = t.ids<Index>(size_t(product(index_shape)), data_shape[size_t(dim)]);
  const cuda::AlongDim walk = cuda::along_dim_of(data_shape.data(), rank, dim);
  const cuda::IndexShape ishape = cuda::index_shape_of(index_shape.data(), rank, dim);
  const cuda::Strides src_strides = cuda::contiguous_strides(src_shape.data(), rank);
  DeviceBuffer<float> d_data(data), d_src(src), out(index.size()), grad_src(src.size());
  DeviceBuffer<Index> d_index(index);

  t.poison(out);
  CUDA_CHECK(cuda::gather_f32(d_data.get(), walk, d_index.get(), ishape, out.get(), t.stream()));
  std::vector<float> expected(index.size());
  cuda::gather_f32_reference(data.data(), walk, index.data(), ishape, expected.data());
  t.expect_true("gather bit for bit, " + where, same_bits(out.download(), expected));

  DeviceBuffer<float> self(data);
  CUDA_CHECK(cuda::scatter_add_f32(self.get(), walk, d_index.get(), ishape, d_src.get(),
                                   src_strides, t.stream()));
  std::vector<float> self_expected = data;
  cuda::scatter_add_f32_reference(self_expected.data(), walk, index.data(), ishape, src.data(),
                                  src_strides);
  const auto first = self.download();
  t.expect_true("scatter_add bit for bit (index order), " + where, same_bits(first, self_expected));
  self.upload(data);  // run to run: the same bits again
  CUDA_CHECK(cuda::scatter_add_f32(self.get(), walk, d_index.get(), ishape, d_src.get(),
                                   src_strides, t.stream()));
  t.expect_true("scatter_add repeats bit for bit, " + where, same_bits(self.download(), first));

  t.poison(grad_src);
  CUDA_CHECK(cuda::scatter_add_backward_src_f32(d_data.get(), walk, d_index.get(), ishape,
                                                grad_src.get(), src_strides, int64_t(src.size()),
                                                t.stream()));
  std::vector<float> grad_expected(src.size());
  cuda::scatter_add_backward_src_f32_reference(data.data(), walk, index.data(), ishape,
                                               grad_expected.data(), src_strides,
                                               int64_t(src.size()));
  t.expect_true("scatter_add_backward_src bit for bit, " + where,
                same_bits(grad_src.download(), grad_expected));
}

}  // namespace

GPU_TEST(gather_scatter_add_and_src_gradient_equal_twin_bits) {
  check_gather_scatter<int64_t>(t, {5}, {3000}, {3001}, 0);  // ~600 additions per slot
  check_gather_scatter<int32_t>(t, {64, 768}, {512, 768}, {512, 768}, 0);  // MoE-like combine
  // One long line: 256 destination slices, each walking all 20000 entries in index order.
  check_gather_scatter<int64_t>(t, {300}, {20000}, {20000}, 0);
  check_gather_scatter<int64_t>(t, {6, 9}, {5, 300}, {6, 301}, 1);
  check_gather_scatter<int32_t>(t, {2, 4, 3, 5}, {2, 11, 2, 5}, {2, 12, 3, 5}, 1);
  check_gather_scatter<int64_t>(t, {2, 4, 3, 5}, {1, 3, 3, 17}, {2, 3, 3, 17}, 3);
}

GPU_TEST(sort_and_topk_equal_twin_bits_on_ties_nan_and_zeros) {
  struct Case {
    int64_t rows, length;
  };
  // One tile, exactly a tile, several tiles with global passes, a vocabulary-sized row.
  const Case cases[] = {{7, 1}, {33, 5}, {9, 2048}, {3, 2049}, {2, 50257}, {4096, 8}};
  for (const auto& c : cases) {
    const auto x = tie_heavy(t, size_t(c.rows * c.length));
    DeviceBuffer<float> dx(x);
    DeviceBuffer<uint64_t> workspace(size_t(cuda::sort_workspace_keys(c.rows, c.length)));
    for (const bool descending : {false, true})
      for (const int64_t count : {c.length, std::min<int64_t>(c.length, 50), int64_t{1}}) {
        const std::string what = "rows " + std::to_string(c.rows) + " length " +
                                 std::to_string(c.length) + " count " + std::to_string(count) +
                                 (descending ? " descending" : " ascending");
        DeviceBuffer<float> values(size_t(c.rows * count));
        DeviceBuffer<int64_t> indices(size_t(c.rows * count));
        t.poison(values);
        CUDA_CHECK(cuda::sort_rows_f32(dx.get(), c.rows, c.length, count, descending, values.get(),
                                       indices.get(), workspace.get(), t.stream()));
        std::vector<float> want_values(size_t(c.rows * count));
        std::vector<int64_t> want_indices(size_t(c.rows * count));
        cuda::sort_rows_f32_reference(x.data(), c.rows, c.length, count, descending,
                                      want_values.data(), want_indices.data());
        t.expect_true("sort/top-k indices, " + what, indices.download() == want_indices);
        t.expect_true("sort/top-k values bit for bit, " + what,
                      same_bits(values.download(), want_values));
      }
  }
  DeviceBuffer<float> one(1);
  DeviceBuffer<int64_t> index(1);
  DeviceBuffer<uint64_t> workspace(1);
  t.expect_true("count > length is refused",
                cuda::sort_rows_f32(one.get(), 1, 1, 2, false, one.get(), index.get(),
                                    workspace.get(), t.stream()) == cudaErrorInvalidValue);
}

GPU_TEST(selection_backward_equals_twin) {
  const int64_t rows = 300, length = 1000, k = 37;
  const auto x = t.normal(size_t(rows * length));
  std::vector<float> unused(size_t(rows * k));
  std::vector<int64_t> indices(size_t(rows * k));
  cuda::sort_rows_f32_reference(x.data(), rows, length, k, true, unused.data(), indices.data());
  const auto grad = t.normal(size_t(rows * k));
  DeviceBuffer<float> d_grad(grad), grad_x(size_t(rows * length));
  DeviceBuffer<int64_t> d_indices(indices);
  t.poison(grad_x);
  CUDA_CHECK(cuda::selection_backward_f32(d_grad.get(), d_indices.get(), rows, length, k,
                                          grad_x.get(), t.stream()));
  std::vector<float> expected(size_t(rows * length));
  cuda::selection_backward_f32_reference(grad.data(), indices.data(), rows, length, k,
                                         expected.data());
  t.expect_close("selection backward", grad_x.download(), expected, 0.0);
}

// Small enough for compute-sanitizer racecheck (the device check's racecheck stage): rows that
// take several tiles (global passes, then tile merges) and many one-tile rows.
GPU_TEST(sort_tiles_and_merges_small) {
  for (const auto& [rows, length] : {std::pair<int64_t, int64_t>{3, 5000}, {64, 300}}) {
    const auto x = tie_heavy(t, size_t(rows * length));
    DeviceBuffer<float> dx(x), values(size_t(rows * length));
    DeviceBuffer<int64_t> indices(size_t(rows * length));
    DeviceBuffer<uint64_t> workspace(size_t(cuda::sort_workspace_keys(rows, length)));
    t.poison(values);
    CUDA_CHECK(cuda::sort_rows_f32(dx.get(), rows, length, length, true, values.get(),
                                   indices.get(), workspace.get(), t.stream()));
    std::vector<float> want_values(x.size());
    std::vector<int64_t> want_indices(x.size());
    cuda::sort_rows_f32_reference(x.data(), rows, length, length, true, want_values.data(),
                                  want_indices.data());
    const std::string what = std::to_string(rows) + " x " + std::to_string(length);
    t.expect_true("sort indices, " + what, indices.download() == want_indices);
    t.expect_true("sort values bit for bit, " + what, same_bits(values.download(), want_values));
  }
}
