// adafactor: state set-up and the update (formula in adafactor.hpp, README.md). The update is a
// few passes over the parameter: statistics of g^2 per row and column, the clipped update U in a
// scratch buffer, then the parameter. Rows are independent, so the passes split over rows
// across threads while every sum runs sequentially in double inside one row (thread-count
// independent results).
#include "adafactor.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "dense_f32.hpp"

namespace optimizers_basic {
namespace {

AdafactorSettings read_settings(const patchbay::ConfigView& config) {
  AdafactorSettings s;
  s.beta1 = config.get_float("beta1");
  s.decay_rate = config.get_float("decay_rate");
  s.eps1 = config.get_float("eps1");
  s.eps2 = config.get_float("eps2");
  s.clip_threshold = config.get_float("clip_threshold");
  s.relative_step = config.get_bool("relative_step");
  s.scale_parameter = config.get_bool("scale_parameter");
  s.warmup_init = config.get_bool("warmup_init");
  s.weight_decay = config.get_float("weight_decay");
  return s;
}

void fail(const std::string& message) {
  throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT, "adafactor: " + message);
}

// Sum of squares of x[0..n) in double, split into `parts` contiguous chunks summed in order.
double sum_of_squares(const float* x, int64_t n) {
  const int64_t chunk = 1 << 14;
  const int64_t parts = (n + chunk - 1) / chunk;
  std::vector<double> partial(static_cast<size_t>(std::max<int64_t>(parts, 1)), 0.0);
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t c = 0; c < parts; ++c) {
    double s = 0.0;
    const int64_t end = std::min(n, (c + 1) * chunk);
    for (int64_t i = c * chunk; i < end; ++i) s += double(x[i]) * double(x[i]);
    partial[static_cast<size_t>(c)] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

double rms(const float* x, int64_t n) { return std::sqrt(sum_of_squares(x, n) / double(n)); }

// Reads gradient elements, times the host's clip factor when kScaled (one f32 multiply: the
// value an in-place scaling of the gradient would have stored).
template <bool kScaled>
struct GradReader {
  const float* g;
  float scale;
  float operator[](int64_t k) const { return kScaled ? g[k] * scale : g[k]; }
  GradReader offset(int64_t k) const { return {g + k, scale}; }
};

// U = g * rsqrt(row / mean(row)) * rsqrt(col) for B matrices R x C, after updating row and col.
template <bool kScaled>
void factored_update(GradReader<kScaled> grad, float* row, float* col, const AdafactorLayout& l,
                     float b2, float eps1, float* update) {
  const int64_t R = l.rows, C = l.cols;
  const float keep = b2, take = 1.0f - b2;
  for (int64_t b = 0; b < l.batch; ++b) {
    const GradReader<kScaled> g = grad.offset(b * R * C);
    float* row_b = row + b * R;
    float* col_b = col + b * C;
    float* u = update + b * R * C;
#pragma omp parallel for schedule(static) if (R * C >= kParallelElements)
    for (int64_t r = 0; r < R; ++r) {
      double s = 0.0;
      for (int64_t c = 0; c < C; ++c) {
        const float x = g[r * C + c];
        s += double(x) * x + eps1;
      }
      row_b[r] = keep * row_b[r] + take * static_cast<float>(s / double(C));
    }
    // Column means: each thread owns a block of columns and walks the rows in order.
#pragma omp parallel for schedule(static) if (R * C >= kParallelElements)
    for (int64_t c0 = 0; c0 < C; c0 += 64) {
      const int64_t c1 = std::min(C, c0 + 64);
      double s[64] = {};
      for (int64_t r = 0; r < R; ++r)
        for (int64_t c = c0; c < c1; ++c) {
          const float x = g[r * C + c];
          s[c - c0] += double(x) * x + eps1;
        }
      for (int64_t c = c0; c < c1; ++c)
        col_b[c] = keep * col_b[c] + take * static_cast<float>(s[c - c0] / double(R));
    }
    double row_sum = 0.0;
    for (int64_t r = 0; r < R; ++r) row_sum += row_b[r];
    const float row_mean = static_cast<float>(row_sum / double(R));
#pragma omp parallel for schedule(static) if (R * C >= kParallelElements)
    for (int64_t r = 0; r < R; ++r) {
      const float r_factor = 1.0f / std::sqrt(row_b[r] / row_mean);
      for (int64_t c = 0; c < C; ++c) u[r * C + c] = g[r * C + c] * r_factor / std::sqrt(col_b[c]);
    }
  }
}

}  // namespace

AdafactorLayout adafactor_layout(const std::vector<int64_t>& shape) {
  AdafactorLayout l;
  if (shape.size() < 2) {
    l.cols = shape.empty() ? 1 : shape[0];
    return l;
  }
  l.factored = true;
  l.rows = shape[shape.size() - 2];
  l.cols = shape.back();
  for (size_t i = 0; i + 2 < shape.size(); ++i) l.batch *= shape[i];
  return l;
}

namespace {

// The second-moment update and the unclipped update U (see adafactor_step).
template <bool kScaled>
void second_moment_update(GradReader<kScaled> grad, const AdafactorBuffers& buffers,
                          const AdafactorLayout& layout, float b2, float eps1, float* update) {
  const int64_t n = layout.batch * layout.rows * layout.cols;
  if (layout.factored) {
    factored_update(grad, buffers.exp_avg_sq_row, buffers.exp_avg_sq_col, layout, b2, eps1, update);
  } else {
    float* v = buffers.exp_avg_sq;
#pragma omp parallel for simd schedule(static) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i) {
      const float g = grad[i];
      v[i] = b2 * v[i] + (1.0f - b2) * (g * g + eps1);
      update[i] = g / std::sqrt(v[i]);
    }
  }
}

}  // namespace

void adafactor_step(float* param, const float* grad, const AdafactorBuffers& buffers,
                    const AdafactorLayout& layout, int64_t t, double lr, double lr_scale,
                    double weight_decay_scale, const AdafactorSettings& s, float grad_scale) {
  const int64_t n = layout.batch * layout.rows * layout.cols;
  double rho = lr;
  if (s.relative_step) {
    const double min_step = s.warmup_init ? 1e-6 * double(t) : 1e-2;
    rho = std::min(min_step, 1.0 / std::sqrt(double(t))) * lr_scale;
  }
  const double alpha = (s.scale_parameter ? std::max(s.eps2, rms(param, n)) : 1.0) * rho;
  const float b2 = static_cast<float>(1.0 - std::pow(double(t), s.decay_rate));
  const float eps1 = static_cast<float>(s.eps1);

  std::vector<float> update(static_cast<size_t>(n));
  if (grad_scale != 1.0f) {
    second_moment_update(GradReader<true>{grad, grad_scale}, buffers, layout, b2, eps1,
                         update.data());
  } else {
    second_moment_update(GradReader<false>{grad, 1.0f}, buffers, layout, b2, eps1, update.data());
  }
  const double clip = std::max(1.0, rms(update.data(), n) / s.clip_threshold);
  const float scale = static_cast<float>(alpha / clip);
  const float decay = static_cast<float>(1.0 - s.weight_decay * weight_decay_scale * alpha);
  const bool first_moment = s.beta1 > 0.0;
  const float beta1 = static_cast<float>(s.beta1);
  float* m = buffers.exp_avg;
#pragma omp parallel for simd schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    float u = update[static_cast<size_t>(i)] * scale;
    if (first_moment) {
      m[i] = beta1 * m[i] + (1.0f - beta1) * u;
      u = m[i];
    }
    param[i] = param[i] * decay - u;
  }
}

Adafactor::Adafactor(const patchbay::Host&, const patchbay::ConfigView& config)
    : Adafactor(read_settings(config)) {}

Adafactor::Adafactor(const AdafactorSettings& s) : settings_(s) {
  if (!(s.beta1 >= 0.0 && s.beta1 < 1.0)) fail("beta1 = " + std::to_string(s.beta1) + " must lie in [0, 1)");
  if (!(s.decay_rate < 0.0)) fail("decay_rate = " + std::to_string(s.decay_rate) + " must be < 0");
  if (!(s.eps1 >= 0.0) || !(s.eps2 >= 0.0)) fail("eps1 and eps2 must be >= 0");
  if (!(s.clip_threshold > 0.0)) fail("clip_threshold must be > 0");
  if (s.warmup_init && !s.relative_step) fail("warmup_init = true needs relative_step = true");
  if (!(s.weight_decay >= 0.0) || !std::isfinite(s.weight_decay)) fail("weight_decay must be finite and >= 0");
}

void Adafactor::init_state(const Param& param) {
  require_dense_f32(param, "adafactor");
  Slot slot;
  slot.layout = adafactor_layout(param.tensor.shape());
  patchbay::Ops ops(param.tensor.ops());
  slot.step = add_state("step/" + param.name, step_counter(param.tensor));
  if (slot.layout.factored) {
    std::vector<int64_t> row_shape = param.tensor.shape(), col_shape = param.tensor.shape();
    row_shape.pop_back();                                // [..., R]
    col_shape.erase(col_shape.end() - 2);                // [..., C]
    slot.row = add_state("exp_avg_sq_row/" + param.name, ops.zeros(row_shape, PB_DTYPE_F32));
    slot.col = add_state("exp_avg_sq_col/" + param.name, ops.zeros(col_shape, PB_DTYPE_F32));
  } else {
    slot.sq = add_state("exp_avg_sq/" + param.name, zeros_like(param.tensor));
  }
  if (settings_.beta1 > 0.0) slot.exp_avg = add_state("exp_avg/" + param.name, zeros_like(param.tensor));
  slot_of_.resize(param.index + 1, 0);
  slot_of_[param.index] = slots_.size();
  slots_.push_back(std::move(slot));
}

void Adafactor::update(const Param& param, const patchbay::Tensor& grad, double lr) {
  update_scaled(param, grad, lr, 1.0f);
}

void Adafactor::update_scaled(const Param& param, const patchbay::Tensor& grad, double lr,
                              float grad_scale) {
  require_dense_f32_grad(param, grad, "adafactor");
  Slot& slot = slots_[slot_of_[param.index]];
  int64_t* step = slot.step.data<int64_t>();
  *step += 1;
  AdafactorBuffers buffers;
  if (slot.layout.factored) {
    buffers.exp_avg_sq_row = slot.row.data<float>();
    buffers.exp_avg_sq_col = slot.col.data<float>();
  } else {
    buffers.exp_avg_sq = slot.sq.data<float>();
  }
  if (settings_.beta1 > 0.0) buffers.exp_avg = slot.exp_avg.data<float>();
  adafactor_step(param.tensor.data<float>(), grad.data<float>(), buffers, slot.layout, *step, lr,
                 param.options.lr_scale, param.options.weight_decay_scale, settings_, grad_scale);
}

}  // namespace optimizers_basic
