// The sweep ledger: <sweep_dir>/ledger.json, one JSON document rewritten atomically (write,
// fsync, rename) under an flock on <sweep_dir>/ledger.lock, so several sweep processes (or
// slot threads) can update it and a crash never leaves it torn. It records every job the
// sweep has known: its overrides, state, attempts, the third-party plugins it uses and, once
// done, its last evaluation ("final": losses and [eval] tasks' metrics; job_results.hpp). Job claims
// are separate: an O_EXCL file <run_dir>/claim.lock holding the claiming process id; a claim whose
// process is gone is stale and taken over.
//
// States: pending -> running -> done | failed | interrupted. A "running" entry whose process
// is gone (the sweep was killed) counts as interrupted.
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sweep/sweep_jobs.hpp"

namespace patchbay::sweep {

class Ledger {
 public:
  explicit Ledger(std::filesystem::path sweep_dir);

  // Reads the ledger, lets `change` edit it, writes it back, all under the lock. The
  // document is {"jobs": {id: {...}}, ...}; an absent ledger starts as {"jobs": {}}.
  void update(const std::function<void(nlohmann::json&)>& change) const;
  nlohmann::json read() const;

  // Adds the jobs not yet recorded (state pending) and records the sweep file and time.
  // Throws Error(kInvalidArgument) when a job the ledger has as done is not among `jobs`:
  // the sweep file changed in a way that alters finished work.
  void reconcile(const std::vector<ResolvedJob>& jobs, const std::string& sweep_file) const;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path dir_;
  std::filesystem::path path_;
  std::filesystem::path lock_path_;
};

// Atomic claim of a job's run directory; see the header comment. Returns false when another
// live process holds it.
bool claim_job(const std::filesystem::path& run_dir);
void release_job(const std::filesystem::path& run_dir);

// The third-party plugin components every job in <sweep_dir>/ledger.json recorded (empty when
// there is no ledger yet), each once: what a rerun needs to find again.
std::vector<PluginUse> recorded_plugin_uses(const std::filesystem::path& sweep_dir);

// True when process `pid` exists.
bool process_alive(long pid);

}  // namespace patchbay::sweep
