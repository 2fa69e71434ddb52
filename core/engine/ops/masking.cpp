// masked_fill and dropout. masked_fill writes `value` where the (broadcast) mask is
// non-zero; its gradient is the incoming gradient with the masked positions zeroed.
// dropout draws a keep-mask from the generator (uniform >= p keeps, scaled by 1/(1-p))
// and multiplies, so its backward is the multiplication's.
#include "engine/cpu/strided_loop.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops/op_helpers.hpp"

namespace patchbay::engine {
namespace {

using kernel::DropoutMaskKernel;
using kernel::MaskedFillKernel;

void masked_fill_cpu(const Tensor& x, const Tensor& mask, double value, Tensor& out) {
  const float* px = x.data<float>();
  const void* pm = mask.data_ptr();
  const DType mt = mask.dtype();
  float* po = out.data<float>();
  const auto v = static_cast<float>(value);
  loops::for_each_row<3>(
      out.shape(), {x.strides(), mask.strides(), out.strides()},
      [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
        for (int64_t i = 0; i < n; ++i) {
          bool masked = load_as_f64(pm, off[1] + i * st[1], mt) != 0.0;
          po[off[2] + i * st[2]] = masked ? v : px[off[0] + i * st[0]];
        }
      });
}
PATCHBAY_REGISTER_KERNEL(MaskedFillKernel, "masked_fill", DeviceType::kCpu, masked_fill_cpu);

void dropout_mask_cpu(const Tensor& u, double p, Tensor& keep) {
  const float* pu = u.data<float>();
  float* pk = keep.data<float>();
  const auto pf = static_cast<float>(p);
  const auto scale = static_cast<float>(1.0 / (1.0 - p));
  const int64_t n = u.numel();
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) pk[i] = pu[i] >= pf ? scale : 0.0f;
}
PATCHBAY_REGISTER_KERNEL(DropoutMaskKernel, "dropout_mask", DeviceType::kCpu, dropout_mask_cpu);

}  // namespace

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  detail::check_float(x, "masked_fill");
  if (!mask.defined() || mask.device() != x.device())
    throw Error(ErrorKind::kInvalidArgument,
                "masked_fill: mask must be defined and on " + x.device().str());
  Shape shape = broadcast_shapes(x.shape(), mask.shape());
  if (shape != x.shape())
    throw Error(ErrorKind::kInvalidArgument, "masked_fill: mask " + mask.str() +
                                                 " must broadcast to " + x.str() +
                                                 " without growing it");
  Tensor out = Tensor::empty(shape, DType::kF32, x.device());
  Tensor m = mask.detach().expand(shape);
  find_kernel<MaskedFillKernel>("masked_fill", x.device().type)(detail::as_f32(x), m, value, out);
  out = detail::from_f32(out, x.dtype());
  record_op("masked_fill", {x}, {&out}, [m](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{masked_fill(g[0], m, 0.0)};
  });
  return out;
}

Tensor dropout(const Tensor& x, double p, Generator& gen, bool training) {
  detail::check_float(x, "dropout");
  if (!(p >= 0.0 && p < 1.0))
    throw Error(ErrorKind::kInvalidArgument,
                "dropout: p must be in [0, 1), found " + std::to_string(p));
  if (!training || p == 0.0) return x;
  Tensor keep;
  {
    NoGradGuard no_grad;
    Tensor u = uniform(x.shape(), gen, 0.0, 1.0, DType::kF32, x.device());
    keep = Tensor::empty(x.shape(), DType::kF32, x.device());
    find_kernel<DropoutMaskKernel>("dropout_mask", x.device().type)(u, p, keep);
    keep = keep.to(x.dtype());
  }
  return mul(x, keep);
}

}  // namespace patchbay::engine
