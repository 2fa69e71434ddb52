// `patchbay scaling fit RUN_OR_SWEEP_DIR... | --points FILE.csv [--out DIR]` and
// `patchbay scaling optimal --flops C [--constants NAME | --fit FIT.json]`: the Chinchilla
// parametric fit and compute-optimal allocations of core/analysis/scaling_law.hpp.
#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "analysis/run_results.hpp"
#include "analysis/scaling_law.hpp"
#include "analysis/scaling_report.hpp"
#include "cli/command.hpp"
#include "run/atomic_file.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

void print_constant(const char* name, double value, const analysis::Interval2& ci, int resamples) {
  std::printf("  %-6s = %-12.6g", name, value);
  if (resamples > 0) std::printf("  CI [%.6g, %.6g]", ci.low, ci.high);
  std::printf("\n");
}

int run_scaling_fit(const std::vector<std::string>& args, const GlobalOptions&) {
  std::vector<std::string> inputs;
  std::string points_file, out_dir;
  analysis::FitOptions fit_options;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("runs", po::value(&inputs)->composing(),
                                               "run or sweep directories")(
      "points", po::value(&points_file), "CSV of N,D,L[,label] instead of runs")(
      "out", po::value(&out_dir), "write fit.json and scaling_fit.{png,svg} here")(
      "bootstrap", po::value(&fit_options.bootstrap_resamples),
      "bootstrap resamples for the CIs (default 200)")(
      "ci", po::value(&fit_options.ci_level), "CI level (default 0.90: 5th-95th percentile)")(
      "delta", po::value(&fit_options.huber_delta), "Huber delta (default 1e-3)");
  po::positional_options_description positional;
  positional.add("runs", -1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), values);
  if (values.count("help") != 0) {
    std::cout
        << "Usage: patchbay scaling fit RUN_OR_SWEEP_DIR... | --points FILE.csv [--out DIR]\n\n"
           "Fits L(N,D) = E + A/N^alpha + B/D^beta (N = parameters, D = training tokens, L = "
           "final\n"
           "validation loss) the Chinchilla way: Huber (delta 1e-3) on log-loss, LSE form, L-BFGS\n"
           "(NLopt) from the paper's 4500 initialisations, best kept; bootstrap CIs; prints the\n"
           "compute-optimal exponents a = beta/(alpha+beta), b = alpha/(alpha+beta).\n\n"
        << options;
    return kExitOk;
  }
  po::notify(values);
  std::vector<analysis::ScalingPoint> points;
  if (!points_file.empty()) {
    points = analysis::read_scaling_points_csv(points_file);
  } else {
    if (inputs.empty()) {
      std::cerr << "patchbay scaling fit: give sweep/run directories or --points FILE.csv\n";
      return kExitUsage;
    }
    std::vector<std::string> skipped;
    const std::vector<fs::path> paths(inputs.begin(), inputs.end());
    points = analysis::scaling_points_from_runs(analysis::collect_runs(paths, &skipped), &skipped);
    for (const std::string& s : skipped)
      std::cerr << "scaling fit: left out (unfinished or no size/loss): " << s << "\n";
  }
  const analysis::ScalingFit fit = analysis::fit_chinchilla(points, fit_options);
  std::printf(
      "L(N, D) = E + A/N^alpha + B/D^beta fitted to %zu points (%d starts, best Huber sum %.3g)\n",
      points.size(), fit.starts, fit.objective);
  if (fit.bootstrap_resamples > 0)
    std::printf("%.0f%% bootstrap intervals from %d resamples\n", fit.ci_level * 100,
                fit.bootstrap_resamples);
  print_constant("E", fit.law.E, fit.E, fit.bootstrap_resamples);
  print_constant("A", fit.law.A, fit.A, fit.bootstrap_resamples);
  print_constant("B", fit.law.B, fit.B, fit.bootstrap_resamples);
  print_constant("alpha", fit.law.alpha, fit.alpha, fit.bootstrap_resamples);
  print_constant("beta", fit.law.beta, fit.beta, fit.bootstrap_resamples);
  print_constant("a", fit.law.a(), fit.a, fit.bootstrap_resamples);
  print_constant("b", fit.law.b(), fit.b, fit.bootstrap_resamples);
  std::printf(
      "(N_opt ~ C^a, D_opt ~ C^b under C = 6ND)\n  N           D           L measured  L fit\n");
  for (const analysis::ScalingPoint& p : points)
    std::printf("  %-11.4g %-11.4g %-11.5f %.5f\n", p.parameters, p.tokens, p.loss,
                fit.law.loss(p.parameters, p.tokens));
  if (!out_dir.empty()) {
    run::write_text_atomically(fs::path(out_dir) / "fit.json", analysis::fit_to_json(fit, points));
    for (const fs::path& image : analysis::write_scaling_plot(fit, points, out_dir))
      std::cerr << "scaling fit: plot " << image.string() << "\n";
    std::cerr << "scaling fit: wrote " << (fs::path(out_dir) / "fit.json").string() << "\n";
  }
  return kExitOk;
}

int run_scaling_optimal(const std::vector<std::string>& args, const GlobalOptions&) {
  double flops = 0;
  std::string constants = "chinchilla", fit_file;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("flops", po::value(&flops),
                                               "training compute C in FLOP")(
      "constants", po::value(&constants),
      "chinchilla, chinchilla-unrounded, epoch or kaplan (default chinchilla)")(
      "fit", po::value(&fit_file), "a fit.json written by scaling fit (instead of --constants)");
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).run(), values);
  if (values.count("help") != 0) {
    std::cout
        << "Usage: patchbay scaling optimal --flops C [--constants NAME | --fit FIT.json]\n\n"
           "Compute-optimal N and D for C ~ 6ND: from L(N,D) = E + A/N^alpha + B/D^beta,\n"
           "N_opt = G (C/6)^a, D_opt = (C/6)^b / G, G = (alpha A/(beta B))^(1/(alpha+beta));\n"
           "kaplan: N_opt = 1.3e9 C^0.73, D_opt = 2e10 C^0.27 (C in PF-days; Kaplan et al. Table "
           "6).\n\n"
        << options;
    return kExitOk;
  }
  po::notify(values);
  if (!(flops > 0)) {
    std::cerr << "patchbay scaling optimal: give --flops C (> 0), e.g. --flops 5.76e23\n";
    return kExitUsage;
  }
  if (fit_file.empty() && constants == "kaplan") {
    const analysis::Allocation r = analysis::kaplan_compute_optimal(flops);
    std::printf(
        "Kaplan et al. 2020 (Table 6, non-embedding N) at C = %.4g FLOP (%.4g PF-days):\n"
        "  N_opt = %.4g parameters\n  D_opt = %.4g tokens\n  L(N_opt) = %.4f (Eq. 1.1, "
        "nats/token)\n",
        flops, flops / 8.64e19, r.parameters, r.tokens,
        analysis::kaplan_loss_of_parameters(r.parameters));
    return kExitOk;
  }
  const analysis::ChinchillaLaw law =
      fit_file.empty() ? analysis::published_law(constants) : analysis::read_fit_json(fit_file);
  const analysis::Allocation r = analysis::compute_optimal(law, flops);
  std::printf(
      "%s: E = %.4g, A = %.4g, B = %.4g, alpha = %.4g, beta = %.4g (a = %.4f, b = %.4f)\n"
      "at C = %.4g FLOP (C = 6 N D):\n  N_opt = %.4g parameters\n  D_opt = %.4g tokens (%.1f "
      "tokens per "
      "parameter)\n  L(N_opt, D_opt) = %.4f\n",
      fit_file.empty() ? constants.c_str() : fit_file.c_str(), law.E, law.A, law.B, law.alpha,
      law.beta, law.a(), law.b(), flops, r.parameters, r.tokens, r.tokens / r.parameters, r.loss);
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"scaling fit", "Fit a Chinchilla scaling law L(N,D) to runs or a sweep",
                           run_scaling_fit});
PATCHBAY_REGISTER_COMMAND({"scaling optimal", "Compute-optimal N and D for a FLOP budget",
                           run_scaling_optimal});

}  // namespace patchbay::cli
