// Building and printing the compare table; see compare_table.hpp.
#include "analysis/compare_table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

namespace patchbay::analysis {
namespace {

// Per seed losses of a group, sorted by seed; runs without a loss are skipped.
std::vector<std::pair<int64_t, double>> losses_by_seed(const RunGroup& group) {
  std::vector<std::pair<int64_t, double>> values;
  for (const RunResult& run : group.runs)
    if (std::isfinite(run.final_val_loss)) values.emplace_back(run.seed, run.final_val_loss);
  std::sort(values.begin(), values.end());
  return values;
}

double mean_of(const RunGroup& group, double RunResult::*field) {
  std::vector<double> values;
  for (const RunResult& run : group.runs)
    if (std::isfinite(run.*field)) values.push_back(run.*field);
  return mean(values);
}

std::string fmt(double value, const char* format = "%.4f") {
  if (!std::isfinite(value)) return "";
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

std::string markdown_cell(std::string text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string csv_cell(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

nlohmann::json number_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json();
}

}  // namespace

CompareTable build_compare_table(const std::vector<RunGroup>& groups, size_t baseline,
                                 double ci_level) {
  CompareTable table;
  table.baseline = baseline;
  table.ci_level = ci_level;
  const auto base_values = baseline < groups.size() ? losses_by_seed(groups[baseline])
                                                    : std::vector<std::pair<int64_t, double>>{};
  for (size_t g = 0; g < groups.size(); ++g) {
    const RunGroup& group = groups[g];
    CompareRow row;
    row.label = group.label;
    row.config_id = group.config_id;
    const auto values = losses_by_seed(group);
    std::vector<double> losses, bpbs;
    for (const auto& [seed, loss] : values) {
      row.seeds.push_back(seed);
      losses.push_back(loss);
    }
    for (const RunResult& run : group.runs)
      if (std::isfinite(run.final_val_bpb)) bpbs.push_back(run.final_val_bpb);
    row.n = losses.size();
    row.loss_mean = mean(losses);
    row.loss_std = sample_std(losses);
    row.loss_ci = bootstrap_mean_interval(losses, ci_level);
    row.bpb_mean = mean(bpbs);
    row.bpb_std = sample_std(bpbs);
    row.tokens_per_second = mean_of(group, &RunResult::tokens_per_second);
    row.parameters = mean_of(group, &RunResult::parameters);
    row.flops_per_token = mean_of(group, &RunResult::flops_per_token);
    row.is_baseline = g == baseline;
    if (!row.is_baseline && !base_values.empty() && !losses.empty()) {
      std::vector<double> base_losses;
      std::vector<int64_t> base_seeds;
      for (const auto& [seed, loss] : base_values) {
        base_seeds.push_back(seed);
        base_losses.push_back(loss);
      }
      row.delta = row.loss_mean - mean(base_losses);
      const bool paired = base_seeds == row.seeds && row.n >= 2;
      const TTest test =
          paired ? paired_t_test(losses, base_losses) : welch_t_test(losses, base_losses);
      if (std::isfinite(test.p_value)) {
        row.test = paired ? "paired" : "welch";
        row.p_value = test.p_value;
      }
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

std::string to_markdown(const CompareTable& table) {
  std::ostringstream out;
  out << "| # | configuration | n | val loss (mean ± std) | " << std::lround(table.ci_level * 100)
      << "% CI | bits/byte | tokens/s | params | FLOPs/token | Δ vs baseline | p (test) |\n"
      << "|---:|---|---:|---|---|---:|---:|---:|---:|---:|---|\n";
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const CompareRow& row = table.rows[r];
    out << "| " << r << " | " << markdown_cell(row.label)
        << (row.is_baseline ? " **(baseline)**" : "") << " | " << row.n << " | "
        << fmt(row.loss_mean);
    if (std::isfinite(row.loss_std)) out << " ± " << fmt(row.loss_std);
    out << " | ";
    if (std::isfinite(row.loss_ci.low))
      out << "[" << fmt(row.loss_ci.low) << ", " << fmt(row.loss_ci.high) << "]";
    out << " | " << fmt(row.bpb_mean) << " | " << fmt(row.tokens_per_second, "%.0f") << " | "
        << fmt(row.parameters, "%.0f") << " | " << fmt(row.flops_per_token, "%.3g") << " | "
        << (row.is_baseline ? std::string("—") : fmt(row.delta, "%+.4f")) << " | ";
    if (!row.test.empty()) out << fmt(row.p_value, "%.3g") << " (" << row.test << ")";
    out << " |\n";
  }
  return out.str();
}

std::string to_csv(const CompareTable& table) {
  std::ostringstream out;
  out << "configuration,baseline,n,seeds,val_loss_mean,val_loss_std,val_loss_ci_low,val_loss_ci_"
         "high,"
         "val_bpb_mean,val_bpb_std,tokens_per_second,parameters,flops_per_token,delta,test,p_"
         "value\n";
  for (const CompareRow& row : table.rows) {
    out << csv_cell(row.label) << "," << (row.is_baseline ? "true" : "false") << "," << row.n
        << ",";
    for (size_t i = 0; i < row.seeds.size(); ++i) out << (i ? " " : "") << row.seeds[i];
    out << "," << fmt(row.loss_mean, "%.6g") << "," << fmt(row.loss_std, "%.6g") << ","
        << fmt(row.loss_ci.low, "%.6g") << "," << fmt(row.loss_ci.high, "%.6g") << ","
        << fmt(row.bpb_mean, "%.6g") << "," << fmt(row.bpb_std, "%.6g") << ","
        << fmt(row.tokens_per_second, "%.6g") << "," << fmt(row.parameters, "%.0f") << ","
        << fmt(row.flops_per_token, "%.6g") << "," << fmt(row.delta, "%.6g") << "," << row.test
        << "," << fmt(row.p_value, "%.6g") << "\n";
  }
  return out.str();
}

std::string to_json(const CompareTable& table) {
  nlohmann::json rows = nlohmann::json::array();
  for (const CompareRow& row : table.rows) {
    rows.push_back(
        {{"configuration", row.label},
         {"config_id", row.config_id},
         {"baseline", row.is_baseline},
         {"n", row.n},
         {"seeds", row.seeds},
         {"val_loss_mean", number_or_null(row.loss_mean)},
         {"val_loss_std", number_or_null(row.loss_std)},
         {"val_loss_ci", {number_or_null(row.loss_ci.low), number_or_null(row.loss_ci.high)}},
         {"val_bpb_mean", number_or_null(row.bpb_mean)},
         {"val_bpb_std", number_or_null(row.bpb_std)},
         {"tokens_per_second", number_or_null(row.tokens_per_second)},
         {"parameters", number_or_null(row.parameters)},
         {"flops_per_token", number_or_null(row.flops_per_token)},
         {"delta", number_or_null(row.delta)},
         {"test", row.test},
         {"p_value", number_or_null(row.p_value)}});
  }
  return nlohmann::json{{"ci_level", table.ci_level}, {"rows", rows}}.dump(2) + "\n";
}

}  // namespace patchbay::analysis
