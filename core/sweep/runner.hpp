// Running a sweep's jobs: parallel slots, each job a child process `patchbay train
// <run_dir>/job.toml` with OMP_NUM_THREADS = threads per job (slots x threads <= cores),
// claimed atomically and recorded in the ledger. Finished jobs are skipped; failed and
// interrupted ones run again, continuing from their last checkpoint (`train --resume`) when
// they have one. A failing job does not stop the sweep unless fail_fast. SIGINT/SIGTERM
// stop the sweep: running jobs get SIGTERM and are recorded as interrupted; a child also
// dies with the sweep process (PR_SET_PDEATHSIG), so a killed sweep leaves no orphans.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "sweep/ledger.hpp"
#include "sweep/sweep_jobs.hpp"

namespace patchbay::sweep {

struct RunnerOptions {
  std::filesystem::path executable;      // the patchbay binary
  std::vector<std::string> global_args;  // before "train": --plugin-path DIR, --log-level L
  int slots = 1;
  int threads_per_job = 1;
  bool fail_fast = false;
  bool progress = true;  // a progress line on stderr after every change
  int log_tail_lines = 15;
};

struct JobFailure {
  std::string id;
  std::string label;
  int exit_code = 0;     // the child's exit status, or 128 + signal
  std::string log_tail;  // last lines of <run_dir>/sweep_job.log
};

struct SweepReport {
  int total = 0;
  int skipped = 0;  // already done before this run
  int done = 0;     // finished in this run
  int failed = 0;
  int not_run = 0;       // claimed elsewhere, or left after fail-fast / a stop signal
  bool stopped = false;  // fail-fast or a signal stopped the sweep
  std::vector<JobFailure> failures;
};

// Writes each job's job.toml, reconciles the ledger (refusing changed finished jobs), runs
// what is left. Throws Error(kInvalidArgument) when slots x threads exceeds the cores.
SweepReport run_sweep(const std::vector<ResolvedJob>& jobs, const std::filesystem::path& sweep_dir,
                      const std::string& sweep_file, const RunnerOptions& options);

// The last `lines` lines of a text file ("" when it cannot be read).
std::string file_tail(const std::filesystem::path& path, int lines);

}  // namespace patchbay::sweep
