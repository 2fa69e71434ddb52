// Resolving, freezing and validating every job of a sweep before any of them runs, and the
// job identity: a job's id is a hash of its resolved config (every default filled in) with
// its seed, so the same job gets the same id in every sweep and its run directory
// (<sweep_dir>/runs/<id>) can never be shared by two different jobs.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "config/config_document.hpp"
#include "sweep/sweep_spec.hpp"

namespace patchbay::sweep {

struct ResolvedJob {
  JobSpec spec;
  std::string id;  // 16 hex digits: fnv1a64 of the resolved config without run.name / train.out_dir
  std::string config_id;  // the same without the seed: jobs that differ only by seed share it
  std::filesystem::path run_dir;
  std::string frozen_toml;  // the resolved config the job trains, train.out_dir = run_dir
};

// Validates a loaded config in place the way `patchbay train` does (schema + components,
// defaults filled in); throws config::ConfigError.
using ConfigValidator = std::function<void(config::ResolvedConfig&)>;

// Loads the base config with each job's overrides, validates it, computes the ids. Every job
// is tried; if any fails, one ConfigError lists every failing job's problems (each issue's
// key path prefixed with "job N (label)").
std::vector<ResolvedJob> resolve_jobs(const SweepSpec& spec, const std::vector<JobSpec>& jobs,
                                      const ConfigValidator& validate,
                                      const std::filesystem::path& sweep_dir);

// Hash of a resolved config's TOML text with `drop_keys` ("run.name") removed, as 16 hex digits.
std::string config_hash(const config::ResolvedConfig& config,
                        const std::vector<std::string>& drop_keys);

// The sweep directory: --out when given, else <output_dir>/<name>.
std::filesystem::path sweep_directory(const SweepSpec& spec,
                                      const std::filesystem::path& out_override);

}  // namespace patchbay::sweep
