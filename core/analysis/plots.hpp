// Plots drawn by gnuplot (Debian gnuplot-nox): the data go to .dat files and a .gp script
// beside the images, so a researcher can restyle a plot and rerun `gnuplot FILE.gp`. Each
// plot is written as PNG (pngcairo) and SVG.
//   val_loss_curves.{png,svg}  validation loss against step, one line per configuration
//                              (mean over seeds) with a band of mean ± std over seeds; the
//                              legend under the plot, the image taller as lines are added
//   final_loss_bars.{png,svg}  final validation loss per configuration, horizontal bars (labels
//                              on the left, any length), mean with ± std error bars
// Both name each configuration "#<row> <label>", the row number of the compare table (and of
// --baseline N), keys shortened to their last component ("attention.kind" for a kind).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "analysis/compare_table.hpp"
#include "analysis/run_results.hpp"

namespace patchbay::analysis {

// Runs `gnuplot script` in the script's folder. Throws Error(kNotFound) when gnuplot is not
// installed (scripts/setup.sh installs it), Error(kIo) when it fails (its output included).
void run_gnuplot(const std::filesystem::path& script);

// Writes the two plots above into `out_dir`; returns the image paths written.
std::vector<std::filesystem::path> write_compare_plots(const std::vector<RunGroup>& groups,
                                                       const CompareTable& table,
                                                       const std::filesystem::path& out_dir);

// A label gnuplot prints as given: quotes dropped, gnuplot's enhanced-text characters escaped.
std::string plot_label(const std::string& label);

}  // namespace patchbay::analysis
