// Scaling-law fits and compute-optimal allocations; see scaling_law.hpp.
#include "analysis/scaling_law.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlopt.hpp>
#include <random>

#include "common/error.hpp"

namespace patchbay::analysis {
namespace {

constexpr int kParams = 5;  // x = (a, b, e, alpha, beta)
constexpr double kPetaflopDay = 8.64e19;

struct Problem {
  std::vector<double> log_n, log_d, log_l;
  std::vector<double> weight;  // bootstrap multiplicity of each point (1 for the plain fit)
  double delta = 1e-3;
  // The best point seen by any evaluation (NLopt may stop with a roundoff exception).
  std::vector<double> best_x;
  double best_value = std::numeric_limits<double>::infinity();
};

double objective(unsigned n, const double* x, double* gradient, void* data) {
  auto& p = *static_cast<Problem*>(data);
  const double a = x[0], b = x[1], e = x[2], alpha = x[3], beta = x[4];
  double total = 0;
  double g[kParams] = {0, 0, 0, 0, 0};
  for (size_t i = 0; i < p.log_n.size(); ++i) {
    if (p.weight[i] == 0) continue;
    const double t1 = a - alpha * p.log_n[i], t2 = b - beta * p.log_d[i], t3 = e;
    const double m = std::max({t1, t2, t3});
    const double w1 = std::exp(t1 - m), w2 = std::exp(t2 - m), w3 = std::exp(t3 - m);
    const double s = w1 + w2 + w3;
    const double r = m + std::log(s) - p.log_l[i];
    const double huber =
        std::fabs(r) <= p.delta ? 0.5 * r * r : p.delta * (std::fabs(r) - 0.5 * p.delta);
    const double slope = std::fabs(r) <= p.delta ? r : (r > 0 ? p.delta : -p.delta);
    total += p.weight[i] * huber;
    const double c = p.weight[i] * slope / s;
    g[0] += c * w1;
    g[1] += c * w2;
    g[2] += c * w3;
    g[3] -= c * w1 * p.log_n[i];
    g[4] -= c * w2 * p.log_d[i];
  }
  if (gradient != nullptr)
    for (unsigned k = 0; k < n; ++k) gradient[k] = g[k];
  if (total < p.best_value) {
    p.best_value = total;
    p.best_x.assign(x, x + n);
  }
  return total;
}

// One L-BFGS run from `start`; returns (value, x) of the best point seen.
std::pair<double, std::vector<double>> minimise(Problem& problem,
                                                const std::vector<double>& start) {
  problem.best_value = std::numeric_limits<double>::infinity();
  problem.best_x = start;
  nlopt::opt opt(nlopt::LD_LBFGS, kParams);
  opt.set_min_objective(objective, &problem);
  opt.set_ftol_rel(1e-14);
  opt.set_ftol_abs(1e-20);
  opt.set_xtol_rel(1e-11);
  opt.set_maxeval(3000);
  opt.set_vector_storage(10);
  std::vector<double> x = start;
  double value = 0;
  try {
    opt.optimize(x, value);
  } catch (const std::exception&) {
    // nlopt::roundoff_limited and friends: keep the best point evaluated.
  }
  return {problem.best_value, problem.best_x};
}

ChinchillaLaw law_from(const std::vector<double>& x) {
  return {std::exp(x[2]), std::exp(x[0]), std::exp(x[1]), x[3], x[4]};
}

Interval2 percentile_interval(std::vector<double> values, double level) {
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  auto q = [&](double f) {
    const double pos = f * static_cast<double>(values.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, values.size() - 1);
    return values[lo] + (pos - static_cast<double>(lo)) * (values[hi] - values[lo]);
  };
  return {q((1 - level) / 2), q((1 + level) / 2)};
}

}  // namespace

double ChinchillaLaw::loss(double n, double d) const {
  return E + A / std::pow(n, alpha) + B / std::pow(d, beta);
}

ChinchillaLaw published_law(const std::string& name) {
  if (name == "chinchilla") return {1.69, 406.4, 410.7, 0.34, 0.28};
  if (name == "chinchilla-unrounded")
    return {std::exp(0.5267228), std::exp(6.0073404), std::exp(6.0179186), 0.33917084, 0.2849083};
  if (name == "epoch") return {1.8172, 482.01, 2085.43, 0.3478, 0.3658};
  throw Error(
      ErrorKind::kInvalidArgument,
      "unknown published constants '" + name +
          "'; expected chinchilla, chinchilla-unrounded, epoch or kaplan (or --fit FILE.json)");
}

Allocation compute_optimal(const ChinchillaLaw& law, double flops) {
  const double g = std::pow(law.alpha * law.A / (law.beta * law.B), 1.0 / (law.alpha + law.beta));
  Allocation result;
  result.parameters = g * std::pow(flops / 6.0, law.a());
  result.tokens = std::pow(flops / 6.0, law.b()) / g;
  result.loss = law.loss(result.parameters, result.tokens);
  return result;
}

Allocation kaplan_compute_optimal(double flops) {
  const double pf_days = flops / kPetaflopDay;
  return {1.3e9 * std::pow(pf_days, 0.73), 2e10 * std::pow(pf_days, 0.27),
          std::numeric_limits<double>::quiet_NaN()};
}

double kaplan_loss_of_parameters(double parameters) { return std::pow(8.8e13 / parameters, 0.076); }

ScalingFit fit_chinchilla(const std::vector<ScalingPoint>& points, const FitOptions& options) {
  if (points.size() < 5)
    throw Error(ErrorKind::kInvalidArgument,
                "a scaling fit has 5 constants and needs at least 5 points (runs with a final "
                "validation loss); got " +
                    std::to_string(points.size()) +
                    ". Add model sizes or token budgets to the sweep.");
  Problem problem;
  problem.delta = options.huber_delta;
  for (const ScalingPoint& p : points) {
    if (!(p.parameters > 0 && p.tokens > 0 && p.loss > 0))
      throw Error(ErrorKind::kInvalidArgument,
                  "scaling point '" + p.label + "' needs N, D and L > 0");
    problem.log_n.push_back(std::log(p.parameters));
    problem.log_d.push_back(std::log(p.tokens));
    problem.log_l.push_back(std::log(p.loss));
  }
  problem.weight.assign(points.size(), 1.0);

  // The paper's grid of initialisations; every start is run, the best kept.
  std::vector<std::pair<double, std::vector<double>>> results;
  for (double alpha = 0; alpha <= 2.0 + 1e-9; alpha += 0.5)
    for (double beta = 0; beta <= 2.0 + 1e-9; beta += 0.5)
      for (double e = -1; e <= 1.0 + 1e-9; e += 0.5)
        for (double a = 0; a <= 25 + 1e-9; a += 5)
          for (double b = 0; b <= 25 + 1e-9; b += 5) {
            auto [value, x] = minimise(problem, {a, b, e, alpha, beta});
            results.push_back({value, {a, b, e, alpha, beta}});
            results.back().second.insert(results.back().second.end(), x.begin(), x.end());
          }
  std::sort(results.begin(), results.end(),
            [](const auto& l, const auto& r) { return l.first < r.first; });
  const std::vector<double> best(results.front().second.begin() + kParams,
                                 results.front().second.end());
  ScalingFit fit;
  fit.law = law_from(best);
  fit.objective = results.front().first;
  fit.starts = static_cast<int>(results.size());
  fit.ci_level = options.ci_level;

  std::vector<double> es, as, bs, alphas, betas, ea, eb;
  std::mt19937_64 generator(options.seed);
  std::uniform_int_distribution<size_t> pick(0, points.size() - 1);
  const size_t refit_starts = std::min<size_t>(24, results.size());
  for (int r = 0; r < options.bootstrap_resamples; ++r) {
    std::fill(problem.weight.begin(), problem.weight.end(), 0.0);
    for (size_t i = 0; i < points.size(); ++i) problem.weight[pick(generator)] += 1.0;
    std::pair<double, std::vector<double>> chosen = minimise(problem, best);
    for (size_t s = 0; s < refit_starts; ++s) {
      const std::vector<double> start(results[s].second.begin(),
                                      results[s].second.begin() + kParams);
      auto candidate = minimise(problem, start);
      if (candidate.first < chosen.first) chosen = candidate;
    }
    const ChinchillaLaw law = law_from(chosen.second);
    es.push_back(law.E);
    as.push_back(law.A);
    bs.push_back(law.B);
    alphas.push_back(law.alpha);
    betas.push_back(law.beta);
    ea.push_back(law.a());
    eb.push_back(law.b());
  }
  fit.bootstrap_resamples = options.bootstrap_resamples;
  if (options.bootstrap_resamples > 0) {
    fit.E = percentile_interval(es, options.ci_level);
    fit.A = percentile_interval(as, options.ci_level);
    fit.B = percentile_interval(bs, options.ci_level);
    fit.alpha = percentile_interval(alphas, options.ci_level);
    fit.beta = percentile_interval(betas, options.ci_level);
    fit.a = percentile_interval(ea, options.ci_level);
    fit.b = percentile_interval(eb, options.ci_level);
  } else {
    fit.E = {fit.law.E, fit.law.E};
    fit.A = {fit.law.A, fit.law.A};
    fit.B = {fit.law.B, fit.law.B};
    fit.alpha = {fit.law.alpha, fit.law.alpha};
    fit.beta = {fit.law.beta, fit.law.beta};
    fit.a = {fit.law.a(), fit.law.a()};
    fit.b = {fit.law.b(), fit.law.b()};
  }
  return fit;
}

}  // namespace patchbay::analysis
