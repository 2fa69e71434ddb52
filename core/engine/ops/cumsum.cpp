// cumsum(x, dim, reverse): the engine op around the raw-pointer kernel in kernels/indexing
// (patchbay/kernels/cumsum.hpp). The contiguous f32 input is viewed as [outer, length,
// inner] around dim; the backward is the same op in the other direction, so it is itself
// differentiable.
#include "patchbay/kernels/cumsum.hpp"

#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops.hpp"
#include "engine/ops/op_helpers.hpp"

namespace patchbay::engine {
namespace {

using kernel::CumsumKernel;

void cumsum_cpu(const Tensor& x, int64_t dim, bool reverse, Tensor& out) {
  const Shape& shape = x.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[static_cast<size_t>(d)];
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= shape[static_cast<size_t>(d)];
  kernels::cumsum_forward(x.data<float>(), outer, shape[static_cast<size_t>(dim)], inner, reverse,
                          out.data<float>());
}
PATCHBAY_REGISTER_KERNEL(CumsumKernel, "cumsum", DeviceType::kCpu, cumsum_cpu);

}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim, bool reverse) {
  detail::check_float(x, "cumsum");
  if (x.dim() == 0)
    throw Error(ErrorKind::kInvalidArgument,
                detail::shape_message("cumsum", "a tensor with at least one dim", x));
  const int64_t d = normalize_dim(dim, x.dim(), "cumsum");
  Tensor x32 = detail::as_f32_contiguous(x);
  Tensor out = Tensor::empty(x.shape(), DType::kF32, x.device());
  find_kernel<CumsumKernel>("cumsum", x.device().type)(x32, d, reverse, out);
  out = detail::from_f32(out, x.dtype());
  record_op("cumsum", {x}, {&out}, [d, reverse](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{cumsum(g[0], d, !reverse)};
  });
  return out;
}

}  // namespace patchbay::engine
