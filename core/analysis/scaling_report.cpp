// Scaling points, fit files and the scaling plot; see scaling_report.hpp.
#include "analysis/scaling_report.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/plots.hpp"
#include "common/error.hpp"
#include "run/atomic_file.hpp"

namespace patchbay::analysis {
namespace fs = std::filesystem;

std::vector<ScalingPoint> scaling_points_from_runs(const std::vector<RunResult>& runs,
                                                   std::vector<std::string>* skipped) {
  std::vector<ScalingPoint> points;
  for (const RunResult& run : runs) {
    if (!(std::isfinite(run.parameters) && std::isfinite(run.tokens) &&
          std::isfinite(run.final_val_loss))) {
      if (skipped != nullptr) skipped->push_back(run.dir.string());
      continue;
    }
    points.push_back({run.parameters, run.tokens, run.final_val_loss, run.dir.filename().string()});
  }
  return points;
}

std::vector<ScalingPoint> read_scaling_points_csv(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw Error(ErrorKind::kNotFound, "cannot read the points file '" + file.string() + "'");
  std::vector<ScalingPoint> points;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#' || (number == 1 && line.find_first_of("0123456789") != 0))
      continue;
    std::istringstream fields(line);
    std::string n, d, l, label;
    std::getline(fields, n, ',');
    std::getline(fields, d, ',');
    std::getline(fields, l, ',');
    std::getline(fields, label);
    try {
      points.push_back({std::stod(n), std::stod(d), std::stod(l), label});
    } catch (const std::exception&) {
      throw Error(ErrorKind::kInvalidArgument, file.string() + ":" + std::to_string(number) +
                                                   ": expected N,D,L[,label] numbers, found '" +
                                                   line + "'");
    }
  }
  return points;
}

std::string fit_to_json(const ScalingFit& fit, const std::vector<ScalingPoint>& points) {
  auto interval = [](const Interval2& i) { return nlohmann::json::array({i.low, i.high}); };
  nlohmann::json data = nlohmann::json::array();
  for (const ScalingPoint& p : points)
    data.push_back({{"N", p.parameters},
                    {"D", p.tokens},
                    {"L", p.loss},
                    {"fit", fit.law.loss(p.parameters, p.tokens)},
                    {"label", p.label}});
  return nlohmann::json{{"law", "L(N,D) = E + A/N^alpha + B/D^beta"},
                        {"E", fit.law.E},
                        {"A", fit.law.A},
                        {"B", fit.law.B},
                        {"alpha", fit.law.alpha},
                        {"beta", fit.law.beta},
                        {"a", fit.law.a()},
                        {"b", fit.law.b()},
                        {"objective", fit.objective},
                        {"starts", fit.starts},
                        {"bootstrap_resamples", fit.bootstrap_resamples},
                        {"ci_level", fit.ci_level},
                        {"ci",
                         {{"E", interval(fit.E)},
                          {"A", interval(fit.A)},
                          {"B", interval(fit.B)},
                          {"alpha", interval(fit.alpha)},
                          {"beta", interval(fit.beta)},
                          {"a", interval(fit.a)},
                          {"b", interval(fit.b)}}},
                        {"points", data}}
             .dump(2) +
         "\n";
}

ChinchillaLaw read_fit_json(const fs::path& file) {
  std::ifstream in(file);
  if (!in)
    throw Error(ErrorKind::kNotFound, "cannot read the fit file '" + file.string() +
                                          "' (write one with scaling fit --out)");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  for (const char* key : {"E", "A", "B", "alpha", "beta"})
    if (!j.is_object() || !j.contains(key) || !j[key].is_number())
      throw Error(ErrorKind::kInvalidArgument,
                  "'" + file.string() + "' is not a scaling fit: no number '" + key + "'");
  return {j["E"].get<double>(), j["A"].get<double>(), j["B"].get<double>(),
          j["alpha"].get<double>(), j["beta"].get<double>()};
}

std::vector<fs::path> write_scaling_plot(const ScalingFit& fit,
                                         const std::vector<ScalingPoint>& points,
                                         const fs::path& out_dir) {
  fs::create_directories(out_dir);
  std::map<double, std::vector<const ScalingPoint*>> by_size;
  double d_min = INFINITY, d_max = 0;
  for (const ScalingPoint& p : points) {
    by_size[p.parameters].push_back(&p);
    d_min = std::min(d_min, p.tokens);
    d_max = std::max(d_max, p.tokens);
  }
  static const char* colors[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a",
                                 "#66a61e", "#e6ab02", "#a6761d", "#666666"};
  std::string plot;
  size_t index = 0;
  for (const auto& [n, members] : by_size) {
    std::string measured = "# D L\n", predicted = "# D L_fit\n";
    for (const ScalingPoint* p : members) {
      char line[64];
      std::snprintf(line, sizeof line, "%.6g %.6f\n", p->tokens, p->loss);
      measured += line;
    }
    for (int k = 0; k <= 60; ++k) {
      const double d = d_min / 1.5 * std::pow(d_max * 1.5 / (d_min / 1.5), k / 60.0);
      char line[64];
      std::snprintf(line, sizeof line, "%.6g %.6f\n", d, fit.law.loss(n, d));
      predicted += line;
    }
    const std::string stem = "scaling_n" + std::to_string(index);
    run::write_text_atomically(out_dir / (stem + "_points.dat"), measured);
    run::write_text_atomically(out_dir / (stem + "_fit.dat"), predicted);
    char title[64];
    std::snprintf(title, sizeof title, "N = %.3g", n);
    const std::string color = colors[index % std::size(colors)];
    plot += std::string(plot.empty() ? "plot " : ", \\\n     ") + "'" + stem +
            "_points.dat' using 1:2 with points pt 7 ps 1.3 lc rgb '" + color + "' title '" +
            title + " (measured)', \\\n     '" + stem +
            "_fit.dat' using 1:2 with lines lw 2 dt 2 lc rgb '" + color + "' title '" + title +
            " (fit)'";
    ++index;
  }
  char heading[256];
  std::snprintf(
      heading, sizeof heading,
      "set title 'L(N,D) = %.3f + %.4g/N^{%.3f} + %.4g/D^{%.3f}   (a = %.3f, b = %.3f)'\n",
      fit.law.E, fit.law.A, fit.law.alpha, fit.law.B, fit.law.beta, fit.law.a(), fit.law.b());
  const std::string body = std::string(heading) +
                           "set logscale x\nset xlabel 'training tokens D'\nset ylabel 'final "
                           "validation loss (nats/token)'\n"
                           "set grid\nset key outside right top box\nset format x '10^{%L}'\n" +
                           plot + "\n";
  auto block = [&](const std::string& terminal, const std::string& file) {
    return "set terminal " + terminal + " size 1100,650 enhanced font 'DejaVu Sans,11'" +
           (terminal == "svg" ? " background '#ffffff'" : "") + "\nset output '" + file + "'\n" +
           body;
  };
  run::write_text_atomically(
      out_dir / "scaling_fit.gp",
      block("pngcairo", "scaling_fit.png") + block("svg", "scaling_fit.svg") + "unset output\n");
  run_gnuplot(out_dir / "scaling_fit.gp");
  return {out_dir / "scaling_fit.png", out_dir / "scaling_fit.svg"};
}

}  // namespace patchbay::analysis
