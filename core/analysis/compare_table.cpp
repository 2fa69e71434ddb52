// Building and printing the compare table; see compare_table.hpp.
#include "analysis/compare_table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>

namespace patchbay::analysis {
namespace {

using SeedValues = std::vector<std::pair<int64_t, double>>;  // (seed, value), sorted by seed

// A value per run of a group, sorted by seed; runs without it (NaN) are skipped.
template <typename ValueOf>
SeedValues values_by_seed(const RunGroup& group, ValueOf value_of) {
  SeedValues values;
  for (const RunResult& run : group.runs)
    if (const double v = value_of(run); std::isfinite(v)) values.emplace_back(run.seed, v);
  std::sort(values.begin(), values.end());
  return values;
}

// Mean, sample std and bootstrap CI over the seeds, and the delta against the baseline's
// values with its test: paired when both have the same seeds (n >= 2), else Welch's.
struct SeedStatistics {
  std::vector<int64_t> seeds;
  size_t n = 0;
  double mean = kMissing, std = kMissing;
  Interval ci{kMissing, kMissing};
  double delta = kMissing;
  std::string test;
  double p_value = kMissing;
};

SeedStatistics seed_statistics(const SeedValues& values, const SeedValues& base, bool is_baseline,
                               double ci_level) {
  SeedStatistics s;
  std::vector<double> v, b;
  std::vector<int64_t> base_seeds;
  for (const auto& [seed, value] : values) {
    s.seeds.push_back(seed);
    v.push_back(value);
  }
  for (const auto& [seed, value] : base) {
    base_seeds.push_back(seed);
    b.push_back(value);
  }
  s.n = v.size();
  s.mean = mean(v);
  s.std = sample_std(v);
  s.ci = bootstrap_mean_interval(v, ci_level);
  if (is_baseline || b.empty() || v.empty()) return s;
  s.delta = s.mean - mean(b);
  const bool paired = base_seeds == s.seeds && s.n >= 2;
  const TTest test = paired ? paired_t_test(v, b) : welch_t_test(v, b);
  if (std::isfinite(test.p_value)) {
    s.test = paired ? "paired" : "welch";
    s.p_value = test.p_value;
  }
  return s;
}

// Every task metric any run reports, in name order, then the configurations in order.
std::vector<TaskMetricRow> task_metric_rows(const std::vector<RunGroup>& groups, size_t baseline,
                                            double ci_level) {
  std::set<std::string> names;
  for (const RunGroup& group : groups)
    for (const RunResult& run : group.runs)
      for (const auto& [name, value] : run.task_metrics) names.insert(name);
  std::vector<TaskMetricRow> rows;
  for (const std::string& name : names) {
    const auto metric = [&](const RunResult& run) {
      const auto it = run.task_metrics.find(name);
      return it == run.task_metrics.end() ? kMissing : it->second;
    };
    const SeedValues base =
        baseline < groups.size() ? values_by_seed(groups[baseline], metric) : SeedValues{};
    for (size_t g = 0; g < groups.size(); ++g) {
      const SeedValues values = values_by_seed(groups[g], metric);
      if (values.empty()) continue;
      const SeedStatistics s = seed_statistics(values, base, g == baseline, ci_level);
      TaskMetricRow row;
      row.metric = name;
      row.group = g;
      row.n = s.n;
      row.seeds = s.seeds;
      row.mean = s.mean;
      row.std = s.std;
      row.ci = s.ci;
      row.delta = s.delta;
      row.test = s.test;
      row.p_value = s.p_value;
      std::vector<double> stderrs;
      for (const RunResult& run : groups[g].runs)
        if (const auto it = run.task_stderr.find(name);
            it != run.task_stderr.end() && std::isfinite(it->second))
          stderrs.push_back(it->second);
      row.item_stderr = mean(stderrs);
      rows.push_back(std::move(row));
    }
  }
  return rows;
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
  const auto final_loss = [](const RunResult& run) { return run.final_val_loss; };
  const auto base_values = baseline < groups.size() ? values_by_seed(groups[baseline], final_loss)
                                                    : std::vector<std::pair<int64_t, double>>{};
  for (size_t g = 0; g < groups.size(); ++g) {
    const RunGroup& group = groups[g];
    CompareRow row;
    row.label = group.label;
    row.config_id = group.config_id;
    const SeedStatistics loss =
        seed_statistics(values_by_seed(group, final_loss), base_values, g == baseline, ci_level);
    std::vector<double> bpbs;
    for (const RunResult& run : group.runs)
      if (std::isfinite(run.final_val_bpb)) bpbs.push_back(run.final_val_bpb);
    row.seeds = loss.seeds;
    row.n = loss.n;
    row.loss_mean = loss.mean;
    row.loss_std = loss.std;
    row.loss_ci = loss.ci;
    row.bpb_mean = mean(bpbs);
    row.bpb_std = sample_std(bpbs);
    row.tokens_per_second = mean_of(group, &RunResult::tokens_per_second);
    row.parameters = mean_of(group, &RunResult::parameters);
    row.flops_per_token = mean_of(group, &RunResult::flops_per_token);
    row.is_baseline = g == baseline;
    row.delta = loss.delta;
    row.test = loss.test;
    row.p_value = loss.p_value;
    table.rows.push_back(std::move(row));
  }
  table.task_rows = task_metric_rows(groups, baseline, ci_level);
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
  if (table.task_rows.empty()) return out.str();
  out << "\nTask metrics ([eval] tasks, final evaluation; item stderr: lm-eval's, mean over "
         "seeds)\n\n"
      << "| task metric | # | configuration | n | mean ± std | "
      << std::lround(table.ci_level * 100) << "% CI | item stderr | Δ vs baseline | p (test) |\n"
      << "|---|---:|---|---:|---|---|---:|---:|---|\n";
  for (const TaskMetricRow& row : table.task_rows) {
    const CompareRow& config = table.rows[row.group];
    out << "| " << markdown_cell(row.metric) << " | " << row.group << " | "
        << markdown_cell(config.label) << (config.is_baseline ? " **(baseline)**" : "") << " | "
        << row.n << " | " << fmt(row.mean);
    if (std::isfinite(row.std)) out << " ± " << fmt(row.std);
    out << " | ";
    if (std::isfinite(row.ci.low)) out << "[" << fmt(row.ci.low) << ", " << fmt(row.ci.high) << "]";
    out << " | " << fmt(row.item_stderr) << " | "
        << (config.is_baseline ? std::string("—") : fmt(row.delta, "%+.4f")) << " | ";
    if (!row.test.empty()) out << fmt(row.p_value, "%.3g") << " (" << row.test << ")";
    out << " |\n";
  }
  return out.str();
}

std::string task_metrics_csv(const CompareTable& table) {
  std::ostringstream out;
  out << "task_metric,configuration,baseline,n,seeds,mean,std,ci_low,ci_high,item_stderr,delta,"
         "test,p_value\n";
  for (const TaskMetricRow& row : table.task_rows) {
    const CompareRow& config = table.rows[row.group];
    out << csv_cell(row.metric) << "," << csv_cell(config.label) << ","
        << (config.is_baseline ? "true" : "false") << "," << row.n << ",";
    for (size_t i = 0; i < row.seeds.size(); ++i) out << (i ? " " : "") << row.seeds[i];
    out << "," << fmt(row.mean, "%.6g") << "," << fmt(row.std, "%.6g") << ","
        << fmt(row.ci.low, "%.6g") << "," << fmt(row.ci.high, "%.6g") << ","
        << fmt(row.item_stderr, "%.6g") << "," << fmt(row.delta, "%.6g") << "," << row.test << ","
        << fmt(row.p_value, "%.6g") << "\n";
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
  nlohmann::json task_rows = nlohmann::json::array();
  for (const TaskMetricRow& row : table.task_rows)
    task_rows.push_back({{"task_metric", row.metric},
                         {"configuration", table.rows[row.group].label},
                         {"row", row.group},
                         {"n", row.n},
                         {"seeds", row.seeds},
                         {"mean", number_or_null(row.mean)},
                         {"std", number_or_null(row.std)},
                         {"ci", {number_or_null(row.ci.low), number_or_null(row.ci.high)}},
                         {"item_stderr", number_or_null(row.item_stderr)},
                         {"delta", number_or_null(row.delta)},
                         {"test", row.test},
                         {"p_value", number_or_null(row.p_value)}});
  return nlohmann::json{{"ci_level", table.ci_level}, {"rows", rows}, {"task_rows", task_rows}}
             .dump(2) +
         "\n";
}

}  // namespace patchbay::analysis
