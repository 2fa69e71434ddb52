// CI test that the CPU twins of the CUDA gather / scatter-add / sort / top-k kernels
// (kernels/cuda/indexing_reference.hpp: the GPU's algorithms and schedules, run on the CPU)
// give the CPU engine kernels' results (kernels/indexing) bit for bit: ties in the CPU's order
// (lower position first in both directions), NaN past +inf, -0 equal to +0, scatter sums in
// the CPU's order. With the GPU tests (kernel == twin) this closes the chain kernel == engine.
#include <doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "patchbay/kernels/cuda/indexing_reference.hpp"
#include "patchbay/kernels/cuda/math/segments.hpp"
#include "patchbay/kernels/cuda/math/sort_keys.hpp"
#include "patchbay/kernels/gather_scatter.hpp"
#include "patchbay/kernels/sort_topk.hpp"

namespace cuda = patchbay::kernels::cuda;
namespace cpu = patchbay::kernels;

namespace {

// Values with many ties and every special case the order must place: +-0, +-inf, NaN of both
// signs, repeated finite values.
std::vector<float> tie_heavy_values(size_t count, std::mt19937& random) {
  const float pool[] = {-1.5f, -0.0f, 0.0f, 1.0f, 2.5f, INFINITY, -INFINITY, NAN, -NAN, 1e-30f};
  std::uniform_int_distribution<int> pick(0, 9);
  std::normal_distribution<float> normal;
  std::vector<float> values(count);
  for (auto& v : values) v = pick(random) < 7 ? pool[pick(random)] : normal(random);
  return values;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("sort keys: integer order is the CPU's value order with ties by position") {
  CHECK(cuda::math::sort_order_bits(-0.0f, false) == cuda::math::sort_order_bits(0.0f, false));
  CHECK(cuda::math::sort_order_bits(NAN, false) == cuda::math::sort_order_bits(-NAN, false));
  CHECK(cuda::math::sort_order_bits(INFINITY, false) < cuda::math::sort_order_bits(NAN, false));
  CHECK(cuda::math::sort_order_bits(-INFINITY, false) < cuda::math::sort_order_bits(-1e38f, false));
  CHECK(cuda::math::sort_order_bits(NAN, true) < cuda::math::sort_order_bits(INFINITY, true));
  CHECK(cuda::math::sort_key(1.0f, 3, false) < cuda::math::sort_key(1.0f, 4, false));
  CHECK(cuda::math::sort_key(1.0f, 3, true) < cuda::math::sort_key(1.0f, 4, true));
  CHECK(cuda::math::bitonic_padded_length(1) == 1);
  CHECK(cuda::math::bitonic_padded_length(2049) == 4096);
}

TEST_CASE("sort twin (GPU schedule, one and many tiles) equals the CPU sort bit for bit") {
  std::mt19937 random(11);
  const int64_t rows = 3;
  for (const int64_t length : {1, 2, 3, 7, 64, 100, 1000, 2049, 5000}) {
    const auto x = tie_heavy_values(size_t(rows * length), random);
    for (const bool descending : {false, true}) {
      std::vector<float> want_values(x.size());
      std::vector<int64_t> want_indices(x.size());
      cpu::sort_last_dim(x.data(), rows, length,
                         descending ? cpu::SortOrder::kDescending : cpu::SortOrder::kAscending,
                         want_values.data(), want_indices.data());
      for (const int64_t tile : {2048, 4, 16}) {
        CAPTURE(length);
        CAPTURE(descending);
        CAPTURE(tile);
        std::vector<float> values(x.size());
        std::vector<int64_t> indices(x.size());
        cuda::sort_rows_f32_reference(x.data(), rows, length, length, descending, values.data(),
                                      indices.data(), tile);
        CHECK(indices == want_indices);
        CHECK(same_bits(values, want_values));
      }
    }
  }
}

TEST_CASE("top-k twin (sort, first k) equals the CPU top-k bit for bit, ties to the lower index") {
  std::mt19937 random(12);
  const int64_t rows = 4;
  for (const int64_t length : {1, 5, 50, 3000}) {
    const auto x = tie_heavy_values(size_t(rows * length), random);
    for (const int64_t k : {int64_t{0}, int64_t{1}, length / 2, length})
      for (const bool largest : {true, false}) {
        CAPTURE(length);
        CAPTURE(k);
        CAPTURE(largest);
        std::vector<float> want_values(size_t(rows * k)), values(size_t(rows * k));
        std::vector<int64_t> want_indices(size_t(rows * k)), indices(size_t(rows * k));
        cpu::topk_last_dim(x.data(), rows, length, k, largest, want_values.data(),
                           want_indices.data());
        cuda::sort_rows_f32_reference(x.data(), rows, length, k, largest, values.data(),
                                      indices.data(), 16);
        CHECK(indices == want_indices);
        CHECK(same_bits(values, want_values));
      }
  }
}

TEST_CASE("selection backward twin equals the CPU's") {
  std::mt19937 random(13);
  const int64_t rows = 5, length = 40, k = 7;
  const auto x = tie_heavy_values(size_t(rows * length), random);
  std::vector<int64_t> indices(size_t(rows * k));
  std::vector<float> unused(size_t(rows * k));
  cpu::topk_last_dim(x.data(), rows, length, k, true, unused.data(), indices.data());
  std::normal_distribution<float> normal;
  std::vector<float> grad(size_t(rows * k));
  for (auto& g : grad) g = normal(random);
  std::vector<float> want(size_t(rows * length)), got(size_t(rows * length), NAN);
  cpu::selection_backward_last_dim(grad.data(), indices.data(), rows, length, k, want.data());
  cuda::selection_backward_f32_reference(grad.data(), indices.data(), rows, length, k, got.data());
  CHECK(same_bits(got, want));
}

namespace {

template <class Index>
void check_gather_scatter(const std::vector<int64_t>& data_shape,
                          const std::vector<int64_t>& index_shape,
                          const std::vector<int64_t>& src_shape, int dim, std::mt19937& random) {
  CAPTURE(dim);
  CAPTURE(index_shape.size());
  const int rank = int(data_shape.size());
  auto count = [](const std::vector<int64_t>& s) {
    int64_t n = 1;
    for (int64_t v : s) n *= v;
    return size_t(n);
  };
  std::normal_distribution<float> normal;
  std::vector<float> data(count(data_shape)), src(count(src_shape));
  for (auto& v : data) v = normal(random);
  for (auto& v : src) v = normal(random) * 1e3f;  // large: an order change shows in the bits
  std::uniform_int_distribution<int64_t> pick(0, data_shape[size_t(dim)] - 1);
  std::vector<Index> index(count(index_shape));
  for (auto& v : index) v = static_cast<Index>(pick(random));

  const cuda::AlongDim walk = cuda::along_dim_of(data_shape.data(), rank, dim);
  const cuda::IndexShape ishape = cuda::index_shape_of(index_shape.data(), rank, dim);
  const cuda::Strides src_strides = cuda::contiguous_strides(src_shape.data(), rank);
  const std::span<const int64_t> dshape(data_shape), ix(index_shape), sshape(src_shape);

  std::vector<float> want(index.size()), got(index.size());
  cpu::gather_forward(data.data(), dshape, dim, index.data(), ix, want.data());
  cuda::gather_f32_reference(data.data(), walk, index.data(), ishape, got.data());
  CHECK(same_bits(got, want));

  std::vector<float> want_self = data, got_self = data;
  cpu::scatter_add(want_self.data(), dshape, dim, index.data(), ix, src.data(), sshape);
  cuda::scatter_add_f32_reference(got_self.data(), walk, index.data(), ishape, src.data(),
                                  src_strides);
  CHECK(same_bits(got_self, want_self));

  std::vector<float> want_grad(src.size()), got_grad(src.size(), NAN);
  cpu::scatter_add_backward_src(data.data(), dshape, dim, index.data(), ix, want_grad.data(),
                                sshape);
  cuda::scatter_add_backward_src_f32_reference(data.data(), walk, index.data(), ishape,
                                               got_grad.data(), src_strides, int64_t(src.size()));
  CHECK(same_bits(got_grad, want_grad));
}

}  // namespace

TEST_CASE("gather / scatter-add twins equal the CPU kernels bit for bit (sums in index order)") {
  std::mt19937 random(14);
  // 1-D: many ids into few slots, so each slot sums dozens of contributions.
  check_gather_scatter<int64_t>({5}, {300}, {320}, 0, random);
  // 2-D along each dim, index smaller than data off dim and than src everywhere.
  check_gather_scatter<int32_t>({6, 9}, {40, 7}, {41, 8}, 0, random);
  check_gather_scatter<int64_t>({6, 9}, {5, 30}, {6, 31}, 1, random);
  // 4-D along a middle dim (the MoE combine's shape class).
  check_gather_scatter<int32_t>({2, 4, 3, 5}, {2, 11, 2, 5}, {2, 12, 3, 5}, 1, random);
  check_gather_scatter<int64_t>({2, 4, 3, 5}, {1, 3, 3, 17}, {2, 3, 3, 17}, 3, random);
  // Few long lines: the kernel splits each line's destinations into slices (one thread per line
  // and slice, indexing_types.hpp), still one thread per destination in index order.
  REQUIRE(cuda::scatter_add_slices(8, 2000, 64) == 64);
  REQUIRE(cuda::scatter_add_slices(1, 5000, 300) == 256);
  check_gather_scatter<int32_t>({64, 8}, {2000, 8}, {2000, 8}, 0, random);
  check_gather_scatter<int64_t>({300}, {5000}, {5000}, 0, random);
}

TEST_CASE("segment spans: binary search equals a scan on non-decreasing rows") {
  std::mt19937 random(15);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t length = 1 + int64_t(random() % 70);
    std::vector<int32_t> seg(static_cast<size_t>(length));
    int32_t id = int32_t(random() % 3) - 1;
    for (auto& s : seg) {
      if (random() % 4 == 0) id += 1 + int32_t(random() % 2);
      s = id;
    }
    for (int64_t pos = 0; pos < length; ++pos) {
      int64_t begin = pos, end = pos + 1;
      while (begin > 0 && seg[size_t(begin - 1)] == seg[size_t(pos)]) --begin;
      while (end < length && seg[size_t(end)] == seg[size_t(pos)]) ++end;
      CHECK(cuda::math::segment_begin(seg.data(), pos) == begin);
      CHECK(cuda::math::segment_end(seg.data(), length, pos) == end);
    }
  }
}
