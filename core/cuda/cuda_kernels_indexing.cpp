// The CUDA dispatch entries of the indexing ops (engine/kernel_signatures.hpp): gather,
// scatter_add and its src gradient, sort, top-k and their shared selection backward, through
// kernels/cuda/indexing.hpp (results equal to the CPU kernels' bit for bit: scatter_add adds in
// index order, sort and top-k order ties as the CPU does).
// Nothing is read back: gather and scatter_add check the index on the device
// (kernels/cuda/index_checks.hpp) into the device's error record, raised with the CPU's wording
// at the host's next read (engine/device_index_errors.hpp); the backward reuses the forward's
// checked index and skips a bad entry.
#include <cuda_runtime_api.h>

#include <string>

#include "cuda/cuda_kernel_support.hpp"
#include "engine/device_index_errors.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops/index_tensor.hpp"
#include "patchbay/kernels/cuda/index_checks.hpp"
#include "patchbay/kernels/cuda/indexing.hpp"
#include "patchbay/kernels/cuda/math/sort_keys.hpp"

namespace patchbay::cuda {
namespace {

using engine::DType;
using engine::Tensor;
namespace kc = kernels::cuda;
namespace sig = engine::kernel;

// Checks the index on the device against [0, data.size(dim)): a bad entry goes into the
// device's error record (raised at the host's next read, engine/device_index_errors.hpp); the
// kernels read and write nothing for it (gather writes NaN there).
template <class Index>
void check_index_on_device(const Tensor& index, const Tensor& data, int64_t dim,
                           kc::math::IndexErrorOp op, cudaStream_t stream) {
  const kc::math::IndexCheck check{.op = op, .bound = data.size(dim), .detail = dim};
  check_launch(kc::check_indices(index.data<Index>(), index.numel(), check,
                                 engine::index_error_record_for(index.device()), nullptr, stream),
               "index check");
}

struct Walks {
  kc::AlongDim data;
  kc::IndexShape index;
};

// `data` (gather's input / scatter_add's self) walked along dim at `index`'s coordinates.
Walks walks_of(const char* op, const Tensor& data, int64_t dim, const Tensor& index) {
  const kc::StridedShape shape = strided_shape_of(op, index);  // refuses rank > 8
  return {kc::along_dim_of(data.shape().data(), shape.rank, static_cast<int>(dim)),
          kc::index_shape_of(index.shape().data(), shape.rank, static_cast<int>(dim))};
}

void gather_cuda(const Tensor& input, int64_t dim, const Tensor& index, Tensor& out) {
  if (out.numel() == 0) return;
  const Walks walks = walks_of("gather", input, dim, index);
  const OnDeviceOf on(out);
  engine::detail::visit_index_type(index, [&](auto index_type) {
    using Index = decltype(index_type);
    check_index_on_device<Index>(index, input, dim, kc::math::IndexErrorOp::kGatherIndex,
                                 on.stream);
    check_launch(kc::gather_f32(input.data<float>(), walks.data, index.data<Index>(), walks.index,
                                out.data<float>(), on.stream),
                 "gather");
  });
}

void scatter_add_cuda(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  if (index.numel() == 0) return;
  const Walks walks = walks_of("scatter_add", self, dim, index);
  const kc::Strides src_strides =
      kc::contiguous_strides(src.shape().data(), walks.index.shape.rank);
  const OnDeviceOf on(self);
  engine::detail::visit_index_type(index, [&](auto index_type) {
    using Index = decltype(index_type);
    check_index_on_device<Index>(index, self, dim, kc::math::IndexErrorOp::kScatterAddIndex,
                                 on.stream);
    check_launch(kc::scatter_add_f32(self.data<float>(), walks.data, index.data<Index>(),
                                     walks.index, src.data<float>(), src_strides, on.stream),
                 "scatter_add");
  });
}

// The index was checked by the forward.
void scatter_add_backward_src_cuda(const Tensor& grad_out, int64_t dim, const Tensor& index,
                                   Tensor& grad_src) {
  if (grad_src.numel() == 0) return;
  const Walks walks = walks_of("scatter_add_backward_src", grad_out, dim, index);
  const kc::Strides src_strides =
      kc::contiguous_strides(grad_src.shape().data(), walks.index.shape.rank);
  const OnDeviceOf on(grad_src);
  engine::detail::visit_index_type(index, [&](auto index_type) {
    using Index = decltype(index_type);
    check_launch(kc::scatter_add_backward_src_f32(
                     grad_out.data<float>(), walks.data, index.data<Index>(), walks.index,
                     grad_src.data<float>(), src_strides, grad_src.numel(), on.stream),
                 "scatter_add_backward_src");
  });
}

int64_t rows_of(const Tensor& x) { return x.size(-1) == 0 ? 0 : x.numel() / x.size(-1); }

// The first `count` of each row of x in sorted order (descending: largest first).
void sorted_rows(const char* op, const Tensor& x, int64_t count, bool descending, Tensor& values,
                 Tensor& indices) {
  const int64_t rows = rows_of(x), length = x.size(-1);
  if (rows == 0 || count == 0) return;
  if (length >= kc::math::kMaxSortLength)
    refuse_op(op,
              "rows of at most " + std::to_string(kc::math::kMaxSortLength - 1) +
                  " elements can be sorted on the GPU, found " + std::to_string(length),
              x);
  Tensor workspace =
      Tensor::empty({kc::sort_workspace_keys(rows, length)}, DType::kI64, x.device());
  const OnDeviceOf on(values);
  check_launch(kc::sort_rows_f32(x.data<float>(), rows, length, count, descending,
                                 values.data<float>(), indices.data<int64_t>(),
                                 reinterpret_cast<uint64_t*>(workspace.data<int64_t>()), on.stream),
               op);
}

void sort_cuda(const Tensor& x, bool descending, Tensor& values, Tensor& indices) {
  sorted_rows("sort", x, x.size(-1), descending, values, indices);
}

void topk_cuda(const Tensor& x, int64_t k, bool largest, Tensor& values, Tensor& indices) {
  sorted_rows("topk", x, k, largest, values, indices);
}

void selection_backward_cuda(const Tensor& grad_selected, const Tensor& indices, Tensor& grad_x) {
  if (grad_x.numel() == 0) return;
  const OnDeviceOf on(grad_x);
  check_launch(kc::selection_backward_f32(grad_selected.data<float>(), indices.data<int64_t>(),
                                          rows_of(grad_x), grad_x.size(-1), indices.size(-1),
                                          grad_x.data<float>(), on.stream),
               "selection_backward");
}

}  // namespace

void register_indexing_kernels() {
  using engine::DeviceType;
  using engine::register_kernel;
  register_kernel<sig::GatherKernel>("gather", DeviceType::kCuda, gather_cuda);
  register_kernel<sig::ScatterAddKernel>("scatter_add", DeviceType::kCuda, scatter_add_cuda);
  register_kernel<sig::ScatterAddBackwardSrcKernel>("scatter_add_backward_src", DeviceType::kCuda,
                                                    scatter_add_backward_src_cuda);
  register_kernel<sig::SortKernel>("sort", DeviceType::kCuda, sort_cuda);
  register_kernel<sig::TopkKernel>("topk", DeviceType::kCuda, topk_cuda);
  register_kernel<sig::SelectionBackwardKernel>("selection_backward", DeviceType::kCuda,
                                                selection_backward_cuda);
}

}  // namespace patchbay::cuda
