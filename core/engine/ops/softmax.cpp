// softmax and log-softmax over the last dim. CPU: oneDNN softmax forward/backward on
// contiguous f32 [rows, cols] (backward from the saved output) for large inputs; plain loops
// for small ones and in builds without oneDNN.
#include <cmath>
#include <limits>

#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops/op_helpers.hpp"
#include "onednn/onednn_ops.hpp"

namespace patchbay::engine {
namespace {

using kernel::SoftmaxBackwardKernel;
using kernel::SoftmaxKernel;

// Below this many elements the plain loop beats a oneDNN call (primitive lookup + OpenMP
// team start dominate; measured ~1-2 us per call on tiny rows).
constexpr int64_t kOnednnMinElements = 16384;

void softmax_cpu(bool log, const Tensor& x, int64_t rows, int64_t cols, Tensor& y) {
  if (rows * cols == 0) return;
  if (rows * cols >= kOnednnMinElements) {
    onednn::softmax_forward(log ? onednn::SoftmaxKind::kLogSoftmax : onednn::SoftmaxKind::kSoftmax,
                            x.data<float>(), y.data<float>(), rows, cols);
    return;
  }
  const float* px = x.data<float>();
  float* py = y.data<float>();
#pragma omp parallel for schedule(static) if (rows * cols >= kOnednnMinElements)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = px + r * cols;
    float* yr = py + r * cols;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < cols; ++j) mx = std::max(mx, xr[j]);
    double s = 0.0;
    for (int64_t j = 0; j < cols; ++j) s += std::exp(xr[j] - mx);
    for (int64_t j = 0; j < cols; ++j)
      yr[j] = log ? xr[j] - mx - static_cast<float>(std::log(s))
                  : static_cast<float>(std::exp(xr[j] - mx) / s);
  }
}
PATCHBAY_REGISTER_KERNEL(SoftmaxKernel, "softmax", DeviceType::kCpu, softmax_cpu);

void softmax_backward_cpu(bool log, const Tensor& y, const Tensor& dy, int64_t rows, int64_t cols,
                          Tensor& dx) {
  if (rows * cols == 0) return;
  if (rows * cols >= kOnednnMinElements) {
    onednn::softmax_backward(log ? onednn::SoftmaxKind::kLogSoftmax : onednn::SoftmaxKind::kSoftmax,
                             y.data<float>(), dy.data<float>(), dx.data<float>(), rows, cols);
    return;
  }
  const float* py = y.data<float>();
  const float* pg = dy.data<float>();
  float* pd = dx.data<float>();
#pragma omp parallel for schedule(static) if (rows * cols >= kOnednnMinElements)
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = py + r * cols;
    const float* gr = pg + r * cols;
    float* dr = pd + r * cols;
    double s = 0.0;
    for (int64_t j = 0; j < cols; ++j) s += log ? gr[j] : gr[j] * yr[j];
    for (int64_t j = 0; j < cols; ++j)
      dr[j] = log ? gr[j] - std::exp(yr[j]) * static_cast<float>(s)
                  : yr[j] * (gr[j] - static_cast<float>(s));
  }
}
PATCHBAY_REGISTER_KERNEL(SoftmaxBackwardKernel, "softmax_backward", DeviceType::kCpu,
                         softmax_backward_cpu);

Tensor softmax_impl(const Tensor& x, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  detail::check_float(x, name);
  if (x.dim() == 0)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(name) + ": expected >= 1 dim, found a scalar");
  const int64_t cols = x.size(-1), rows = cols ? x.numel() / cols : 0;
  Tensor x32 = detail::as_f32_contiguous(x);
  Tensor y = Tensor::empty(x.shape(), DType::kF32, x.device());
  find_kernel<SoftmaxKernel>("softmax", x.device().type)(log, x32, rows, cols, y);
  Tensor out = detail::from_f32(y, x.dtype());
  record_op(name, {x}, {&out},
            [log, y_saved = y.detach(), rows, cols, dt = x.dtype()](const std::vector<Tensor>& g) {
              Tensor dy = detail::as_f32_contiguous(g[0]);
              Tensor dx = Tensor::empty(y_saved.shape(), DType::kF32, y_saved.device());
              find_kernel<SoftmaxBackwardKernel>("softmax_backward", y_saved.device().type)(
                  log, y_saved, dy, rows, cols, dx);
              return std::vector<Tensor>{detail::from_f32(dx, dt)};
            });
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x) { return softmax_impl(x, false); }
Tensor log_softmax(const Tensor& x) { return softmax_impl(x, true); }

}  // namespace patchbay::engine
