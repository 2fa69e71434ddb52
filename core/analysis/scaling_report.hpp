// Around the scaling fit: points from runs (N = parameters from model_size.json, D = tokens
// trained, L = final validation loss) or from a CSV file (columns N,D,L[,label]), the fit as
// JSON (written by `scaling fit`, read by `scaling optimal --fit`), and the fit-vs-points plot.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "analysis/run_results.hpp"
#include "analysis/scaling_law.hpp"

namespace patchbay::analysis {

// Runs without parameters, tokens or a validation loss are skipped (named in `skipped`).
std::vector<ScalingPoint> scaling_points_from_runs(const std::vector<RunResult>& runs,
                                                   std::vector<std::string>* skipped = nullptr);
std::vector<ScalingPoint> read_scaling_points_csv(const std::filesystem::path& file);

std::string fit_to_json(const ScalingFit& fit, const std::vector<ScalingPoint>& points);
ChinchillaLaw read_fit_json(const std::filesystem::path& file);

// scaling_fit.{png,svg} (+ .dat/.gp) in `out_dir`: loss against tokens, one colour per model
// size, points measured and lines the fit predicts.
std::vector<std::filesystem::path> write_scaling_plot(const ScalingFit& fit,
                                                      const std::vector<ScalingPoint>& points,
                                                      const std::filesystem::path& out_dir);

}  // namespace patchbay::analysis
