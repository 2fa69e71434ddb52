// Resolving, freezing and validating every job of a sweep before any of them runs, and the
// job identity: a job's id is a hash of its resolved config (every default filled in) with
// its seed, so the same job gets the same id in every sweep and its run directory
// (<sweep_dir>/runs/<id>) can never be shared by two different jobs. A job that uses a
// third-party plugin (one found through --plugin-path, PATCHBAY_PLUGIN_PATH or
// run.plugin_paths rather than the built-in folders) carries that plugin's absolute file in its
// run.plugin_paths, which is then part of its id; a job that uses built-in plugins only has
// run.plugin_paths = [] and keeps the id it has in a sweep run without any plugin path.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "config/config_document.hpp"
#include "sweep/sweep_spec.hpp"

namespace patchbay::sweep {

// A component a job takes from a third-party plugin file.
struct PluginUse {
  std::string kind;  // "attention"
  std::string name;  // "mqa"
  std::string file;  // absolute path of the plugin file
};

struct ResolvedJob {
  JobSpec spec;
  std::vector<PluginUse>
      plugins;     // third-party components the job uses; their files are its run.plugin_paths
  std::string id;  // 16 hex digits: fnv1a64 of the resolved config without run.name / train.out_dir
  std::string config_id;  // the same without the seed: jobs that differ only by seed share it
  std::filesystem::path run_dir;
  std::string frozen_toml;  // the resolved config the job trains, train.out_dir = run_dir
};

// Validates a loaded config in place the way `patchbay train` does (schema + components,
// defaults filled in); throws config::ConfigError.
using ConfigValidator = std::function<void(config::ResolvedConfig&)>;
// Called right after the validator on the same config: the third-party components the job
// uses (the validator's component look-ups tell which).
using PluginUseFinder = std::function<std::vector<PluginUse>(const config::ResolvedConfig&)>;

// Loads the base config with each job's overrides, validates it, computes the ids. Every job
// is tried; if any fails, one ConfigError lists every failing job's problems (each issue's
// key path prefixed with "job N (label)"). With `find_plugins`, each job's run.plugin_paths is
// replaced by the files of the third-party plugins it uses (before the id is computed), so
// its job.toml names every plugin it needs by absolute path.
std::vector<ResolvedJob> resolve_jobs(const SweepSpec& spec, const std::vector<JobSpec>& jobs,
                                      const ConfigValidator& validate,
                                      const std::filesystem::path& sweep_dir,
                                      const PluginUseFinder& find_plugins = {});

// Hash of a resolved config's TOML text with `drop_keys` ("run.name") removed, as 16 hex digits.
std::string config_hash(const config::ResolvedConfig& config,
                        const std::vector<std::string>& drop_keys);

// The sweep directory: --out when given, else <output_dir>/<name>.
std::filesystem::path sweep_directory(const SweepSpec& spec,
                                      const std::filesystem::path& out_override);

}  // namespace patchbay::sweep
