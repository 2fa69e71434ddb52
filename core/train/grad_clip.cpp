// Global-norm gradient clipping (see grad_clip.hpp).
#include "train/grad_clip.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/ops.hpp"

namespace patchbay::train {
namespace {

// The grad of `param` when it has one, checked to be a contiguous float tensor.
engine::Tensor checked_grad(const engine::Tensor& param) {
  engine::Tensor g = param.grad();
  if (!g.defined()) return g;
  if (!engine::is_floating(g.dtype()) || !g.is_contiguous()) {
    throw Error(ErrorKind::kInvalidArgument,
                "gradient clipping: grad " + g.str() + " is not a contiguous float tensor");
  }
  return g;
}

bool on_host(const engine::Tensor& t) { return t.device().type == engine::DeviceType::kCpu; }

// sum(g^2) of a device gradient as a device scalar: f32 accumulation by the device's reduce
// kernel (fixed order, so repeatable), widened only when read.
engine::Tensor device_square_sum(const engine::Tensor& g) {
  const engine::Tensor g32 = g.detach().to(engine::DType::kF32);
  return engine::sum(engine::mul(g32, g32));
}

// Sum of squares of x[0, n) in double, in kLanes independent partial sums (element i goes to
// sum i % kLanes, the tail to sum 0) added in a fixed order at the end: the same bits for any
// thread count and on either clone below. (The compiler may fuse a lane's multiply and add into
// an FMA in one clone and not the other; that changes nothing, because the product of two
// floats is exact in double.) One vector sum was bound by the add latency (51 GB/s on Zen 4
// with the gradient in cache, 2-wide SSE2 in the baseline build); the AVX-512 clone keeps four
// 8-wide chains of independent adds (ifunc dispatch, picked once at load).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "default")))
#endif
double
f32_square_sum(const float* x, int64_t n) {
  constexpr int64_t kLanes = 32;
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] += static_cast<double>(x[i + j]) * x[i + j];
  }
  for (; i < n; ++i) lanes[0] += static_cast<double>(x[i]) * x[i];
  for (int64_t width = kLanes / 2; width > 0; width /= 2)
    for (int64_t j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  return lanes[0];
}

// Sum of squares of n elements, in fixed blocks summed in order (deterministic).
double square_sum(const void* data, int64_t n, engine::DType dtype) {
  const int64_t blocks = (n + kNormBlock - 1) / kNormBlock;
  std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t end = std::min(n, (b + 1) * kNormBlock);
    double s = 0.0;
    if (dtype == engine::DType::kF32) {
      s = f32_square_sum(static_cast<const float*>(data) + b * kNormBlock, end - b * kNormBlock);
    } else {
      for (int64_t i = b * kNormBlock; i < end; ++i) {
        const double v = engine::load_as_f32(data, i, dtype);
        s += v * v;
      }
    }
    partial[static_cast<size_t>(b)] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace

double param_grad_square_sum(const engine::Tensor& param) {
  engine::Tensor g = checked_grad(param);
  if (!g.defined()) return 0.0;
  if (!on_host(g)) return device_square_sum(g).item();
  return square_sum(g.data_ptr(), g.numel(), g.dtype());
}

// Host gradients in double as above; device gradients summed on their device and read once
// per device (one wait for the device per step, not one per parameter).
double grad_square_sum(const std::vector<engine::Tensor>& params) {
  double total = 0.0;
  std::vector<engine::Tensor> device_totals;  // one running f32 scalar per device
  for (const engine::Tensor& p : params) {
    const engine::Tensor g = checked_grad(p);
    if (!g.defined()) continue;
    if (on_host(g)) {
      total += square_sum(g.data_ptr(), g.numel(), g.dtype());
      continue;
    }
    auto same_device = [&](const engine::Tensor& t) { return t.device() == g.device(); };
    auto it = std::find_if(device_totals.begin(), device_totals.end(), same_device);
    if (it == device_totals.end()) {
      device_totals.push_back(device_square_sum(g));
    } else {
      *it = engine::add(*it, device_square_sum(g));
    }
  }
  for (const engine::Tensor& t : device_totals) total += t.item();
  return total;
}

engine::Tensor device_grad_square_sum(const std::vector<engine::Tensor>& params) {
  engine::Tensor total;
  for (const engine::Tensor& p : params) {
    const engine::Tensor g = checked_grad(p);
    if (!g.defined()) continue;
    if (on_host(g) || (total.defined() && total.device() != g.device()))
      throw Error(ErrorKind::kInvalidArgument,
                  "device gradient norm: expected every gradient on one device, found " + g.str() +
                      (total.defined() ? " beside gradients on " + total.str() : ""));
    total = total.defined() ? engine::add(total, device_square_sum(g)) : device_square_sum(g);
  }
  return total;
}

double global_grad_norm(const std::vector<engine::Tensor>& params) {
  return std::sqrt(grad_square_sum(params));
}

void scale_grads(const std::vector<engine::Tensor>& params, double factor) {
  for (const engine::Tensor& p : params) {
    engine::Tensor g = checked_grad(p);
    if (!g.defined()) continue;
    if (!on_host(g)) {  // on its device: g = g * factor through the device's kernels
      engine::copy_(g, engine::mul_scalar(g.detach(), factor));
      continue;
    }
    const int64_t n = g.numel();
    if (g.dtype() == engine::DType::kF32) {
      float* x = g.data<float>();
      const float f = static_cast<float>(factor);
#pragma omp parallel for simd schedule(static) if (n >= kNormBlock)
      for (int64_t i = 0; i < n; ++i) x[i] *= f;
    } else {
      void* data = g.data_ptr();
      for (int64_t i = 0; i < n; ++i) {
        engine::store_from_f64(data, i, g.dtype(),
                               engine::load_as_f32(data, i, g.dtype()) * factor);
      }
    }
  }
}

ClipResult clip_grad_norm(const std::vector<engine::Tensor>& params, double max_norm) {
  if (!(max_norm > 0) || !std::isfinite(max_norm)) {
    throw Error(
        ErrorKind::kInvalidArgument,
        "gradient clipping: max_norm = " + std::to_string(max_norm) + " must be finite and > 0");
  }
  ClipResult r;
  r.norm = global_grad_norm(params);
  r.finite = std::isfinite(r.norm);
  if (r.finite && r.norm > max_norm) {
    scale_grads(params, clip_factor(r.norm, max_norm));
    r.clipped = true;
  }
  return r;
}

double clip_factor(double norm, double max_norm) {
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm)
    return max_norm / (norm + kClipEpsilon);
  return 1.0;
}

void optimizer_step_scaled(runtime::OptimizerHandle& optimizer,
                           const std::vector<engine::Tensor>& params, double lr,
                           double grad_scale) {
  if (grad_scale == 1.0) {
    optimizer.step(lr);
  } else if (optimizer.supports_grad_scale()) {
    optimizer.step_scaled(lr, grad_scale);
  } else {
    scale_grads(params, grad_scale);
    optimizer.step(lr);
  }
}

}  // namespace patchbay::train
