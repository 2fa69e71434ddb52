// `patchbay compare RUN_OR_SWEEP_DIR... [--baseline N|LABEL] [--format md|csv|json] [--out DIR]`:
// the table of core/analysis/compare_table.hpp over run directories or sweep directories
// (their finished jobs), grouped by configuration with the seed removed, and the plots of
// core/analysis/plots.hpp. With --out (default: the sweep directory when one is given),
// compare.md, compare.csv, compare.json and plots/ are written there (compare_tasks.csv too when
// the runs scored [eval] tasks).
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "analysis/compare_table.hpp"
#include "analysis/plots.hpp"
#include "analysis/run_results.hpp"
#include "cli/command.hpp"
#include "common/error.hpp"
#include "common/parse_number.hpp"
#include "run/atomic_file.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

int run_compare(const std::vector<std::string>& args, const GlobalOptions&) {
  std::vector<std::string> inputs;
  std::string baseline, format = "md", out_dir;
  bool no_plots = false, full_labels = false;
  double level = 0.95;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("runs", po::value(&inputs)->composing(),
                                               "run or sweep directories")(
      "baseline", po::value(&baseline),
      "baseline row: its number (0 = first) or a substring of its label")(
      "format", po::value(&format), "stdout table: md, csv or json")(
      "out", po::value(&out_dir),
      "write compare.{md,csv,json} and plots/ here (default: the sweep directory)")(
      "ci", po::value(&level), "confidence level of the bootstrap interval (default 0.95)")(
      "no-plots", po::bool_switch(&no_plots), "skip the gnuplot plots")(
      "full-labels", po::bool_switch(&full_labels),
      "label rows with every resolved key that differs (default: the keys that set them apart, "
      "less those a differing kind implies)");
  po::positional_options_description positional;
  positional.add("runs", -1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), values);
  if (values.count("help") != 0) {
    std::cout
        << "Usage: patchbay compare RUN_OR_SWEEP_DIR... [--baseline N|TEXT] [--format md|csv|json] "
           "[--out DIR]\n\n"
           "One row per configuration (runs that differ only by seed pooled): n, final validation\n"
           "loss mean ± sample std and bootstrap CI, bits/byte, tokens/s, parameters, "
           "FLOPs/token,\n"
           "delta against the baseline (default: the first row; in a one-factor-at-a-time sweep "
           "the\n"
           "baseline) and a two-sided p-value: paired t-test when both rows have the same seeds,\n"
           "else Welch's t-test. Plots (gnuplot): val_loss_curves and final_loss_bars, PNG and "
           "SVG.\n"
           "Runs that scored [eval] tasks get a second table: each task metric (acc, acc_norm, "
           "...)\nof the final evaluation with the same statistics, and lm-eval's item stderr.\n"
           "A row is labelled by the config keys that differ between rows; keys a differing\n"
           "component kind implies (the options of each kind's own table, its plugin file) are\n"
           "left out unless --full-labels. Rows are numbered #0, #1, ... in tables and plots.\n\n"
        << options;
    return kExitOk;
  }
  po::notify(values);
  if (inputs.empty()) {
    std::cerr << "patchbay compare: give run directories or a sweep directory; see patchbay "
                 "compare --help\n";
    return kExitUsage;
  }
  if (format != "md" && format != "csv" && format != "json") {
    std::cerr << "patchbay compare: --format must be md, csv or json (found '" << format << "')\n";
    return kExitUsage;
  }
  std::vector<fs::path> paths(inputs.begin(), inputs.end());
  if (out_dir.empty() && paths.size() == 1 && fs::exists(paths[0] / "ledger.json"))
    out_dir = paths[0].string();
  std::vector<std::string> skipped;
  const std::vector<analysis::RunResult> runs = analysis::collect_runs(paths, &skipped);
  for (const std::string& line : skipped)
    std::cerr << "compare: not finished, left out: " << line << "\n";
  if (runs.empty())
    throw Error(ErrorKind::kNotFound, "no finished runs to compare; run the sweep first");
  std::vector<analysis::RunGroup> groups = analysis::group_runs(runs);
  if (full_labels)
    for (analysis::RunGroup& group : groups) group.label = group.full_label;
  size_t base = 0;
  if (!baseline.empty()) {
    bool found = false;
    if (baseline.find_first_not_of("0123456789") == std::string::npos) {
      const std::optional<uint64_t> index = parse_uint64(baseline);
      found = index && *index < groups.size();
      base = found ? static_cast<size_t>(*index) : 0;
    } else {
      for (size_t g = 0; g < groups.size() && !found; ++g)
        if (groups[g].label.find(baseline) != std::string::npos) {
          base = g;
          found = true;
        }
    }
    if (!found) {
      std::cerr << "patchbay compare: no row matches --baseline '" << baseline << "'; rows are:\n";
      for (size_t g = 0; g < groups.size(); ++g)
        std::cerr << "  " << g << ": " << groups[g].label << "\n";
      return kExitUsage;
    }
  }
  const analysis::CompareTable table = analysis::build_compare_table(groups, base, level);
  std::cout << (format == "md"    ? analysis::to_markdown(table)
                : format == "csv" ? analysis::to_csv(table)
                                  : analysis::to_json(table));
  if (format == "csv" && !table.task_rows.empty())
    std::cout << "\n" << analysis::task_metrics_csv(table);
  if (!out_dir.empty()) {
    const fs::path out(out_dir);
    run::write_text_atomically(out / "compare.md", analysis::to_markdown(table));
    run::write_text_atomically(out / "compare.csv", analysis::to_csv(table));
    run::write_text_atomically(out / "compare.json", analysis::to_json(table));
    std::cerr << "compare: wrote " << (out / "compare.{md,csv,json}").string() << "\n";
    if (!table.task_rows.empty()) {
      run::write_text_atomically(out / "compare_tasks.csv", analysis::task_metrics_csv(table));
      std::cerr << "compare: wrote " << (out / "compare_tasks.csv").string() << "\n";
    }
    if (!no_plots) {
      for (const fs::path& image : analysis::write_compare_plots(groups, table, out / "plots"))
        std::cerr << "compare: plot " << image.string() << "\n";
    }
  }
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"compare",
                           "Compare runs or a sweep: statistics over seeds, p-values, plots",
                           run_compare});

}  // namespace patchbay::cli
