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

// Twelve colours distinct on white (ColorBrewer Paired, darker shades first); past twelve
// configurations the dash pattern changes too.
const char* kColors[] = {"#1f78b4", "#e31a1c", "#33a02c", "#ff7f00", "#6a3d9a", "#b15928",
                         "#a6cee3", "#fb9a99", "#b2df8a", "#fdbf6f", "#cab2d6", "#000000"};

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

// "model.positional=\"rotary\", model.attention.kind=\"mqa\"" -> "positional=rotary" +
// separator + "attention.kind=mqa": each key shortened to its last component (the last two
// for a `kind`, which says little alone), quotes dropped (the table keeps full names).
std::string short_label(const std::string& label, const std::string& separator) {
  std::string out;
  size_t start = 0;
  while (start <= label.size()) {
    size_t end = label.find(", ", start);
    if (end == std::string::npos) end = label.size();
    std::string item = label.substr(start, end - start);
    const size_t equals = item.find('=');
    size_t dot = equals == std::string::npos ? std::string::npos : item.rfind('.', equals);
    if (dot != std::string::npos && item.compare(dot + 1, equals - dot - 1, "kind") == 0 && dot > 0)
      dot = item.rfind('.', dot - 1);
    if (equals != std::string::npos && dot != std::string::npos) item = item.substr(dot + 1);
    std::string clean;
    for (char c : item)
      if (c != '"') clean += c;
    out += (out.empty() ? "" : separator) + clean;
    start = end + 2;
  }
  return out;
}

// "#3 attention.kind=mqa": the row number is the table's (and --baseline N's).
std::string numbered(size_t row, const std::string& label) {
  std::string out = "#";  // appended piecewise: g++ 12's -Wrestrict misfires on "#" + string
  out += std::to_string(row);
  out += ' ';
  out += short_label(label, ", ");
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
    const std::string dash = std::to_string(1 + g / std::size(kColors));
    curves += std::string(curves.empty() ? "plot " : ", \\\n     ") + gp_string(file) +
              " using 1:3:4 with filledcurves fillstyle transparent solid 0.12 noborder lc rgb '" +
              color + "' notitle, \\\n     " + gp_string(file) +
              " using 1:2 with linespoints lw 2 dt " + dash + " pt 7 ps 0.5 lc rgb '" + color +
              "' title " +
              gp_string(plot_label(numbered(g, groups[g].label)) +
                        " (n=" + std::to_string(groups[g].runs.size()) + ")");
  }
  // The legend goes under the plot (gnuplot puts two columns side by side where they fit,
  // at most half the lines per column past four), so long labels never squeeze the plot's
  // width and the image grows in height with the configurations: a dozen still fit.
  const size_t columns = groups.size() > 4 ? 2 : 1;
  const size_t legend_rows = (groups.size() + columns - 1) / columns;
  const std::string curve_body =
      "set title 'Validation loss over training (line: mean over seeds; band: ± 1 std)'\n"
      "set xlabel 'step'\nset ylabel 'validation loss (nats/token)'\nset grid\n"
      "set key outside below center Left reverse maxrows " +
      std::to_string(legend_rows) + " spacing 1.15 samplen 3\n" + curves + "\n";
  const int curve_height = 600 + 24 * static_cast<int>(legend_rows);
  run::write_text_atomically(out_dir / "val_loss_curves.gp",
                             terminals_block("val_loss_curves", curve_body, 1300, curve_height));
  run_gnuplot(out_dir / "val_loss_curves.gp");

  // Bars, horizontal: one per row, top to bottom in the table's order, labels on the left
  // (gnuplot widens the margin to the longest), mean final loss with ± std; the x range
  // starts a little below the smallest bar so the differences show.
  std::string bars = "# row mean std is_baseline\n", ytics;
  double low = INFINITY, high = -INFINITY;
  size_t longest_label = 0;
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const CompareRow& row = table.rows[r];
    const std::string label = numbered(r, row.label) + (row.is_baseline ? " (baseline)" : "");
    longest_label = std::max(longest_label, label.size());
    ytics += std::string(ytics.empty() ? "set ytics (" : ", ") + gp_string(label) + " " +
             std::to_string(r);
    if (!std::isfinite(row.loss_mean)) continue;
    const double s = std::isfinite(row.loss_std) ? row.loss_std : 0.0;
    low = std::min(low, row.loss_mean - s);
    high = std::max(high, row.loss_mean + s);
    char line[96];
    std::snprintf(line, sizeof line, "%zu %.6f %.6f %d\n", r, row.loss_mean, s,
                  row.is_baseline ? 1 : 0);
    bars += line;
  }
  run::write_text_atomically(out_dir / "final_loss_bars.dat", bars);
  const double span = std::isfinite(high - low) && high > low ? high - low : 0.1;
  const double origin = low - 0.5 * span;
  char range[160];
  std::snprintf(range, sizeof range, "set xrange [%.6f:%.6f]\nset yrange [%zu.5:-0.5]\n", origin,
                high + 0.15 * span, table.rows.size() - 1);
  char base[48];
  std::snprintf(base, sizeof base, "x0 = %.6f\n", origin);
  const std::string bar_body =
      "set title 'Final validation loss (mean ± 1 std over seeds; grey: the baseline)'\n"
      "set xlabel 'final validation loss (nats/token)'\nset grid xtics\n"
      "set style fill solid 0.6 border -1\nset key off\nset ytics nomirror\n" +
      ytics + ") noenhanced\n" + std::string(range) + base +
      "plot 'final_loss_bars.dat' using (x0):1:(x0):2:($1-0.35):($1+0.35):($4 > 0 ? "
      "0x999999 : 0x1f78b4) with boxxyerror lc rgb variable, \\\n"
      "     '' using 2:1:3 with xerrorbars pt 7 ps 0.4 lc rgb '#000000' lw 1.5\n";
  const int bar_height = std::max(360, 140 + 34 * static_cast<int>(table.rows.size()));
  // The labels take ~7 px a character at 11 pt; the plot keeps ~700 px beside them.
  const int bar_width = std::min(2400, 760 + 7 * static_cast<int>(longest_label));
  run::write_text_atomically(out_dir / "final_loss_bars.gp",
                             terminals_block("final_loss_bars", bar_body, bar_width, bar_height));
  run_gnuplot(out_dir / "final_loss_bars.gp");
  return {out_dir / "val_loss_curves.png", out_dir / "val_loss_curves.svg",
          out_dir / "final_loss_bars.png", out_dir / "final_loss_bars.svg"};
}

}  // namespace patchbay::analysis
