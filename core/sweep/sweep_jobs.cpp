// Resolving and identifying sweep jobs; see sweep_jobs.hpp.
#include "sweep/sweep_jobs.hpp"

#include <cstdio>

#include "config/config_error.hpp"
#include "config/config_loader.hpp"
#include "config/config_printer.hpp"
#include "data/split.hpp"
#include "sweep/toml_value_text.hpp"

namespace patchbay::sweep {
namespace {

// Removes a dotted key path (bare keys only) from a table; missing keys are ignored.
void erase_key(toml::table& table, const std::string& path) {
  toml::table* current = &table;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string key =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (dot == std::string::npos) {
      current->erase(key);
      return;
    }
    toml::table* next = current->get_as<toml::table>(key);
    if (next == nullptr) return;
    current = next;
    start = dot + 1;
  }
}

std::string hex16(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

std::string config_hash(const config::ResolvedConfig& config,
                        const std::vector<std::string>& drop_keys) {
  config::ResolvedConfig copy = config;
  for (const std::string& key : drop_keys) erase_key(copy.table(), key);
  return hex16(data::fnv1a64(config::to_toml(copy)));
}

std::filesystem::path sweep_directory(const SweepSpec& spec,
                                      const std::filesystem::path& out_override) {
  return out_override.empty() ? spec.output_dir / spec.name : out_override;
}

std::vector<ResolvedJob> resolve_jobs(const SweepSpec& spec, const std::vector<JobSpec>& jobs,
                                      const ConfigValidator& validate,
                                      const std::filesystem::path& sweep_dir,
                                      const PluginUseFinder& find_plugins) {
  std::vector<ResolvedJob> resolved;
  std::vector<config::ConfigIssue> issues;
  for (const JobSpec& job : jobs) {
    try {
      config::ResolvedConfig config = config::load_config(spec.base_config, job.all_overrides);
      validate(config);
      ResolvedJob r;
      r.spec = job;
      if (find_plugins) {
        r.plugins = find_plugins(config);
        toml::array files;
        for (const PluginUse& use : r.plugins) {
          bool listed = false;
          for (const toml::node& f : files) listed = listed || f.value<std::string>() == use.file;
          if (!listed) files.push_back(use.file);
        }
        config::apply_set_override(config, "run.plugin_paths=" + toml_value_text(files));
      }
      r.id = config_hash(config, {"run.name", "train.out_dir"});
      r.config_id = config_hash(config, {"run.name", "train.out_dir", spec.seed_key});
      r.run_dir = sweep_dir / "runs" / r.id;
      config::apply_set_override(config, "train.out_dir=\"" + r.run_dir.string() + "\"");
      config::apply_set_override(config, "run.name=\"" + r.id + "\"");
      r.frozen_toml = config::to_toml(config);
      resolved.push_back(std::move(r));
    } catch (const config::ConfigError& e) {
      for (config::ConfigIssue issue : e.issues()) {
        issue.key_path = "job " + std::to_string(job.index) + " (" + job.label() + ")" +
                         (issue.key_path.empty() ? "" : ": " + issue.key_path);
        issues.push_back(std::move(issue));
      }
    }
  }
  if (!issues.empty()) throw config::ConfigError(std::move(issues));
  return resolved;
}

}  // namespace patchbay::sweep
