// Reading runs and grouping them; see run_results.hpp.
#include "analysis/run_results.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "common/parse_number.hpp"
#include "data/split.hpp"
#include "run/metrics_log.hpp"
#include "sweep/toml_value_text.hpp"

namespace patchbay::analysis {
namespace fs = std::filesystem;
namespace {

void flatten(const toml::table& table, const std::string& prefix,
             std::map<std::string, std::string>& out) {
  for (const auto& [key, node] : table) {
    const std::string path =
        prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const toml::table* sub = node.as_table())
      flatten(*sub, path, out);
    else
      out[path] = sweep::toml_value_text(node);
  }
}

double number(const nlohmann::json& record, const char* key) {
  const auto it = record.find(key);
  return it != record.end() && it->is_number() ? it->get<double>() : kMissing;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "task.<task>.<metric>" fields of an evaluation record (and their "_stderr"); a record that
// has any replaces what earlier ones gave (a later evaluation, or a resumed run's repeat).
void read_task_metrics(const nlohmann::json& record, RunResult& run) {
  bool replaced = false;
  for (const auto& [key, value] : record.items()) {
    if (key.rfind("task.", 0) != 0 || !value.is_number() || ends_with(key, ".items")) continue;
    if (!replaced) {
      run.task_metrics.clear();
      run.task_stderr.clear();
      replaced = true;
    }
    const std::string name = key.substr(5);
    if (ends_with(name, "_stderr"))
      run.task_stderr[name.substr(0, name.size() - 7)] = value.get<double>();
    else
      run.task_metrics[name] = value.get<double>();
  }
}

std::string value_of(const RunGroup& group, const std::string& key) {
  const auto found = group.runs.front().flat.find(key);
  return found == group.runs.front().flat.end() ? "<unset>" : found->second;
}

// Keys whose value is not the same in every group (a missing key counts as a value).
std::vector<std::string> differing_keys(const std::vector<RunGroup>& groups) {
  std::set<std::string> keys;
  for (const RunGroup& g : groups)
    for (const auto& [k, v] : g.runs.front().flat) keys.insert(k);
  std::vector<std::string> differing;
  for (const std::string& key : keys) {
    std::set<std::string> seen;
    for (const RunGroup& g : groups) seen.insert(value_of(g, key));
    if (seen.size() > 1) differing.push_back(key);
  }
  return differing;
}

// True when `key` is P.<name>.rest for a differing P.kind and takes one value among the groups
// whose P.kind is <name>: a consequence of the kind, not an axis of its own.
bool implied_by_kind(const std::vector<RunGroup>& groups, const std::set<std::string>& differing,
                     const std::string& key) {
  for (size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.', dot + 1)) {
    const std::string prefix = key.substr(0, dot);
    if (differing.count(prefix + ".kind") == 0) continue;
    const size_t name_end = key.find('.', dot + 1);
    if (name_end == std::string::npos) continue;
    const std::string name = key.substr(dot + 1, name_end - dot - 1);
    std::set<std::string> values;
    for (const RunGroup& g : groups)
      if (value_of(g, prefix + ".kind") == "\"" + name + "\"") values.insert(value_of(g, key));
    if (values.size() <= 1) return true;
  }
  return false;
}

// The differing keys a short label shows (see RunGroup::label).
std::vector<std::string> label_keys(const std::vector<RunGroup>& groups,
                                    const std::vector<std::string>& differing) {
  const std::set<std::string> all(differing.begin(), differing.end());
  std::vector<std::string> shown;
  for (const std::string& key : differing)
    if (key != "run.plugin_paths" && !implied_by_kind(groups, all, key)) shown.push_back(key);
  // The plugin files alone tell two configurations apart: keep them.
  if (shown.empty() && all.count("run.plugin_paths") != 0) shown.push_back("run.plugin_paths");
  return shown;
}

// True when `key` lies in the options table of another kind than the group's: P.<name>.rest
// with P.kind differing between groups and this group's P.kind not <name>.
bool other_kinds_key(const RunGroup& group, const std::set<std::string>& differing,
                     const std::string& key) {
  for (size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.', dot + 1)) {
    const std::string prefix = key.substr(0, dot);
    const size_t name_end = key.find('.', dot + 1);
    if (differing.count(prefix + ".kind") == 0 || name_end == std::string::npos) continue;
    return value_of(group, prefix + ".kind") !=
           "\"" + key.substr(dot + 1, name_end - dot - 1) + "\"";
  }
  return false;
}

// "key=value, ..." for `keys`; with `differing`, keys of other kinds' tables are left out.
std::string join_label(const RunGroup& group, const std::vector<std::string>& keys,
                       const std::set<std::string>* differing = nullptr) {
  std::string label;
  for (const std::string& key : keys) {
    if (differing != nullptr && other_kinds_key(group, *differing, key)) continue;
    label += (label.empty() ? "" : ", ") + key + "=" + value_of(group, key);
  }
  return label;
}

}  // namespace

RunResult read_run(const fs::path& dir, const std::string& seed_key) {
  const fs::path config_file = dir / "config.toml";
  if (!fs::exists(config_file))
    throw Error(ErrorKind::kNotFound,
                "'" + dir.string() +
                    "' is not a run directory (no config.toml); give run "
                    "directories written by patchbay train or a sweep directory");
  RunResult run;
  run.dir = dir;
  const toml::table table = toml::parse_file(config_file.string());
  flatten(table, "", run.flat);
  if (const auto it = run.flat.find(seed_key); it != run.flat.end()) {
    const std::optional<int64_t> seed = parse_int64(it->second);
    if (!seed)
      throw Error(ErrorKind::kInvalidArgument, "'" + config_file.string() + "': " + seed_key +
                                                   " is '" + it->second +
                                                   "', expected an integer seed");
    run.seed = *seed;
  }
  for (const char* key : {"run.name", "train.out_dir"}) run.flat.erase(key);
  run.flat.erase(seed_key);
  std::string canonical;
  for (const auto& [k, v] : run.flat) canonical += k + "=" + v + "\n";
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(data::fnv1a64(canonical)));
  run.config_id = hex;

  if (fs::exists(dir / "metrics.jsonl")) {
    std::vector<double> speeds;
    bool first_speed = true;
    for (const nlohmann::json& record : run::read_metrics(dir / "metrics.jsonl")) {
      const double step = number(record, "step");
      if (record.contains("val_loss")) {
        const double loss = number(record, "val_loss");
        run.final_val_loss = loss;
        run.final_val_bpb = number(record, "val_bpb");
        // A resumed run repeats evaluations; keep the latest value for each step.
        auto& curve = run.val_curve;
        curve.erase(
            std::remove_if(curve.begin(), curve.end(),
                           [&](const auto& p) { return p.first >= static_cast<int64_t>(step); }),
            curve.end());
        curve.emplace_back(static_cast<int64_t>(step), loss);
      }
      read_task_metrics(record, run);
      if (record.contains("tokens_per_second")) {
        if (!first_speed) speeds.push_back(number(record, "tokens_per_second"));
        first_speed = false;
        run.tokens = number(record, "tokens");
      }
    }
    if (!speeds.empty()) {
      double sum = 0;
      for (double s : speeds) sum += s;
      run.tokens_per_second = sum / static_cast<double>(speeds.size());
    }
  }
  if (std::ifstream in(dir / "model_size.json"); in) {
    const nlohmann::json size = nlohmann::json::parse(in, nullptr, false);
    if (size.is_object()) {
      run.parameters = number(size, "parameters");
      run.flops_per_token = number(size, "flops_per_token");
    }
  }
  return run;
}

std::vector<RunResult> collect_runs(const std::vector<fs::path>& paths,
                                    std::vector<std::string>* skipped) {
  std::vector<RunResult> runs;
  for (const fs::path& path : paths) {
    if (fs::exists(path / "ledger.json")) {
      std::ifstream in(path / "ledger.json");
      const nlohmann::json ledger = nlohmann::json::parse(in, nullptr, false);
      if (!ledger.is_object() || !ledger.contains("jobs") || !ledger["jobs"].is_object())
        throw Error(ErrorKind::kInvalidArgument,
                    "'" + (path / "ledger.json").string() +
                        "' is not a sweep ledger (JSON with a \"jobs\" object, as patchbay sweep "
                        "writes it); give run directories or an intact sweep directory");
      std::vector<std::pair<int64_t, std::string>> order;
      for (const auto& [id, entry] : ledger["jobs"].items()) {
        if (!entry.is_object())
          throw Error(ErrorKind::kInvalidArgument, "'" + (path / "ledger.json").string() +
                                                       "': job '" + id + "' is not an object");
        if (entry.value("state", "") != "done") {
          if (skipped != nullptr)
            skipped->push_back(id + " (" + entry.value("label", "?") +
                               "): " + entry.value("state", "?"));
          continue;
        }
        order.emplace_back(entry.value("index", int64_t{0}), id);
      }
      std::sort(order.begin(), order.end());
      for (const auto& [index, id] : order) runs.push_back(read_run(path / "runs" / id));
    } else {
      runs.push_back(read_run(path));
    }
  }
  return runs;
}

std::vector<RunGroup> group_runs(const std::vector<RunResult>& runs) {
  std::vector<RunGroup> groups;
  for (const RunResult& run : runs) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const RunGroup& g) { return g.config_id == run.config_id; });
    if (it == groups.end()) {
      RunGroup group;
      group.config_id = run.config_id;
      groups.push_back(std::move(group));
      it = groups.end() - 1;
    }
    it->runs.push_back(run);
  }
  const std::vector<std::string> differing = differing_keys(groups);
  const std::vector<std::string> shown = label_keys(groups, differing);
  const std::set<std::string> differing_set(differing.begin(), differing.end());
  for (RunGroup& g : groups) {
    g.full_label = join_label(g, differing);
    g.label = join_label(g, shown, &differing_set);
    if (g.label.empty()) g.label = groups.size() == 1 ? "all runs" : g.config_id;
    if (g.full_label.empty()) g.full_label = g.label;
  }
  return groups;
}

}  // namespace patchbay::analysis
