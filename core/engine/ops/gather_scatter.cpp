// gather(input, dim, index) and scatter_add(self, dim, index, src): the engine ops around
// the raw-pointer kernels in kernels/indexing (patchbay/kernels/gather_scatter.hpp), with
// PyTorch's shape rules. gather's backward is scatter_add into zeros and scatter_add's
// gradient for src is a gather (kernel scatter_add_backward_src, which also zeroes the part
// of src the index does not reach). The CPU kernels check every index entry first.
#include "patchbay/kernels/gather_scatter.hpp"

#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops.hpp"
#include "engine/ops/index_tensor.hpp"
#include "engine/ops/op_helpers.hpp"

namespace patchbay::engine {
namespace {

using kernel::GatherKernel;
using kernel::ScatterAddBackwardSrcKernel;
using kernel::ScatterAddKernel;

// Throws unless every index entry lies in [0, limit).
template <class Index>
void check_index_range(const Tensor& index, int64_t limit, int64_t dim, const char* op) {
  detail::check_index_values_in_range(index.data<Index>(), index, limit, dim, op);
}

void gather_cpu(const Tensor& input, int64_t dim, const Tensor& index, Tensor& out) {
  detail::visit_index_type(index, [&](auto index_type) {
    using Index = decltype(index_type);
    check_index_range<Index>(index, input.size(dim), dim, "gather");
    kernels::gather_forward(input.data<float>(), input.shape(), static_cast<int>(dim),
                            index.data<Index>(), index.shape(), out.data<float>());
  });
}
PATCHBAY_REGISTER_KERNEL(GatherKernel, "gather", DeviceType::kCpu, gather_cpu);

void scatter_add_cpu(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::visit_index_type(index, [&](auto index_type) {
    using Index = decltype(index_type);
    check_index_range<Index>(index, self.size(dim), dim, "scatter_add");
    kernels::scatter_add(self.data<float>(), self.shape(), static_cast<int>(dim),
                         index.data<Index>(), index.shape(), src.data<float>(), src.shape());
  });
}
PATCHBAY_REGISTER_KERNEL(ScatterAddKernel, "scatter_add", DeviceType::kCpu, scatter_add_cpu);

void scatter_add_backward_src_cpu(const Tensor& grad_out, int64_t dim, const Tensor& index,
                                  Tensor& grad_src) {
  detail::visit_index_type(index, [&](auto index_type) {
    using Index = decltype(index_type);
    kernels::scatter_add_backward_src(grad_out.data<float>(), grad_out.shape(),
                                      static_cast<int>(dim), index.data<Index>(), index.shape(),
                                      grad_src.data<float>(), grad_src.shape());
  });
}
PATCHBAY_REGISTER_KERNEL(ScatterAddBackwardSrcKernel, "scatter_add_backward_src", DeviceType::kCpu,
                         scatter_add_backward_src_cpu);

// Rank and per-dim size rules shared by gather and scatter_add: index.size(d) <= data.size(d)
// for every d (d != dim unless including_dim).
void check_index_fits(const Tensor& data, const char* data_name, const Tensor& index, int64_t dim,
                      bool including_dim, const char* op) {
  bool fits = data.dim() == index.dim();
  for (int64_t d = 0; fits && d < data.dim(); ++d)
    if ((d != dim || including_dim) && index.size(d) > data.size(d)) fits = false;
  if (!fits)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(op) + ": index " + index.str() + " must have the rank of " + data_name +
                    " " + data.str() + " and no larger size in any dim" +
                    (including_dim ? "" : " other than dim " + std::to_string(dim)));
}

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  if (a.device() != b.device())
    throw Error(ErrorKind::kInvalidArgument,
                std::string(op) + ": " + a.str() + " and " + b.str() + " are on different devices");
}

}  // namespace

Tensor gather(const Tensor& input, int64_t dim, const Tensor& index) {
  detail::check_float(input, "gather");
  detail::check_index_tensor(index, "gather", "index");
  check_same_device(input, index, "gather");
  if (input.dim() == 0)
    throw Error(ErrorKind::kInvalidArgument,
                detail::shape_message("gather", "input with at least one dim", input));
  const int64_t d = normalize_dim(dim, input.dim(), "gather");
  check_index_fits(input, "input", index, d, false, "gather");
  Tensor input32 = detail::as_f32_contiguous(input);
  Tensor index_contiguous = index.detach().contiguous();
  Tensor out = Tensor::empty(index.shape(), DType::kF32, input.device());
  find_kernel<GatherKernel>("gather", input.device().type)(input32, d, index_contiguous, out);
  out = detail::from_f32(out, input.dtype());
  record_op("gather", {input}, {&out},
            [d, index_contiguous, input_shape = input.shape(),
             device = input.device()](const std::vector<Tensor>& g) {
              return std::vector<Tensor>{
                  scatter_add(zeros(input_shape, g[0].dtype(), device), d, index_contiguous, g[0])};
            });
  return out;
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_same(self, src, "scatter_add");
  detail::check_index_tensor(index, "scatter_add", "index");
  check_same_device(self, index, "scatter_add");
  if (self.dim() == 0)
    throw Error(ErrorKind::kInvalidArgument,
                detail::shape_message("scatter_add", "self with at least one dim", self));
  const int64_t d = normalize_dim(dim, self.dim(), "scatter_add");
  check_index_fits(self, "self", index, d, false, "scatter_add");
  check_index_fits(src, "src", index, d, true, "scatter_add");
  Tensor out = detail::as_f32(self).clone();  // a fresh contiguous f32 copy to add into
  Tensor src32 = detail::as_f32_contiguous(src);
  Tensor index_contiguous = index.detach().contiguous();
  find_kernel<ScatterAddKernel>("scatter_add", self.device().type)(out, d, index_contiguous, src32);
  out = detail::from_f32(out, self.dtype());
  record_op("scatter_add", {self, src}, {&out},
            [d, index_contiguous, src_shape = src.shape(),
             device = src.device()](const std::vector<Tensor>& g) {
              Tensor grad_out = detail::as_f32_contiguous(g[0]);
              Tensor grad_src = Tensor::empty(src_shape, DType::kF32, device);
              find_kernel<ScatterAddBackwardSrcKernel>("scatter_add_backward_src", device.type)(
                  grad_out, d, index_contiguous, grad_src);
              return std::vector<Tensor>{g[0], grad_src};
            });
  return out;
}

}  // namespace patchbay::engine
