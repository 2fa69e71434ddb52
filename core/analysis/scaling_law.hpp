// Scaling laws. The Chinchilla parametric fit (Hoffmann et al. 2022, Approach 3):
//   L(N, D) = E + A / N^alpha + B / D^beta       (N parameters, D training tokens)
// fitted by minimising  sum_i Huber_delta( LSE(a - alpha ln N_i, b - beta ln D_i, e) - ln L_i )
// with A = e^a, B = e^b, E = e^e, delta = 1e-3, by L-BFGS (NLopt's LD_LBFGS, analytic
// gradient) from the paper's grid of initialisations (alpha, beta in {0, 0.5, ..., 2},
// e in {-1, -0.5, ..., 1}, a, b in {0, 5, ..., 25}: 4500 starts), keeping the best. The
// objective is the sum (not the mean) of the Huber terms, as in the paper and Epoch's
// replication; tolerances are tight because delta = 1e-3 makes the objective tiny.
// Confidence intervals: bootstrap over points (resampled with replacement); each resample
// is refitted from the full fit's optimum and the 24 best grid starts of the full fit
// (not the whole grid again, to keep it fast) — a documented shortcut.
// Compute-optimal allocation under C = 6 N D (Hoffmann Eq. 4):
//   G = (alpha A / (beta B))^(1/(alpha+beta)),  a = beta/(alpha+beta),  b = alpha/(alpha+beta)
//   N_opt = G (C/6)^a,  D_opt = (C/6)^b / G
// Kaplan et al. 2020 Table 6 (C_min in PF-days, 1 PF-day = 8.64e19 FLOP):
//   N_opt = 1.3e9 C^0.73,  D_opt = 2e10 C^0.27;  and L(N) = (N_c / N)^0.076, N_c = 8.8e13.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace patchbay::analysis {

struct ScalingPoint {
  double parameters = 0;  // N
  double tokens = 0;      // D
  double loss = 0;        // L
  std::string label;
};

struct ChinchillaLaw {
  double E = 0, A = 0, B = 0, alpha = 0, beta = 0;
  double loss(double n, double d) const;
  double a() const { return beta / (alpha + beta); }   // N_opt ~ C^a
  double b() const { return alpha / (alpha + beta); }  // D_opt ~ C^b
};

// Published constants: "chinchilla" (rounded, Appendix D.2), "chinchilla-unrounded" (the TeX
// source values Epoch used), "epoch" (Besiroglu et al. 2024 refit). Throws for other names.
ChinchillaLaw published_law(const std::string& name);

struct Allocation {
  double parameters = 0;  // N_opt
  double tokens = 0;      // D_opt
  double loss = 0;        // predicted loss at the optimum (NaN for Kaplan's allocation)
};
Allocation compute_optimal(const ChinchillaLaw& law, double flops);
// Kaplan Table 6 (non-embedding parameters).
Allocation kaplan_compute_optimal(double flops);
// Kaplan Eq. 1.1: L(N) = (8.8e13 / N)^0.076 (N non-embedding parameters).
double kaplan_loss_of_parameters(double parameters);

struct FitOptions {
  double huber_delta = 1e-3;
  int bootstrap_resamples = 200;
  double ci_level = 0.90;  // Hoffmann report 10th-90th percentiles
  uint64_t seed = 42;
};

struct Interval2 {
  double low = 0, high = 0;
};

struct ScalingFit {
  ChinchillaLaw law;
  double objective = 0;  // sum of Huber terms at the optimum
  int starts = 0;        // initialisations tried
  int bootstrap_resamples = 0;
  // Bootstrap intervals (ci_level) of E, A, B, alpha, beta, a, b; zero-width without resamples.
  Interval2 E, A, B, alpha, beta, a, b;
  double ci_level = 0;
};

// Needs at least 5 points with N, D, L > 0. Throws Error(kInvalidArgument) otherwise.
ScalingFit fit_chinchilla(const std::vector<ScalingPoint>& points, const FitOptions& options = {});

}  // namespace patchbay::analysis
