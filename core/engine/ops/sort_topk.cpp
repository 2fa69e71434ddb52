// sort, argsort and topk: the engine ops around the raw-pointer kernels in kernels/indexing
// (patchbay/kernels/sort_topk.hpp), which work along the last dim of a contiguous f32
// [rows, length] buffer. Another dim is moved last with transpose (a differentiable view)
// and moved back afterwards, so one recorded op per kernel covers every dim. The values'
// backward scatters their gradient into zeros at the selected positions.
#include "patchbay/kernels/sort_topk.hpp"

#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops.hpp"
#include "engine/ops/op_helpers.hpp"

namespace patchbay::engine {
namespace {

using kernel::SelectionBackwardKernel;
using kernel::SortKernel;
using kernel::TopkKernel;

int64_t rows_of(const Tensor& x) { return x.size(-1) == 0 ? 0 : x.numel() / x.size(-1); }

void sort_cpu(const Tensor& x, bool descending, Tensor& values, Tensor& indices) {
  kernels::sort_last_dim(
      x.data<float>(), rows_of(x), x.size(-1),
      descending ? kernels::SortOrder::kDescending : kernels::SortOrder::kAscending,
      values.data<float>(), indices.data<int64_t>());
}
PATCHBAY_REGISTER_KERNEL(SortKernel, "sort", DeviceType::kCpu, sort_cpu);

void topk_cpu(const Tensor& x, int64_t k, bool largest, Tensor& values, Tensor& indices) {
  kernels::topk_last_dim(x.data<float>(), rows_of(x), x.size(-1), k, largest, values.data<float>(),
                         indices.data<int64_t>());
}
PATCHBAY_REGISTER_KERNEL(TopkKernel, "topk", DeviceType::kCpu, topk_cpu);

void selection_backward_cpu(const Tensor& grad_selected, const Tensor& indices, Tensor& grad_x) {
  kernels::selection_backward_last_dim(grad_selected.data<float>(), indices.data<int64_t>(),
                                       rows_of(grad_x), grad_x.size(-1), indices.size(-1),
                                       grad_x.data<float>());
}
PATCHBAY_REGISTER_KERNEL(SelectionBackwardKernel, "selection_backward", DeviceType::kCpu,
                         selection_backward_cpu);

// Records the shared backward on `values`: grad_x[..., indices[..., j]] = grad[..., j].
void record_selection(const char* name, const Tensor& x, Tensor& values, Tensor& indices) {
  record_op(name, {x}, {&values, &indices},
            [indices = indices.detach(), x_shape = x.shape(),
             device = x.device()](const std::vector<Tensor>& g) {
              Tensor grad_selected = detail::as_f32_contiguous(g[0]);
              Tensor grad_x = Tensor::empty(x_shape, DType::kF32, device);
              find_kernel<SelectionBackwardKernel>("selection_backward", device.type)(
                  grad_selected, indices, grad_x);
              return std::vector<Tensor>{grad_x};
            });
}

// sort along the last dim.
ValuesIndices sort_last(const Tensor& x, bool descending) {
  Tensor x32 = detail::as_f32_contiguous(x);
  Tensor values = Tensor::empty(x.shape(), DType::kF32, x.device());
  Tensor indices = Tensor::empty(x.shape(), DType::kI64, x.device());
  find_kernel<SortKernel>("sort", x.device().type)(x32, descending, values, indices);
  values = detail::from_f32(values, x.dtype());
  record_selection("sort", x, values, indices);
  return {values, indices};
}

// topk along the last dim.
ValuesIndices topk_last(const Tensor& x, int64_t k, bool largest) {
  Shape out_shape = x.shape();
  out_shape.back() = k;
  Tensor x32 = detail::as_f32_contiguous(x);
  Tensor values = Tensor::empty(out_shape, DType::kF32, x.device());
  Tensor indices = Tensor::empty(out_shape, DType::kI64, x.device());
  find_kernel<TopkKernel>("topk", x.device().type)(x32, k, largest, values, indices);
  values = detail::from_f32(values, x.dtype());
  record_selection("topk", x, values, indices);
  return {values, indices};
}

// Runs `along_last` with dim d moved last, then moves the results' last dim back to d.
template <class AlongLast>
ValuesIndices along_dim(const Tensor& x, int64_t d, AlongLast along_last) {
  const int64_t last = x.dim() - 1;
  if (d == last) return along_last(x);
  ValuesIndices moved = along_last(x.transpose(d, last));
  return {moved.values.transpose(d, last).contiguous(),
          moved.indices.transpose(d, last).contiguous()};
}

int64_t checked_dim(const Tensor& x, int64_t dim, const char* op) {
  detail::check_float(x, op);
  if (x.dim() == 0)
    throw Error(ErrorKind::kInvalidArgument,
                detail::shape_message(op, "a tensor with at least one dim", x));
  return normalize_dim(dim, x.dim(), op);
}

}  // namespace

ValuesIndices sort(const Tensor& x, int64_t dim, bool descending) {
  const int64_t d = checked_dim(x, dim, "sort");
  return along_dim(x, d, [&](const Tensor& t) { return sort_last(t, descending); });
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  NoGradGuard no_grad;  // indices carry no gradient
  return sort(x, dim, descending).indices;
}

ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest) {
  const int64_t d = checked_dim(x, dim, "topk");
  if (k < 0 || k > x.size(d))
    throw Error(ErrorKind::kInvalidArgument,
                "topk: k must lie in [0, " + std::to_string(x.size(d)) + "] (the size of dim " +
                    std::to_string(d) + " of " + x.str() + "), found " + std::to_string(k));
  return along_dim(x, d, [&](const Tensor& t) { return topk_last(t, k, largest); });
}

}  // namespace patchbay::engine
