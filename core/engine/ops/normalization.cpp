// layer_norm (gain + optional bias) and rms_norm over the last dim, on contiguous f32
// [rows, cols]. Layer norm runs through oneDNN forward/backward for large inputs (saving
// per-row mean and variance; plain loops for small ones); RMS norm is an OpenMP loop (oneDNN 2.6
// has no RMS norm):
//   y = x * r * g,  r = 1/sqrt(mean(x^2) + eps)
//   dx = r * (g*dy) - x * r^3 / C * sum_j(g*dy*x),   dg = sum_rows(dy * x * r)
// add_layer_norm fuses a pre-norm block's residual add with the layer norm after it:
//   h = x + residual,  y = layer_norm(h) * gain + bias        (one pass per row)
//   dh = dL/dh + r * (g*dy - mean_j(g*dy) - xhat * mean_j(g*dy*xhat)),  xhat = (h - mu) * r
// (dh is the gradient of both x and residual), dgain = sum_rows(dy*xhat), dbias = sum_rows(dy).
// Its rows are short (C = d_model), so the loops are compiled for AVX-512/AVX2/baseline
// (target_clones) and run per row; column sums go through fixed 256-row blocks whose partial
// sums are added in block order, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/autograd.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops/batch_invariance.hpp"
#include "engine/ops/op_helpers.hpp"
#include "onednn/onednn_ops.hpp"

namespace patchbay::engine {
namespace {

using kernel::AddLayerNormBackwardKernel;
using kernel::AddLayerNormKernel;
using kernel::LayerNormBackwardKernel;
using kernel::LayerNormKernel;
using kernel::NormShape;
using kernel::RmsNormBackwardKernel;
using kernel::RmsNormKernel;

// Below this many elements the plain loops run instead of oneDNN (call overhead dominates).
constexpr int64_t kOnednnMinElements = 16384;

const float* ptr_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }
float* mut_ptr_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

void layer_norm_cpu(const NormShape& s, const Tensor& x, const Tensor& gain, const Tensor& bias,
                    Tensor& y, Tensor& mean, Tensor& var) {
  if (s.rows * s.cols == 0) return;
  // The loop below rounds differently from oneDNN (whose rows do not depend on the others):
  // where batch invariance is wanted (batch_invariance.hpp) every size takes oneDNN.
  if (s.rows * s.cols >= kOnednnMinElements || batch_invariance_wanted(grad_enabled())) {
    onednn::LayerNormForwardArgs a;
    a.rows = s.rows;
    a.cols = s.cols;
    a.epsilon = s.eps;
    a.src = x.data<float>();
    a.gain = ptr_or_null(gain);
    a.bias = ptr_or_null(bias);
    a.dst = y.data<float>();
    a.mean = mean.data<float>();
    a.variance = var.data<float>();
    onednn::layer_norm_forward(a);
    return;
  }
  // Pointers taken once: Tensor::data() checks the dtype and the extent on every call, which
  // per element was most of this loop's time (a decoding step runs 25 of these on 768 floats).
  const float* px = x.data<float>();
  const float* g = ptr_or_null(gain);
  const float* b = ptr_or_null(bias);
  float* py = y.data<float>();
  float* pmean = mean.data<float>();
  float* pvar = var.data<float>();
  for (int64_t r = 0; r < s.rows; ++r) {  // below kOnednnMinElements: one thread
    const float* xr = px + r * s.cols;
    double mu = 0, v = 0;
    for (int64_t j = 0; j < s.cols; ++j) mu += xr[j];
    mu /= static_cast<double>(s.cols);
    for (int64_t j = 0; j < s.cols; ++j) v += (xr[j] - mu) * (xr[j] - mu);
    v /= static_cast<double>(s.cols);
    pmean[r] = static_cast<float>(mu);
    pvar[r] = static_cast<float>(v);
    auto rs = static_cast<float>(1.0 / std::sqrt(v + s.eps));
    float* yr = py + r * s.cols;
    for (int64_t j = 0; j < s.cols; ++j)
      yr[j] = (xr[j] - static_cast<float>(mu)) * rs * (g ? g[j] : 1.f) + (b ? b[j] : 0.f);
  }
}
PATCHBAY_REGISTER_KERNEL(LayerNormKernel, "layer_norm", DeviceType::kCpu, layer_norm_cpu);

void layer_norm_backward_cpu(const NormShape& s, const Tensor& x, const Tensor& dy,
                             const Tensor& mean, const Tensor& var, const Tensor& gain, Tensor& dx,
                             Tensor& dgain, Tensor& dbias) {
  if (dgain.defined()) fill_(dgain, 0.0);
  if (dbias.defined()) fill_(dbias, 0.0);
  if (s.rows * s.cols == 0) return;
  if (s.rows * s.cols >= kOnednnMinElements) {
    onednn::LayerNormBackwardArgs a;
    a.rows = s.rows;
    a.cols = s.cols;
    a.epsilon = s.eps;
    a.src = x.data<float>();
    a.diff_dst = dy.data<float>();
    a.mean = mean.data<float>();
    a.variance = var.data<float>();
    a.gain = ptr_or_null(gain);
    a.diff_src = dx.data<float>();
    a.diff_gain = mut_ptr_or_null(dgain);
    a.diff_bias = mut_ptr_or_null(dbias);
    onednn::layer_norm_backward(a);
    return;
  }
  const float* px = x.data<float>();
  const float* pg = dy.data<float>();
  const float* g = ptr_or_null(gain);
  float* pdx = dx.data<float>();
  const float* pmean = mean.data<float>();
  const float* pvar = var.data<float>();
  float* pdgain = mut_ptr_or_null(dgain);  // pointers taken once (see layer_norm_cpu)
  float* pdbias = mut_ptr_or_null(dbias);
  for (int64_t r = 0; r < s.rows; ++r) {
    const float mu = pmean[r];
    const auto rs = static_cast<float>(1.0 / std::sqrt(pvar[r] + s.eps));
    double sum_gdy = 0, sum_gdy_xhat = 0;
    for (int64_t j = 0; j < s.cols; ++j) {
      float xhat = (px[r * s.cols + j] - mu) * rs;
      float gdy = pg[r * s.cols + j] * (g ? g[j] : 1.f);
      sum_gdy += gdy;
      sum_gdy_xhat += gdy * xhat;
      if (pdgain != nullptr) pdgain[j] += pg[r * s.cols + j] * xhat;
      if (pdbias != nullptr) pdbias[j] += pg[r * s.cols + j];
    }
    const auto c = static_cast<double>(s.cols);
    for (int64_t j = 0; j < s.cols; ++j) {
      float xhat = (px[r * s.cols + j] - mu) * rs;
      float gdy = pg[r * s.cols + j] * (g ? g[j] : 1.f);
      pdx[r * s.cols + j] = rs * (gdy - static_cast<float>(sum_gdy / c) -
                                  xhat * static_cast<float>(sum_gdy_xhat / c));
    }
  }
}
PATCHBAY_REGISTER_KERNEL(LayerNormBackwardKernel, "layer_norm_backward", DeviceType::kCpu,
                         layer_norm_backward_cpu);

void rms_norm_cpu(const NormShape& s, const Tensor& x, const Tensor& gain, Tensor& y,
                  Tensor& rstd) {
  const float* px = x.data<float>();
  const float* g = gain.data<float>();
  float* py = y.data<float>();
  float* pr = rstd.data<float>();
#pragma omp parallel for schedule(static) if (s.rows * s.cols > 16384)
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* xr = px + r * s.cols;
    double ms = 0;
    for (int64_t j = 0; j < s.cols; ++j) ms += static_cast<double>(xr[j]) * xr[j];
    auto rs = static_cast<float>(1.0 / std::sqrt(ms / static_cast<double>(s.cols) + s.eps));
    pr[r] = rs;
#pragma omp simd
    for (int64_t j = 0; j < s.cols; ++j) py[r * s.cols + j] = xr[j] * rs * g[j];
  }
}
PATCHBAY_REGISTER_KERNEL(RmsNormKernel, "rms_norm", DeviceType::kCpu, rms_norm_cpu);

void rms_norm_backward_cpu(const NormShape& s, const Tensor& x, const Tensor& dy,
                           const Tensor& gain, const Tensor& rstd, Tensor& dx, Tensor& dgain) {
  const float* px = x.data<float>();
  const float* pdy = dy.data<float>();
  const float* g = gain.data<float>();
  const float* pr = rstd.data<float>();
  float* pdx = dx.data<float>();
#pragma omp parallel for schedule(static) if (s.rows * s.cols > 16384)
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* xr = px + r * s.cols;
    const float* dyr = pdy + r * s.cols;
    double dot = 0;
    for (int64_t j = 0; j < s.cols; ++j) dot += static_cast<double>(g[j]) * dyr[j] * xr[j];
    const float rs = pr[r];
    const auto coef = static_cast<float>(dot / static_cast<double>(s.cols)) * rs * rs * rs;
    for (int64_t j = 0; j < s.cols; ++j) pdx[r * s.cols + j] = rs * g[j] * dyr[j] - xr[j] * coef;
  }
  if (dgain.defined()) {
    float* pdg = dgain.data<float>();
#pragma omp parallel for schedule(static) if (s.rows * s.cols > 16384)
    for (int64_t j = 0; j < s.cols; ++j) {
      double acc = 0;
      for (int64_t r = 0; r < s.rows; ++r)
        acc += static_cast<double>(pdy[r * s.cols + j]) * px[r * s.cols + j] * pr[r];
      pdg[j] = static_cast<float>(acc);
    }
  }
}
PATCHBAY_REGISTER_KERNEL(RmsNormBackwardKernel, "rms_norm_backward", DeviceType::kCpu,
                         rms_norm_backward_cpu);

// ---- add_layer_norm ----

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PATCHBAY_NORM_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define PATCHBAY_NORM_CLONES
#endif

constexpr int64_t kRowBlock = 256;  // rows per column-sum partial (and per thread task)
// Columns per task of the one-block backward's column sums (whole 64-byte lines of doubles).
constexpr int64_t kColumnChunk = 64;

// One row: h = x + res, y = (h - mu) * rs * g + b (g, b may be null); returns {mu, rs}.
PATCHBAY_NORM_CLONES
void add_layer_norm_row(const float* x, const float* res, const float* g, const float* b, float* h,
                        float* y, int64_t n, float eps, float* mu_out, float* rs_out) {
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    h[j] = x[j] + res[j];
    sum += h[j];
  }
  const float mu = sum / static_cast<float>(n);
  float ss = 0.f;
#pragma omp simd reduction(+ : ss)
  for (int64_t j = 0; j < n; ++j) ss += (h[j] - mu) * (h[j] - mu);
  const float rs = 1.f / std::sqrt(ss / static_cast<float>(n) + eps);
  if (g != nullptr && b != nullptr) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = (h[j] - mu) * rs * g[j] + b[j];
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      y[j] = (h[j] - mu) * rs * (g != nullptr ? g[j] : 1.f) + (b != nullptr ? b[j] : 0.f);
  }
  *mu_out = mu;
  *rs_out = rs;
}

// One row of the backward: dh = gh + rs * (g*dy - a - xhat * c).
PATCHBAY_NORM_CLONES
void add_layer_norm_backward_row(const float* h, const float* dy, const float* gh, const float* g,
                                 float mu, float rs, float* dh, int64_t n) {
  float sum_gdy = 0.f, sum_gdy_xhat = 0.f;
#pragma omp simd reduction(+ : sum_gdy, sum_gdy_xhat)
  for (int64_t j = 0; j < n; ++j) {
    const float gdy = dy[j] * (g != nullptr ? g[j] : 1.f);
    sum_gdy += gdy;
    sum_gdy_xhat += gdy * (h[j] - mu) * rs;
  }
  const float a = sum_gdy / static_cast<float>(n), c = sum_gdy_xhat / static_cast<float>(n);
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const float xhat = (h[j] - mu) * rs;
    const float gdy = dy[j] * (g != nullptr ? g[j] : 1.f);
    dh[j] = gh[j] + rs * (gdy - a - xhat * c);
  }
}

// Adds dy * xhat and dy of rows [row_begin, row_end) (pitch c) at columns [begin, end) into
// the column partials pg, pb (double), row after row: each column sums its rows in row order,
// whichever thread runs it.
PATCHBAY_NORM_CLONES
void add_layer_norm_partials(const float* h, const float* dy, const float* mean, const float* rstd,
                             int64_t c, int64_t row_begin, int64_t row_end, int64_t begin,
                             int64_t end, double* pg, double* pb) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float *hr = h + r * c, *dyr = dy + r * c;
    const float mu = mean[r], rs = rstd[r];
#pragma omp simd
    for (int64_t j = begin; j < end; ++j) {
      const float xhat = (hr[j] - mu) * rs;
      pg[j] += static_cast<double>(dyr[j] * xhat);
      pb[j] += static_cast<double>(dyr[j]);
    }
  }
}

void add_layer_norm_cpu(const NormShape& s, const Tensor& x, const Tensor& residual,
                        const Tensor& gain, const Tensor& bias, Tensor& h, Tensor& y, Tensor& mean,
                        Tensor& rstd) {
  const float *px = x.data<float>(), *pr = residual.data<float>();
  const float *g = ptr_or_null(gain), *b = ptr_or_null(bias);
  float *ph = h.data<float>(), *py = y.data<float>();
  float *pm = mean.data<float>(), *ps = rstd.data<float>();
  const int64_t c = s.cols;
#pragma omp parallel for schedule(static) if (s.rows * s.cols >= (1 << 15))
  for (int64_t r = 0; r < s.rows; ++r)
    add_layer_norm_row(px + r * c, pr + r * c, g, b, ph + r * c, py + r * c, c, s.eps, pm + r,
                       ps + r);
}
PATCHBAY_REGISTER_KERNEL(AddLayerNormKernel, "add_layer_norm", DeviceType::kCpu,
                         add_layer_norm_cpu);

void add_layer_norm_backward_cpu(const NormShape& s, const Tensor& h, const Tensor& dy,
                                 const Tensor& gh, const Tensor& mean, const Tensor& rstd,
                                 const Tensor& gain, Tensor& dh, Tensor& dgain, Tensor& dbias) {
  const int64_t c = s.cols, blocks = (s.rows + kRowBlock - 1) / kRowBlock;
  const float *ph = h.data<float>(), *pdy = dy.data<float>(), *pgh = gh.data<float>();
  const float *pm = mean.data<float>(), *ps = rstd.data<float>(), *g = ptr_or_null(gain);
  float* pdh = dh.data<float>();
  // Partial column sums per row block: [blocks][2][cols] (dgain then dbias).
  std::vector<double> partial(static_cast<size_t>(blocks * 2 * c), 0.0);
  const bool threaded = s.rows * s.cols >= (1 << 15);
  if (threaded && blocks == 1) {
    // One row block (GPT-2 at 4 x 64 tokens: 256 rows): the rows' dh split over the threads,
    // then the columns' partials, each column summed over all rows in order. The same bits as
    // the one-thread pass below, which left the other thread idle: at GPT-2 4 x 64 the 25 norm
    // backwards took ~3 ms of one thread a step (perf), now ~1.5 ms of each.
    double* pg = partial.data();
    double* pb = pg + c;
    const int64_t column_chunks = (c + kColumnChunk - 1) / kColumnChunk;
#pragma omp parallel
    {
#pragma omp for schedule(static)
      for (int64_t r = 0; r < s.rows; ++r)
        add_layer_norm_backward_row(ph + r * c, pdy + r * c, pgh + r * c, g, pm[r], ps[r],
                                    pdh + r * c, c);
#pragma omp for schedule(static) nowait
      for (int64_t chunk = 0; chunk < column_chunks; ++chunk) {
        const int64_t begin = chunk * kColumnChunk, end = std::min(c, begin + kColumnChunk);
        add_layer_norm_partials(ph, pdy, pm, ps, c, 0, s.rows, begin, end, pg, pb);
      }
    }
  } else {
#pragma omp parallel for schedule(static) if (threaded && blocks > 1)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      double* pg = partial.data() + blk * 2 * c;
      double* pb = pg + c;
      const int64_t end = std::min(s.rows, (blk + 1) * kRowBlock);
      for (int64_t r = blk * kRowBlock; r < end; ++r) {
        add_layer_norm_backward_row(ph + r * c, pdy + r * c, pgh + r * c, g, pm[r], ps[r],
                                    pdh + r * c, c);
        add_layer_norm_partials(ph, pdy, pm, ps, c, r, r + 1, 0, c, pg, pb);
      }
    }
  }
  for (Tensor* out : {&dgain, &dbias}) {
    if (!out->defined()) continue;
    const int64_t which = out == &dgain ? 0 : 1;
    float* po = out->data<float>();
    for (int64_t j = 0; j < c; ++j) {
      double acc = 0.0;
      for (int64_t blk = 0; blk < blocks; ++blk) acc += partial[(blk * 2 + which) * c + j];
      po[j] = static_cast<float>(acc);
    }
  }
}
PATCHBAY_REGISTER_KERNEL(AddLayerNormBackwardKernel, "add_layer_norm_backward", DeviceType::kCpu,
                         add_layer_norm_backward_cpu);

NormShape check_norm(const char* op, const Tensor& x, const Tensor& gain, const Tensor& bias,
                     double eps) {
  detail::check_float(x, op);
  if (x.dim() == 0)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(op) + ": expected >= 1 dim, found a scalar");
  const int64_t c = x.size(-1);
  for (const Tensor* p : {&gain, &bias})
    if (p->defined() && (p->shape() != Shape{c} || p->dtype() != x.dtype()))
      throw Error(ErrorKind::kInvalidArgument,
                  detail::shape_message(op,
                                        "gain/bias of shape [" + std::to_string(c) +
                                            "] and dtype " + dtype_name(x.dtype()),
                                        *p));
  return NormShape{c ? x.numel() / c : 0, c, static_cast<float>(eps)};
}

Tensor f32_or_undefined(const Tensor& t) {
  return t.defined() ? detail::as_f32_contiguous(t) : Tensor();
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& gain, const Tensor& bias, double eps) {
  NormShape s = check_norm("layer_norm", x, gain, bias, eps);
  Tensor x32 = detail::as_f32_contiguous(x), g32 = f32_or_undefined(gain),
         b32 = f32_or_undefined(bias);
  Tensor y = Tensor::empty(x.shape(), DType::kF32, x.device());
  Tensor mu = Tensor::empty({s.rows}, DType::kF32, x.device()),
         var = Tensor::empty({s.rows}, DType::kF32, x.device());
  find_kernel<LayerNormKernel>("layer_norm", x.device().type)(s, x32, g32, b32, y, mu, var);
  Tensor out = detail::from_f32(y, x.dtype());
  record_op("layer_norm", {x, gain, bias}, {&out},
            [s, x32, g32, mu, var, dt = x.dtype(), want_g = gain.defined(),
             want_b = bias.defined()](const std::vector<Tensor>& g) {
              Tensor dy = detail::as_f32_contiguous(g[0]);
              Tensor dx = Tensor::empty(x32.shape(), DType::kF32, x32.device());
              Tensor dg = want_g ? Tensor::empty({s.cols}, DType::kF32, x32.device()) : Tensor();
              Tensor db = want_b ? Tensor::empty({s.cols}, DType::kF32, x32.device()) : Tensor();
              find_kernel<LayerNormBackwardKernel>("layer_norm_backward", x32.device().type)(
                  s, x32, dy, mu, var, g32, dx, dg, db);
              return std::vector<Tensor>{detail::from_f32(dx, dt),
                                         want_g ? detail::from_f32(dg, dt) : Tensor(),
                                         want_b ? detail::from_f32(db, dt) : Tensor()};
            });
  return out;
}

std::pair<Tensor, Tensor> add_layer_norm(const Tensor& x, const Tensor& residual,
                                         const Tensor& gain, const Tensor& bias, double eps) {
  NormShape s = check_norm("add_layer_norm", x, gain, bias, eps);
  if (!residual.defined() || residual.shape() != x.shape() || residual.dtype() != x.dtype() ||
      residual.device() != x.device())
    throw Error(
        ErrorKind::kInvalidArgument,
        detail::shape_message("add_layer_norm",
                              "a residual of x's shape, dtype and device " + x.str(), residual));
  if (x.dtype() != DType::kF32 || s.rows * s.cols == 0) {  // the unfused composition
    Tensor h = add(x, residual);
    return {h, layer_norm(h, gain, bias, eps)};
  }
  Tensor x32 = x.detach().contiguous(), r32 = residual.detach().contiguous(),
         g32 = f32_or_undefined(gain), b32 = f32_or_undefined(bias);
  Tensor h = Tensor::empty(x.shape(), DType::kF32, x.device());
  Tensor y = Tensor::empty(x.shape(), DType::kF32, x.device());
  Tensor mu = Tensor::empty({s.rows}, DType::kF32, x.device()),
         rstd = Tensor::empty({s.rows}, DType::kF32, x.device());
  find_kernel<AddLayerNormKernel>("add_layer_norm", x.device().type)(s, x32, r32, g32, b32, h, y,
                                                                     mu, rstd);
  record_op(
      "add_layer_norm", {x, residual, gain, bias}, {&h, &y},
      [s, h_saved = h.detach(), g32, mu, rstd, want_g = gain.defined(),
       want_b = bias.defined()](const std::vector<Tensor>& g) {
        Tensor gh = detail::as_f32_contiguous(g[0]), dy = detail::as_f32_contiguous(g[1]);
        Tensor dh = Tensor::empty(h_saved.shape(), DType::kF32, h_saved.device());
        Tensor dg = want_g ? Tensor::empty({s.cols}, DType::kF32, h_saved.device()) : Tensor();
        Tensor db = want_b ? Tensor::empty({s.cols}, DType::kF32, h_saved.device()) : Tensor();
        find_kernel<AddLayerNormBackwardKernel>("add_layer_norm_backward", h_saved.device().type)(
            s, h_saved, dy, gh, mu, rstd, g32, dh, dg, db);
        return std::vector<Tensor>{dh, dh, dg, db};
      });
  return {h, y};
}

Tensor rms_norm(const Tensor& x, const Tensor& gain, double eps) {
  if (!gain.defined()) throw Error(ErrorKind::kInvalidArgument, "rms_norm: gain is undefined");
  NormShape s = check_norm("rms_norm", x, gain, Tensor(), eps);
  Tensor x32 = detail::as_f32_contiguous(x), g32 = detail::as_f32_contiguous(gain);
  Tensor y = Tensor::empty(x.shape(), DType::kF32, x.device());
  Tensor rstd = Tensor::empty({s.rows}, DType::kF32, x.device());
  find_kernel<RmsNormKernel>("rms_norm", x.device().type)(s, x32, g32, y, rstd);
  Tensor out = detail::from_f32(y, x.dtype());
  record_op("rms_norm", {x, gain}, {&out},
            [s, x32, g32, rstd, dt = x.dtype()](const std::vector<Tensor>& g) {
              Tensor dy = detail::as_f32_contiguous(g[0]);
              Tensor dx = Tensor::empty(x32.shape(), DType::kF32, x32.device());
              Tensor dg = Tensor::empty({s.cols}, DType::kF32, x32.device());
              find_kernel<RmsNormBackwardKernel>("rms_norm_backward", x32.device().type)(
                  s, x32, dy, g32, rstd, dx, dg);
              return std::vector<Tensor>{detail::from_f32(dx, dt), detail::from_f32(dg, dt)};
            });
  return out;
}

}  // namespace patchbay::engine
