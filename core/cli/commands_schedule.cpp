// `patchbay schedule CONFIG [--set k=v ...]`: shows the learning rate a config's [train]
// schedule gives over the run, before any training: a text chart and the rate at the steps
// that define the schedule on the terminal, optionally every step as CSV and a PNG plot
// (gnuplot). It uses the trainer's own reader (train::lr_schedule_from_config), so what it
// shows is what `patchbay train` will do.
#include <boost/program_options.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/component_lookup.hpp"
#include "common/error.hpp"
#include "config/config_loader.hpp"
#include "train/lr_schedule.hpp"
#include "train/train_config.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;
using train::LrSchedule;

// A chart of `height` rows by `width` columns: column c shows the rate at step
// round(c * (S - 1) / (width - 1)); a '*' marks the row of that rate (top row = max).
std::string text_chart(const LrSchedule& s, int64_t steps, int width, int height) {
  std::vector<double> column(static_cast<size_t>(width));
  double top = 0.0;
  for (int c = 0; c < width; ++c) {
    const int64_t step = std::llround(double(c) * double(steps - 1) / double(width - 1));
    column[static_cast<size_t>(c)] = train::learning_rate(s, step);
    top = std::max(top, column[static_cast<size_t>(c)]);
  }
  std::ostringstream out;
  for (int r = height - 1; r >= 0; --r) {
    std::ostringstream label;
    if (r == height - 1 || r == 0 || r == height / 2)
      label << std::setprecision(3) << std::scientific << top * double(r) / double(height - 1);
    out << std::setw(10) << label.str() << " |";
    for (int c = 0; c < width; ++c) {
      const int row = top > 0 ? static_cast<int>(std::lround(column[static_cast<size_t>(c)] / top * (height - 1))) : 0;
      out << (row == r ? '*' : ' ');
    }
    out << '\n';
  }
  out << std::string(11, ' ') << '+' << std::string(static_cast<size_t>(width), '-') << '\n';
  std::ostringstream last;
  last << steps - 1;
  out << std::string(12, ' ') << "0" << std::string(static_cast<size_t>(width) - 1 - last.str().size(), ' ')
      << last.str() << "  (update)\n";
  return out.str();
}

// The steps where the schedule changes character, sorted and unique.
std::vector<int64_t> landmark_steps(const LrSchedule& s, int64_t steps) {
  std::vector<int64_t> marks = {0, s.warmup_steps, s.warmup_steps + (steps - s.warmup_steps) / 2, steps - 1};
  if (s.kind == train::LrScheduleKind::kWarmupStableDecay) {
    marks.push_back(steps - s.decay_steps);
    marks.push_back(steps - s.decay_steps / 2);
  }
  std::vector<int64_t> out;
  for (int64_t m : marks)
    if (m >= 0 && m < steps) out.push_back(m);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void write_csv(const LrSchedule& s, int64_t steps, const std::filesystem::path& path) {
  std::ofstream out(path);
  if (!out) throw Error(ErrorKind::kIo, "cannot write " + path.string() + ": check the folder exists and is writable");
  out << "step,lr\n" << std::setprecision(9);
  for (int64_t step = 0; step < steps; ++step) out << step + 1 << ',' << train::learning_rate(s, step) << '\n';
}

// Plots the CSV with gnuplot into a PNG. Throws Error naming the fix when gnuplot is missing.
void write_png(const std::filesystem::path& csv, const std::filesystem::path& png, const std::string& title) {
  std::ostringstream script;
  script << "set terminal pngcairo size 900,500 font ',11'; set output '" << png.string() << "';"
         << "set datafile separator ','; set key off; set grid;"
         << "set title '" << title << "' noenhanced; set xlabel 'update'; set ylabel 'learning rate';"
         << "plot '" << csv.string() << "' every ::1 using 1:2 with lines lw 2";
  const std::string command = "gnuplot -e \"" + script.str() + "\" 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) throw Error(ErrorKind::kIo, "cannot start gnuplot");
  std::string output;
  char buffer[256];
  while (fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = pclose(pipe);
  if (status != 0 || !std::filesystem::exists(png)) {
    throw Error(ErrorKind::kIo, "gnuplot could not write " + png.string() + " (" + output +
                                    "); install it with `apt-get install gnuplot-nox` (scripts/setup.sh does)");
  }
}

int run_schedule(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string file, png, csv;
  std::vector<std::string> overrides;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")(
      "set", po::value(&overrides)->composing()->value_name("path=value"),
      "override a key, e.g. --set train.schedule=wsd (repeatable)")(
      "png", po::value(&png)->value_name("FILE"), "also plot the rate over every update into FILE (PNG, gnuplot)")(
      "csv", po::value(&csv)->value_name("FILE"), "also write every update's rate as CSV (step,lr)");
  po::options_description hidden;
  hidden.add_options()("file", po::value(&file), "config file");
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(all).positional(positional).run(), values);
  po::notify(values);
  if (values.count("help") != 0) {
    std::cout << "Usage: patchbay schedule CONFIG [--set path=value ...] [--png FILE] [--csv FILE]\n\n"
                 "Shows the learning rate [train] schedule gives each update of the run (warmup, then\n"
                 "constant | linear | cosine | inverse_sqrt | wsd with its decay tail), as the trainer\n"
                 "will use it: a text chart, the rate at the steps that define the schedule, and\n"
                 "optionally a PNG plot and the full series as CSV.\n\n"
              << options;
    return kExitOk;
  }
  if (file.empty()) throw po::error("missing config FILE: patchbay schedule CONFIG");
  config::ResolvedConfig config = config::load_config(file, overrides);
  const ComponentLookup components = make_component_lookup(global, config);
  if (!components.registry) throw Error(ErrorKind::kInternal, components.unavailable_reason);
  train::validate_training_config(config, components.lookup);  // the trainer's own validation
  const LrSchedule s = train::lr_schedule_from_config(config);
  train::validate(s);
  const int64_t steps = s.max_steps;
  std::ostringstream title;
  title << train::lr_schedule_kind_name(s.kind) << " schedule: lr " << s.lr << ", min_lr " << s.min_lr << ", warmup "
        << s.warmup_steps << ", " << steps << " updates";
  if (s.kind == train::LrScheduleKind::kWarmupStableDecay)
    title << ", decay " << s.decay_steps << " (" << train::decay_shape_name(s.decay_shape) << ")";
  std::cout << title.str() << "\n\n" << text_chart(s, steps, 64, 12) << "\n  update   learning rate\n";
  for (int64_t step : landmark_steps(s, steps)) {
    std::cout << std::setw(8) << step + 1 << "   " << std::setprecision(6) << train::learning_rate(s, step) << '\n';
  }
  if (!csv.empty() || !png.empty()) {
    const std::filesystem::path csv_path =
        csv.empty() ? std::filesystem::path(png).replace_extension(".csv") : std::filesystem::path(csv);
    write_csv(s, steps, csv_path);
    if (!png.empty()) {
      write_png(csv_path, png, title.str());
      std::cout << "plot: " << png << '\n';
      if (csv.empty()) std::filesystem::remove(csv_path);
    }
    if (!csv.empty()) std::cout << "csv: " << csv << '\n';
  }
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"schedule", "Show the learning rate over a config's run (text chart, PNG, CSV)",
                           run_schedule});

}  // namespace patchbay::cli
