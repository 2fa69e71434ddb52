// Gather / scatter-add kernels and references (see gather_scatter.hpp).
//
// The index tensor is viewed as [outer, length, inner] around `dim`. Any dense tensor that
// the index walks (input, self, src) may be larger than the index in every dimension, so
// its element for index coordinate (o, j, i) sits at
//   outer_offsets[o] + j_or_id · dim_stride + inner_offsets[i]
// with the two offset tables precomputed once per call (DimWalk). The hot loops are then
// plain strided loads and stores with no per-element coordinate arithmetic.
// Threads split (outer slice, block of inner lines) pairs; two different pairs never touch
// the same destination element, and within a pair the index rows j run in order, which
// makes scatter_add race-free and deterministic.
#include "patchbay/kernels/gather_scatter.hpp"

#include <algorithm>
#include <vector>

namespace patchbay::kernels {
namespace {

constexpr int64_t kInnerBlock = 512;

int64_t product(ShapeView shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t d = begin; d < end; ++d) p *= shape[d];
  return p;
}

// Row-major strides of a contiguous tensor.
std::vector<int64_t> contiguous_strides(ShapeView shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strides;
}

// Offsets into a dense tensor of shape `dense_shape` for coordinates of `index_shape`,
// split around `dim`.
struct DimWalk {
  int64_t outer = 1, length = 1, inner = 1;  // index shape as [outer, length, inner]
  int64_t dim_stride = 1;                    // dense tensor's stride along dim
  std::vector<int64_t> outer_offsets;        // [outer]
  std::vector<int64_t> inner_offsets;        // [inner]
};

// Offsets for every coordinate of index_shape[begin, end) in a tensor with `strides`.
std::vector<int64_t> unravelled_offsets(ShapeView index_shape, const std::vector<int64_t>& strides,
                                        size_t begin, size_t end) {
  std::vector<int64_t> offsets(static_cast<size_t>(product(index_shape, begin, end)), 0);
  for (size_t flat = 0; flat < offsets.size(); ++flat) {
    int64_t rest = static_cast<int64_t>(flat);
    int64_t offset = 0;
    for (size_t d = end; d-- > begin;) {
      offset += (rest % index_shape[d]) * strides[d];
      rest /= index_shape[d];
    }
    offsets[flat] = offset;
  }
  return offsets;
}

DimWalk make_dim_walk(ShapeView dense_shape, ShapeView index_shape, int dim) {
  const auto d = static_cast<size_t>(dim);
  const auto strides = contiguous_strides(dense_shape);
  DimWalk walk;
  walk.outer = product(index_shape, 0, d);
  walk.length = index_shape[d];
  walk.inner = product(index_shape, d + 1, index_shape.size());
  walk.dim_stride = strides[d];
  walk.outer_offsets = unravelled_offsets(index_shape, strides, 0, d);
  walk.inner_offsets = unravelled_offsets(index_shape, strides, d + 1, index_shape.size());
  return walk;
}

bool worth_threads(int64_t elements) { return elements > (1 << 15); }

// Calls body(o, inner_begin, inner_end) for every (outer slice, inner block), threaded.
template <class Body>
void for_each_line_block(const DimWalk& walk, Body body) {
  const int64_t blocks = (walk.inner + kInnerBlock - 1) / kInnerBlock;
#pragma omp parallel for collapse(2) \
    schedule(static) if (worth_threads(walk.outer * walk.length * walk.inner))
  for (int64_t o = 0; o < walk.outer; ++o)
    for (int64_t b = 0; b < blocks; ++b)
      body(o, b * kInnerBlock, std::min(walk.inner, (b + 1) * kInnerBlock));
}

}  // namespace

template <class Index>
void gather_forward(const float* input, ShapeView input_shape, int dim, const Index* index,
                    ShapeView index_shape, float* out) {
  const DimWalk in = make_dim_walk(input_shape, index_shape, dim);
  for_each_line_block(in, [&](int64_t o, int64_t i_begin, int64_t i_end) {
    const float* in_slice = input + in.outer_offsets[static_cast<size_t>(o)];
    for (int64_t j = 0; j < in.length; ++j) {
      const int64_t row = (o * in.length + j) * in.inner;
      for (int64_t i = i_begin; i < i_end; ++i) {
        const auto id = static_cast<int64_t>(index[row + i]);
        out[row + i] = in_slice[id * in.dim_stride + in.inner_offsets[static_cast<size_t>(i)]];
      }
    }
  });
}

template <class Index>
void scatter_add(float* self, ShapeView self_shape, int dim, const Index* index,
                 ShapeView index_shape, const float* src, ShapeView src_shape) {
  const DimWalk dst = make_dim_walk(self_shape, index_shape, dim);
  const DimWalk from = make_dim_walk(src_shape, index_shape, dim);
  for_each_line_block(dst, [&](int64_t o, int64_t i_begin, int64_t i_end) {
    float* dst_slice = self + dst.outer_offsets[static_cast<size_t>(o)];
    const float* src_slice = src + from.outer_offsets[static_cast<size_t>(o)];
    for (int64_t j = 0; j < dst.length; ++j) {
      const int64_t row = (o * dst.length + j) * dst.inner;
      const float* src_row = src_slice + j * from.dim_stride;
      for (int64_t i = i_begin; i < i_end; ++i) {
        const auto id = static_cast<int64_t>(index[row + i]);
        const auto ii = static_cast<size_t>(i);
        dst_slice[id * dst.dim_stride + dst.inner_offsets[ii]] += src_row[from.inner_offsets[ii]];
      }
    }
  });
}

template <class Index>
void gather_backward(const float* grad_out, const Index* index, ShapeView index_shape, int dim,
                     float* grad_input, ShapeView input_shape) {
  scatter_add(grad_input, input_shape, dim, index, index_shape, grad_out, index_shape);
}

template <class Index>
void scatter_add_backward_src(const float* grad_out, ShapeView self_shape, int dim,
                              const Index* index, ShapeView index_shape, float* grad_src,
                              ShapeView src_shape) {
  std::fill(grad_src, grad_src + product(src_shape, 0, src_shape.size()), 0.0f);
  const DimWalk from = make_dim_walk(self_shape, index_shape, dim);
  const DimWalk to = make_dim_walk(src_shape, index_shape, dim);
  for_each_line_block(from, [&](int64_t o, int64_t i_begin, int64_t i_end) {
    const float* from_slice = grad_out + from.outer_offsets[static_cast<size_t>(o)];
    float* to_slice = grad_src + to.outer_offsets[static_cast<size_t>(o)];
    for (int64_t j = 0; j < from.length; ++j) {
      const int64_t row = (o * from.length + j) * from.inner;
      float* to_row = to_slice + j * to.dim_stride;
      for (int64_t i = i_begin; i < i_end; ++i) {
        const auto id = static_cast<int64_t>(index[row + i]);
        const auto ii = static_cast<size_t>(i);
        to_row[to.inner_offsets[ii]] = from_slice[id * from.dim_stride + from.inner_offsets[ii]];
      }
    }
  });
}

namespace {

// Flat offset in a contiguous tensor of `shape` for `coords`, with coords[dim] replaced.
int64_t offset_with(ShapeView shape, const std::vector<int64_t>& coords, size_t dim,
                    int64_t dim_coord) {
  int64_t offset = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    offset = offset * shape[d] + (d == dim ? dim_coord : coords[d]);
  return offset;
}

// Coordinates of flat position `flat` in a contiguous tensor of `shape`.
std::vector<int64_t> unravel(int64_t flat, ShapeView shape) {
  std::vector<int64_t> coords(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    coords[d] = flat % shape[d];
    flat /= shape[d];
  }
  return coords;
}

}  // namespace

template <class Index>
void gather_forward_reference(const float* input, ShapeView input_shape, int dim,
                              const Index* index, ShapeView index_shape, float* out) {
  const int64_t count = product(index_shape, 0, index_shape.size());
  const auto d = static_cast<size_t>(dim);
  for (int64_t flat = 0; flat < count; ++flat) {
    const auto coords = unravel(flat, index_shape);
    out[flat] = input[offset_with(input_shape, coords, d, static_cast<int64_t>(index[flat]))];
  }
}

template <class Index>
void scatter_add_reference(float* self, ShapeView self_shape, int dim, const Index* index,
                           ShapeView index_shape, const float* src, ShapeView src_shape) {
  const int64_t count = product(index_shape, 0, index_shape.size());
  const auto d = static_cast<size_t>(dim);
  for (int64_t flat = 0; flat < count; ++flat) {
    const auto coords = unravel(flat, index_shape);
    self[offset_with(self_shape, coords, d, static_cast<int64_t>(index[flat]))] +=
        src[offset_with(src_shape, coords, d, coords[d])];
  }
}

#define PATCHBAY_INSTANTIATE_GATHER_SCATTER(Index)                                                \
  template void gather_forward<Index>(const float*, ShapeView, int, const Index*, ShapeView,      \
                                      float*);                                                    \
  template void scatter_add<Index>(float*, ShapeView, int, const Index*, ShapeView, const float*, \
                                   ShapeView);                                                    \
  template void gather_backward<Index>(const float*, const Index*, ShapeView, int, float*,        \
                                       ShapeView);                                                \
  template void scatter_add_backward_src<Index>(const float*, ShapeView, int, const Index*,       \
                                                ShapeView, float*, ShapeView);                    \
  template void gather_forward_reference<Index>(const float*, ShapeView, int, const Index*,       \
                                                ShapeView, float*);                               \
  template void scatter_add_reference<Index>(float*, ShapeView, int, const Index*, ShapeView,     \
                                             const float*, ShapeView);
PATCHBAY_INSTANTIATE_GATHER_SCATTER(int32_t)
PATCHBAY_INSTANTIATE_GATHER_SCATTER(int64_t)
#undef PATCHBAY_INSTANTIATE_GATHER_SCATTER

}  // namespace patchbay::kernels
