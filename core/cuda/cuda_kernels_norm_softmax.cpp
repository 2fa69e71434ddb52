// The CUDA dispatch entries of layer norm, residual-add layer norm, RMS norm and (log-)softmax,
// forward and backward (engine/kernel_signatures.hpp): contiguous f32 [rows, cols] over the
// last dim, through kernels/cuda/normalization.hpp and softmax_cross_entropy.hpp.
// Layer norm's saved per-row statistic is rstd = 1/sqrt(var + eps) on this device (the CPU
// saves the variance): only this device's backward reads it (LayerNormKernel's contract).
// A missing gain is a row of ones (the kernels always scale); a missing bias is a null pointer.
#include "cuda/cuda_kernel_support.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "patchbay/kernels/cuda/normalization.hpp"
#include "patchbay/kernels/cuda/softmax_cross_entropy.hpp"

namespace patchbay::cuda {
namespace {

using engine::Tensor;
using engine::kernel::NormShape;
namespace kc = kernels::cuda;

const float* data_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }
float* mutable_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }
Tensor gain_or_ones(const Tensor& gain, const Tensor& like, int64_t cols) {
  return gain.defined() ? gain : ones_like_row(like, cols);
}

void layer_norm_cuda(const NormShape& s, const Tensor& x, const Tensor& gain, const Tensor& bias,
                     Tensor& y, Tensor& mean, Tensor& rstd) {
  if (s.rows * s.cols == 0) return;
  const Tensor g = gain_or_ones(gain, x, s.cols);
  const OnDeviceOf on(y);
  check_launch(kc::layer_norm_forward(x.data<float>(), g.data<float>(), data_or_null(bias),
                                      y.data<float>(), mean.data<float>(), rstd.data<float>(),
                                      s.rows, s.cols, s.eps, on.stream),
               "layer_norm");
}

void layer_norm_backward_cuda(const NormShape& s, const Tensor& x, const Tensor& dy,
                              const Tensor& mean, const Tensor& rstd, const Tensor& gain,
                              Tensor& dx, Tensor& dgain, Tensor& dbias) {
  if (s.rows * s.cols == 0) {
    if (dgain.defined()) engine::fill_(dgain, 0.0);
    if (dbias.defined()) engine::fill_(dbias, 0.0);
    return;
  }
  const Tensor g = gain_or_ones(gain, x, s.cols);
  const OnDeviceOf on(dx);
  check_launch(kc::layer_norm_backward(x.data<float>(), g.data<float>(), mean.data<float>(),
                                       rstd.data<float>(), dy.data<float>(), nullptr,
                                       dx.data<float>(), mutable_or_null(dgain),
                                       mutable_or_null(dbias), s.rows, s.cols, on.stream),
               "layer_norm_backward");
}

void rms_norm_cuda(const NormShape& s, const Tensor& x, const Tensor& gain, Tensor& y,
                   Tensor& rstd) {
  if (s.rows * s.cols == 0) return;
  const OnDeviceOf on(y);
  check_launch(kc::rms_norm_forward(x.data<float>(), gain.data<float>(), y.data<float>(),
                                    rstd.data<float>(), s.rows, s.cols, s.eps, on.stream),
               "rms_norm");
}

void rms_norm_backward_cuda(const NormShape& s, const Tensor& x, const Tensor& dy,
                            const Tensor& gain, const Tensor& rstd, Tensor& dx, Tensor& dgain) {
  if (s.rows * s.cols == 0) {
    if (dgain.defined()) engine::fill_(dgain, 0.0);
    return;
  }
  const OnDeviceOf on(dx);
  check_launch(kc::rms_norm_backward(x.data<float>(), gain.data<float>(), rstd.data<float>(),
                                     dy.data<float>(), dx.data<float>(), mutable_or_null(dgain),
                                     s.rows, s.cols, on.stream),
               "rms_norm_backward");
}

void add_layer_norm_cuda(const NormShape& s, const Tensor& x, const Tensor& residual,
                         const Tensor& gain, const Tensor& bias, Tensor& h, Tensor& y, Tensor& mean,
                         Tensor& rstd) {
  if (s.rows * s.cols == 0) return;
  const Tensor g = gain_or_ones(gain, x, s.cols);
  const OnDeviceOf on(y);
  check_launch(kc::residual_layer_norm_forward(
                   x.data<float>(), residual.data<float>(), g.data<float>(), data_or_null(bias),
                   h.data<float>(), y.data<float>(), mean.data<float>(), rstd.data<float>(), s.rows,
                   s.cols, s.eps, on.stream),
               "add_layer_norm");
}

// dh = gh + layer_norm_backward(h, dy): the residual gradient passes through as `dresidual`.
void add_layer_norm_backward_cuda(const NormShape& s, const Tensor& h, const Tensor& dy,
                                  const Tensor& gh, const Tensor& mean, const Tensor& rstd,
                                  const Tensor& gain, Tensor& dh, Tensor& dgain, Tensor& dbias) {
  if (s.rows * s.cols == 0) {
    if (dgain.defined()) engine::fill_(dgain, 0.0);
    if (dbias.defined()) engine::fill_(dbias, 0.0);
    return;
  }
  const Tensor g = gain_or_ones(gain, h, s.cols);
  const OnDeviceOf on(dh);
  check_launch(kc::layer_norm_backward(h.data<float>(), g.data<float>(), mean.data<float>(),
                                       rstd.data<float>(), dy.data<float>(), gh.data<float>(),
                                       dh.data<float>(), mutable_or_null(dgain),
                                       mutable_or_null(dbias), s.rows, s.cols, on.stream),
               "add_layer_norm_backward");
}

void softmax_cuda(bool log, const Tensor& x, int64_t rows, int64_t cols, Tensor& y) {
  if (rows * cols == 0) return;
  const OnDeviceOf on(y);
  check_launch(
      log ? kc::log_softmax_forward(x.data<float>(), y.data<float>(), rows, cols, on.stream)
          : kc::softmax_forward(x.data<float>(), y.data<float>(), rows, cols, on.stream),
      log ? "log_softmax" : "softmax");
}

void softmax_backward_cuda(bool log, const Tensor& y, const Tensor& dy, int64_t rows, int64_t cols,
                           Tensor& dx) {
  if (rows * cols == 0) return;
  const OnDeviceOf on(dx);
  check_launch(log ? kc::log_softmax_backward(y.data<float>(), dy.data<float>(), dx.data<float>(),
                                              rows, cols, on.stream)
                   : kc::softmax_backward(y.data<float>(), dy.data<float>(), dx.data<float>(), rows,
                                          cols, on.stream),
               log ? "log_softmax_backward" : "softmax_backward");
}

}  // namespace

void register_norm_softmax_kernels() {
  namespace sig = engine::kernel;
  using engine::DeviceType;
  using engine::register_kernel;
  register_kernel<sig::LayerNormKernel>("layer_norm", DeviceType::kCuda, layer_norm_cuda);
  register_kernel<sig::LayerNormBackwardKernel>("layer_norm_backward", DeviceType::kCuda,
                                                layer_norm_backward_cuda);
  register_kernel<sig::RmsNormKernel>("rms_norm", DeviceType::kCuda, rms_norm_cuda);
  register_kernel<sig::RmsNormBackwardKernel>("rms_norm_backward", DeviceType::kCuda,
                                              rms_norm_backward_cuda);
  register_kernel<sig::AddLayerNormKernel>("add_layer_norm", DeviceType::kCuda,
                                           add_layer_norm_cuda);
  register_kernel<sig::AddLayerNormBackwardKernel>("add_layer_norm_backward", DeviceType::kCuda,
                                                   add_layer_norm_backward_cuda);
  register_kernel<sig::SoftmaxKernel>("softmax", DeviceType::kCuda, softmax_cuda);
  register_kernel<sig::SoftmaxBackwardKernel>("softmax_backward", DeviceType::kCuda,
                                              softmax_backward_cuda);
}

}  // namespace patchbay::cuda
