// Gather, scatter-add and scatter-add's src gradient (indexing.hpp). gather and the backward
// run one thread per index element (grid-stride); scatter_add one thread per index line and
// destination slice (indexing_types.hpp: scatter_add_slices), walking the line along dim in
// index order (the CPU kernel's order, hence its sums bit for bit). Consecutive threads take
// consecutive flat positions / inner positions, so the index loads and, for a gather along a
// leading dim, the data loads coalesce.
#include "launch.cuh"
#include "patchbay/kernels/cuda/fill.hpp"
#include "patchbay/kernels/cuda/indexing.hpp"

namespace patchbay::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// The index shape as [outer, length, inner] around dim.
struct Lines {
  int64_t length = 1, inner = 1, count = 0;  // count = outer * inner
};

Lines lines_of(const IndexShape& index) {
  Lines lines;
  int64_t total = 1;
  for (int d = 0; d < index.shape.rank; ++d) {
    total *= index.shape.sizes[d];
    if (d > index.dim) lines.inner *= index.shape.sizes[d];
  }
  lines.length = index.shape.sizes[index.dim];
  lines.count = lines.length == 0 ? 0 : total / lines.length;
  return lines;
}

template <class Index>
__global__ void gather_kernel(const float* input, AlongDim walk, const Index* index,
                              StridedShape shape, float* out, int64_t count) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t flat = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; flat < count;
       flat += stride) {
    const auto id = static_cast<int64_t>(index[flat]);
    out[flat] = (id >= 0 && id < walk.dim_size)
                    ? input[strided_offset(shape, walk.without_dim, flat) + id * walk.dim_stride]
                    : __int_as_float(0x7fc00000);
  }
}

// Thread (line, slice): work item w = slice * line_count + line (consecutive threads take
// consecutive lines, whose index entries are adjacent); destinations [first, end) only.
template <class Index>
__global__ void scatter_add_lines_kernel(float* self, AlongDim walk, const Index* index,
                                         StridedShape shape, const float* src, Strides src_strides,
                                         int64_t line_count, int64_t length, int64_t inner,
                                         int64_t slices) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t per_slice = (walk.dim_size + slices - 1) / slices;
  for (int64_t work = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; work < line_count * slices;
       work += stride) {
    const int64_t line = work % line_count, slice = work / line_count;
    const int64_t first = slice * per_slice;
    const int64_t end = first + per_slice < walk.dim_size ? first + per_slice : walk.dim_size;
    const int64_t outer = line / inner, i = line % inner;
    for (int64_t j = 0; j < length; ++j) {
      const int64_t flat = (outer * length + j) * inner + i;
      const auto id = static_cast<int64_t>(index[flat]);
      if (id < first || id >= end) continue;
      self[strided_offset(shape, walk.without_dim, flat) + id * walk.dim_stride] +=
          src[strided_offset(shape, src_strides, flat)];
    }
  }
}

template <class Index>
__global__ void scatter_add_backward_src_kernel(const float* grad_out, AlongDim walk,
                                                const Index* index, StridedShape shape,
                                                float* grad_src, Strides src_strides,
                                                int64_t count) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t flat = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; flat < count;
       flat += stride) {
    const auto id = static_cast<int64_t>(index[flat]);
    if (id < 0 || id >= walk.dim_size) continue;
    grad_src[strided_offset(shape, src_strides, flat)] =
        grad_out[strided_offset(shape, walk.without_dim, flat) + id * walk.dim_stride];
  }
}

}  // namespace

template <class Index>
cudaError_t gather_f32(const float* input, const AlongDim& input_walk, const Index* index,
                       const IndexShape& index_shape, float* out, cudaStream_t stream) {
  const int64_t count = element_count(index_shape.shape);
  if (count <= 0) return cudaSuccess;
  gather_kernel<Index><<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(
      input, input_walk, index, index_shape.shape, out, count);
  return cudaGetLastError();
}

template <class Index>
cudaError_t scatter_add_f32(float* self, const AlongDim& self_walk, const Index* index,
                            const IndexShape& index_shape, const float* src,
                            const Strides& src_strides, cudaStream_t stream) {
  const Lines lines = lines_of(index_shape);
  if (lines.count <= 0) return cudaSuccess;
  const int64_t slices = scatter_add_slices(lines.count, lines.length, self_walk.dim_size);
  scatter_add_lines_kernel<Index>
      <<<detail::grid_stride_blocks(lines.count * slices, kThreads), kThreads, 0, stream>>>(
          self, self_walk, index, index_shape.shape, src, src_strides, lines.count, lines.length,
          lines.inner, slices);
  return cudaGetLastError();
}

template <class Index>
cudaError_t scatter_add_backward_src_f32(const float* grad_out, const AlongDim& self_walk,
                                         const Index* index, const IndexShape& index_shape,
                                         float* grad_src, const Strides& src_strides,
                                         int64_t src_count, cudaStream_t stream) {
  if (src_count <= 0) return cudaSuccess;
  if (const cudaError_t status = fill_f32(grad_src, src_count, 0.0f, stream); status != cudaSuccess)
    return status;
  const int64_t count = element_count(index_shape.shape);
  if (count <= 0) return cudaSuccess;
  scatter_add_backward_src_kernel<Index>
      <<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(
          grad_out, self_walk, index, index_shape.shape, grad_src, src_strides, count);
  return cudaGetLastError();
}

#define PATCHBAY_INSTANTIATE_GATHER_SCATTER(Index)                                             \
  template cudaError_t gather_f32<Index>(const float*, const AlongDim&, const Index*,          \
                                         const IndexShape&, float*, cudaStream_t);             \
  template cudaError_t scatter_add_f32<Index>(float*, const AlongDim&, const Index*,           \
                                              const IndexShape&, const float*, const Strides&, \
                                              cudaStream_t);                                   \
  template cudaError_t scatter_add_backward_src_f32<Index>(                                    \
      const float*, const AlongDim&, const Index*, const IndexShape&, float*, const Strides&,  \
      int64_t, cudaStream_t);
PATCHBAY_INSTANTIATE_GATHER_SCATTER(int32_t)
PATCHBAY_INSTANTIATE_GATHER_SCATTER(int64_t)
#undef PATCHBAY_INSTANTIATE_GATHER_SCATTER

}  // namespace patchbay::kernels::cuda
