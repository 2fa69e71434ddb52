// Patchbay SDK testing helper: finite-difference gradient checking through pb_ops_table, so a
// plugin author checks a custom op's (or a composed module's) backward the way the engine's
// own ops are checked.
//
//   patchbay::testing::GradcheckResult r = patchbay::testing::gradcheck(
//       ops, [&](const std::vector<patchbay::Tensor>& in) { return my_op(in[0], in[1]); },
//       {x, w});   // f32 CPU leaves with requires_grad(true), small (each element is perturbed)
//   REQUIRE_MESSAGE(r.ok, r.message);
//
// Method: loss = sum(f(inputs) * W) with fixed pseudo-random weights W in [0.5, 1.5]
// (so every output element matters); analytic gradients from backward(), numeric ones from
// central differences (f(x+eps) - f(x-eps)) / 2eps evaluated with grad off, accumulated in
// double. An element passes when |analytic - numeric| <= atol + rtol * |numeric|.
// Inputs are perturbed in place and restored. Cost: 2 * (total input elements) forwards.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "patchbay/tensor.hpp"

namespace patchbay::testing {

struct GradcheckOptions {
  double eps = 1e-3;
  double rtol = 1e-2;
  double atol = 1e-3;
  uint64_t weight_seed = 12345;
  // An input the output does not reach gets no gradient from the engine (undefined grad). By
  // default that is a failure; with this set it counts as a zero gradient and is checked
  // against the finite differences like any other (they must be 0 too). For layers whose
  // parameters are reached only for some inputs: MoE experts no token was routed to, or
  // expert weights seen through a router-only auxiliary loss.
  bool missing_gradient_is_zero = false;
};

struct GradcheckResult {
  bool ok = true;
  std::string message;     // the worst element of the first failing input, or "ok"
  double worst_ratio = 0;  // max |a - n| / (atol + rtol |n|) over all inputs (<= 1 passes)
};

inline GradcheckResult gradcheck(const pb_ops_table* ops,
                                 const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                 std::vector<Tensor> inputs, const GradcheckOptions& options = {}) {
  Ops make(ops);
  GradcheckResult result;
  Tensor out = f(inputs);
  Generator gen(ops, options.weight_seed);
  Tensor weights = make.uniform(out.shape(), gen, 0.5, 1.5).to(out.dtype());
  for (Tensor& x : inputs)
    if (x.requires_grad()) x.zero_grad();
  (out * weights).sum().backward();
  const std::vector<float> w = weights.to_vector();
  auto loss = [&]() {
    NoGradGuard no_grad(ops);
    std::vector<float> o = f(inputs).to_vector();
    double s = 0;
    for (size_t i = 0; i < o.size(); ++i) s += static_cast<double>(o[i]) * w[i];
    return s;
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    if (x.dtype() != PB_DTYPE_F32 || !x.is_contiguous())
      throw PluginError(PB_STATUS_INVALID_ARGUMENT, "gradcheck: input " + std::to_string(k) +
                                                        " must be a contiguous f32 CPU tensor");
    Tensor g = x.grad();
    if (!g.defined() && !options.missing_gradient_is_zero) {
      result.ok = false;
      result.message = "input " + std::to_string(k) + " received no gradient";
      return result;
    }
    std::vector<float> analytic = g.defined() ? g.to_vector() : std::vector<float>(static_cast<size_t>(x.numel()), 0.0f);
    float* p = x.data<float>();
    for (size_t i = 0; i < analytic.size(); ++i) {
      const float saved = p[i];
      p[i] = saved + static_cast<float>(options.eps);
      double up = loss();
      p[i] = saved - static_cast<float>(options.eps);
      double down = loss();
      p[i] = saved;
      double numeric = (up - down) / (2 * options.eps);
      double diff = std::fabs(analytic[i] - numeric);
      double ratio = diff == 0 ? 0 : diff / (options.atol + options.rtol * std::fabs(numeric));
      if (!(ratio <= result.worst_ratio)) {
        result.worst_ratio = std::isnan(ratio) ? INFINITY : ratio;
        if (result.worst_ratio > 1 && result.ok) {
          std::ostringstream os;
          os << "input " << k << " element " << i << ": analytic " << analytic[i] << " vs numeric "
             << numeric << " (rtol " << options.rtol << ", atol " << options.atol << ")";
          result.message = os.str();
        }
      }
      if (result.worst_ratio > 1) result.ok = false;
    }
  }
  if (result.ok) result.message = "ok";
  return result;
}

}  // namespace patchbay::testing
