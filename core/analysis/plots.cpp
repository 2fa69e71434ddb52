// gnuplot plots for `patchbay compare`; see plots.hpp.
#include "analysis/plots.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include "common/error.hpp"
#include "run/atomic_file.hpp"

namespace patchbay::analysis {
namespace fs = std::filesystem;
namespace {

std::string quote_shell(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// gnuplot string literal in double quotes.
std::string gp_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";  // a line break inside a double-quoted gnuplot string
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

const char* kColors[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e",
                         "#e6ab02", "#a6761d", "#666666", "#1f78b4", "#b2df8a"};

std::string terminals_block(const std::string& stem, const std::string& plot_body, int width,
                            int height) {
  std::string out;
  out += "set terminal pngcairo size " + std::to_string(width) + "," + std::to_string(height) +
         " enhanced font 'DejaVu Sans,11'\nset output " + gp_string(stem + ".png") + "\n" +
         plot_body;
  out += "set terminal svg size " + std::to_string(width) + "," + std::to_string(height) +
         " enhanced font 'DejaVu Sans,11' background '#ffffff'\nset output " +
         gp_string(stem + ".svg") + "\n" + plot_body + "unset output\n";
  return out;
}

// "model.positional=\"rotary\", train.lr=0.01" -> "positional=rotary" + separator + "lr=0.01":
// each key shortened to its last component, quotes dropped (the table keeps full names).
std::string short_label(const std::string& label, const std::string& separator) {
  std::string out;
  size_t start = 0;
  while (start <= label.size()) {
    size_t end = label.find(", ", start);
    if (end == std::string::npos) end = label.size();
    std::string item = label.substr(start, end - start);
    const size_t equals = item.find('=');
    const size_t dot = item.rfind('.', equals);
    if (equals != std::string::npos && dot != std::string::npos) item = item.substr(dot + 1);
    std::string clean;
    for (char c : item)
      if (c != '"') clean += c;
    out += (out.empty() ? "" : separator) + clean;
    start = end + 2;
  }
  return out;
}

}  // namespace

std::string plot_label(const std::string& label) {
  std::string out;
  for (char c : label) {
    if (c == '"') continue;
    if (c == '_' || c == '^' || c == '{' || c == '}' || c == '@' || c == '&' || c == '~')
      out += '\\';
    out += c;
  }
  return out;
}

void run_gnuplot(const fs::path& script) {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0)
    throw Error(ErrorKind::kNotFound,
                "gnuplot is not installed; install it with scripts/setup.sh (Debian package "
                "gnuplot-nox), or "
                "pass --no-plots");
  const fs::path log = script.parent_path() / (script.stem().string() + ".gnuplot.log");
  const std::string command = "cd " + quote_shell(script.parent_path().string()) + " && gnuplot " +
                              quote_shell(script.filename().string()) + " > " +
                              quote_shell(log.filename().string()) + " 2>&1";
  const int status = std::system(command.c_str());
  if (status != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    throw Error(ErrorKind::kIo, "gnuplot failed on " + script.string() + ":\n" + text);
  }
  fs::remove(log);
}

std::vector<fs::path> write_compare_plots(const std::vector<RunGroup>& groups,
                                          const CompareTable& table, const fs::path& out_dir) {
  fs::create_directories(out_dir);
  // Curves: per group, per step, mean and std over the seeds that evaluated at that step.
  std::string curves;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::map<int64_t, std::vector<double>> by_step;
    for (const RunResult& run : groups[g].runs)
      for (const auto& [step, loss] : run.val_curve)
        if (std::isfinite(loss)) by_step[step].push_back(loss);
    std::string data = "# step mean low high (mean +- std over seeds)\n";
    for (const auto& [step, values] : by_step) {
      const double m = mean(values);
      const double s = values.size() > 1 ? sample_std(values) : 0.0;
      char line[128];
      std::snprintf(line, sizeof line, "%lld %.6f %.6f %.6f\n", static_cast<long long>(step), m,
                    m - s, m + s);
      data += line;
    }
    const std::string file = "curve_" + std::to_string(g) + ".dat";
    run::write_text_atomically(out_dir / file, data);
    const std::string color = kColors[g % std::size(kColors)];
    curves += std::string(curves.empty() ? "plot " : ", \\\n     ") + gp_string(file) +
              " using 1:3:4 with filledcurves fillstyle transparent solid 0.18 noborder lc rgb '" +
              color + "' notitle, \\\n     " + gp_string(file) +
              " using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc rgb '" + color + "' title " +
              gp_string(plot_label(short_label(groups[g].label, ", ")) +
                        " (n=" + std::to_string(groups[g].runs.size()) + ")");
  }
  const std::string curve_body =
      "set title 'Validation loss over training (line: mean over seeds; band: ± 1 std)'\n"
      "set xlabel 'step'\nset ylabel 'validation loss (nats/token)'\nset grid\n"
      "set key outside right top box\n" +
      curves + "\n";
  run::write_text_atomically(out_dir / "val_loss_curves.gp",
                             terminals_block("val_loss_curves", curve_body, 1300, 650));
  run_gnuplot(out_dir / "val_loss_curves.gp");

  // Bars: mean final loss with ± std; the y range starts a little below the smallest bar so
  // the differences show.
  std::string bars = "# index mean std\n", xtics;
  double low = INFINITY, high = -INFINITY;
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const CompareRow& row = table.rows[r];
    if (!std::isfinite(row.loss_mean)) continue;
    const double s = std::isfinite(row.loss_std) ? row.loss_std : 0.0;
    low = std::min(low, row.loss_mean - s);
    high = std::max(high, row.loss_mean + s);
    char line[96];
    std::snprintf(line, sizeof line, "%zu %.6f %.6f ", r, row.loss_mean, s);
    bars += std::string(line) + "\n";
    xtics += std::string(xtics.empty() ? "set xtics (" : ", ") +
             gp_string(short_label(row.label, "\n") + (row.is_baseline ? "\n(baseline)" : "")) +
             " " + std::to_string(r);
  }
  run::write_text_atomically(out_dir / "final_loss_bars.dat", bars);
  const double span = std::isfinite(high - low) && high > low ? high - low : 0.1;
  char range[96];
  std::snprintf(range, sizeof range, "set yrange [%.6f:%.6f]\n", low - 0.6 * span,
                high + 0.25 * span);
  const std::string bar_body =
      "set title 'Final validation loss per configuration (mean ± 1 std over seeds)'\n"
      "set ylabel 'validation loss (nats/token)'\nset grid ytics\nset style fill solid 0.6 border "
      "-1\n"
      "set boxwidth 0.6\nset bmargin 7\nset key off\n" +
      xtics + ") noenhanced\n" + std::string(range) +
      "set xrange [-0.6:" + std::to_string(table.rows.size()) + "-0.4]\n" +
      "plot 'final_loss_bars.dat' using 1:2:3 with boxerrorbars lc rgb '#1f78b4' lw 1.5\n";
  const int width = std::max(900, 130 * static_cast<int>(table.rows.size()));
  run::write_text_atomically(out_dir / "final_loss_bars.gp",
                             terminals_block("final_loss_bars", bar_body, width, 640));
  run_gnuplot(out_dir / "final_loss_bars.gp");
  return {out_dir / "val_loss_curves.png", out_dir / "val_loss_curves.svg",
          out_dir / "final_loss_bars.png", out_dir / "final_loss_bars.svg"};
}

}  // namespace patchbay::analysis
