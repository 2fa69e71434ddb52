// `patchbay sweep SWEEP.toml [--dry-run] [--out DIR] [--jobs N] [--threads T] [--fail-fast]`:
// expands a sweep file (core/sweep/sweep_spec.hpp) into jobs, resolves and validates every
// job's config the way `patchbay train` does before anything runs, then runs the jobs that
// are not finished yet (core/sweep/runner.hpp) and lists the failures with their log tails.
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.hpp"
#include "cli/component_lookup.hpp"
#include "sweep/runner.hpp"
#include "sweep/sweep_jobs.hpp"
#include "sweep/sweep_spec.hpp"
#include "train/train_config.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

int run_sweep_command(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string sweep_file, out_dir;
  bool dry_run = false, fail_fast = false, no_progress = false;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int slots = 1, threads = 0;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("sweep", po::value(&sweep_file),
                                               "the sweep's TOML file")(
      "dry-run", po::bool_switch(&dry_run),
      "resolve and validate every job, list them, run nothing")(
      "out", po::value(&out_dir),
      "sweep directory (default <output_dir>/<name> from the sweep file)")(
      "jobs,j", po::value(&slots), "jobs run at once (slots)")(
      "threads", po::value(&threads), "threads per job (OMP_NUM_THREADS); default cores / jobs")(
      "fail-fast", po::bool_switch(&fail_fast), "stop the sweep at the first failing job")(
      "no-progress", po::bool_switch(&no_progress), "no progress lines");
  po::positional_options_description positional;
  positional.add("sweep", 1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), values);
  if (values.count("help") != 0) {
    std::cout
        << "Usage: patchbay sweep SWEEP.toml [--dry-run] [--out DIR] [--jobs N] [--threads T] "
           "[--fail-fast]\n\n"
           "Runs every job of a sweep (a base config and its axes: [grid], [zip], [ofat], seeds;\n"
           "see configs/sweeps/). Every job is resolved and validated before any runs. Each job\n"
           "trains in <sweep_dir>/runs/<job id>, the id being a hash of its resolved config and\n"
           "seed; <sweep_dir>/ledger.json records each job's state. Run the same command again to\n"
           "continue: finished jobs are skipped, failed or interrupted ones run again (from their\n"
           "last checkpoint). jobs x threads must not exceed the cores. Then: patchbay compare "
           "DIR.\n\n"
        << options;
    return kExitOk;
  }
  po::notify(values);
  if (sweep_file.empty()) {
    std::cerr << "patchbay sweep: give a SWEEP.toml file; see patchbay sweep --help\n";
    return kExitUsage;
  }
  if (threads == 0) threads = std::max(1, cores / std::max(1, slots));

  const sweep::SweepSpec spec = sweep::load_sweep_spec(sweep_file);
  const std::vector<sweep::JobSpec> jobs = sweep::expand_jobs(spec);
  const fs::path sweep_dir = sweep::sweep_directory(spec, out_dir);
  std::optional<ComponentLookup> components;
  const sweep::ConfigValidator validate = [&](config::ResolvedConfig& config) {
    if (!components) {
      components = make_component_lookup(global, config);
      if (!components->registry) throw Error(ErrorKind::kInternal, components->unavailable_reason);
    }
    train::validate_training_config(config, components->lookup);
    (void)train::train_options_from_config(config);  // rules the schema cannot state
  };
  const std::vector<sweep::ResolvedJob> resolved =
      sweep::resolve_jobs(spec, jobs, validate, sweep_dir);
  std::cout << "sweep " << spec.name << ": " << resolved.size() << " jobs, base "
            << spec.base_config.string() << ", directory " << sweep_dir.string() << "\n";
  if (dry_run) {
    for (const sweep::ResolvedJob& job : resolved) {
      std::cout << "  #" << job.spec.index << "  " << job.id << "  ";
      for (size_t i = 0; i < job.spec.all_overrides.size(); ++i)
        std::cout << (i ? " " : "") << "--set " << job.spec.all_overrides[i];
      std::cout << "\n";
    }
    std::cout << "(dry run: every job's config is valid; nothing was run)\n";
    return kExitOk;
  }
  sweep::RunnerOptions runner;
  runner.executable = fs::read_symlink("/proc/self/exe");
  runner.global_args = {"--log-level=" + global.log_level};
  for (const std::string& p : global.plugin_paths)
    runner.global_args.push_back("--plugin-path=" + p);
  runner.slots = slots;
  runner.threads_per_job = threads;
  runner.fail_fast = fail_fast;
  runner.progress = !no_progress;
  std::cout << "running with " << slots << " slot(s) x " << threads << " thread(s) on " << cores
            << " cores\n";
  const sweep::SweepReport report = sweep::run_sweep(resolved, sweep_dir, sweep_file, runner);
  std::cout << "sweep " << spec.name << ": " << report.done << " finished now, " << report.skipped
            << " already done, " << report.failed << " failed, " << report.not_run
            << " not run (of " << report.total << ")\n";
  for (const sweep::JobFailure& failure : report.failures) {
    std::cout << "\nFAILED job " << failure.id << " (" << failure.label << "), exit code "
              << failure.exit_code << "; last lines of "
              << (sweep_dir / "runs" / failure.id / "sweep_job.log").string() << ":\n"
              << failure.log_tail;
  }
  if (report.failed > 0 || report.not_run > 0)
    std::cout << "\nRun the same command again to rerun the failed and unfinished jobs.\n";
  else
    std::cout << "compare the results: patchbay compare " << sweep_dir.string() << "\n";
  if (report.failed > 0) return kExitFailure;
  return report.stopped ? kExitFailure : kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"sweep",
                           "Run a sweep of training jobs (grid, zip, one-factor-at-a-time, seeds)",
                           run_sweep_command});

}  // namespace patchbay::cli
