// `patchbay sweep SWEEP.toml [--dry-run] [--out DIR] [--jobs N] [--threads T] [--fail-fast]`:
// expands a sweep file (core/sweep/sweep_spec.hpp) into jobs, resolves and validates every
// job's config the way `patchbay train` does before anything runs, then runs the jobs that
// are not finished yet (core/sweep/runner.hpp) and lists the failures with their log tails.
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli/command.hpp"
#include "cli/component_lookup.hpp"
#include "runtime/plugin_search_path.hpp"
#include "runtime/registry.hpp"
#include "sweep/ledger.hpp"
#include "sweep/runner.hpp"
#include "sweep/sweep_jobs.hpp"
#include "sweep/sweep_spec.hpp"
#include "train/train_config.hpp"
#include "train/training_tasks.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

// The (kind, name) pairs a validated config uses: the selected `kind` of each component
// section, its `pattern` entries and the sampler chain. Validation also looks up the
// components of unused per-kind option tables (kept for a swap); those are not uses.
std::set<std::pair<std::string, std::string>> used_components(
    const config::ResolvedConfig& config) {
  std::set<std::pair<std::string, std::string>> used;
  auto add_string = [&](const std::string& kind, const toml::node* node) {
    if (node != nullptr && node->is_string()) used.insert({kind, node->as_string()->get()});
  };
  auto add_array = [&](const std::string& kind, const toml::node* node, const char* key) {
    if (node == nullptr || !node->is_array()) return;
    for (const toml::node& item : *node->as_array()) {
      if (key == nullptr)
        add_string(kind, &item);
      else if (const toml::table* table = item.as_table())
        add_string(kind, table->get(key));
    }
  };
  add_string("tokenizer", config.find("tokenizer.kind"));
  add_string("optimizer", config.find("optimizer.kind"));
  add_string("parallelism", config.find("parallelism.kind"));
  for (const char* section : {"attention", "feedforward"}) {
    add_string(section, config.find(std::string("model.") + section + ".kind"));
    add_array(section, config.find(std::string("model.") + section + ".pattern"), nullptr);
  }
  add_array("sampler", config.find("generate.chain"), "name");
  return used;
}

// The components the config uses whose plugin file lies outside the built-in plugin folders
// (found through --plugin-path, PATCHBAY_PLUGIN_PATH or run.plugin_paths), with absolute
// files, each once.
std::vector<sweep::PluginUse> third_party_plugin_uses(const std::vector<sweep::PluginUse>& uses,
                                                      const config::ResolvedConfig& config) {
  const std::set<std::pair<std::string, std::string>> used = used_components(config);
  std::vector<fs::path> builtin;
  runtime::SearchPathOptions defaults;
  defaults.use_environment = false;
  for (const fs::path& folder : runtime::plugin_search_path(defaults))
    builtin.push_back(fs::weakly_canonical(folder));
  std::vector<sweep::PluginUse> third_party;
  for (sweep::PluginUse use : uses) {
    if (used.count({use.kind, use.name}) == 0) continue;
    const fs::path file = fs::weakly_canonical(fs::absolute(use.file));
    bool is_builtin = false;
    for (const fs::path& folder : builtin) is_builtin = is_builtin || file.parent_path() == folder;
    if (is_builtin) continue;
    use.file = file.string();
    bool seen = false;
    for (const sweep::PluginUse& u : third_party)
      seen = seen || (u.kind == use.kind && u.name == use.name);
    if (!seen) third_party.push_back(std::move(use));
  }
  return third_party;
}

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
  // A rerun finds the third-party plugins the ledger recorded at their recorded files (and
  // refuses, naming the file, when one has moved), whatever --plugin-path says this time.
  RecordedPlugins recorded;
  for (const sweep::PluginUse& use : sweep::recorded_plugin_uses(sweep_dir))
    recorded.components.push_back({use.kind, use.name, use.file});
  std::optional<ComponentLookup> components;
  std::vector<sweep::PluginUse> looked_up;  // the current job's components from plugin files
  const sweep::ConfigValidator validate = [&](config::ResolvedConfig& config) {
    if (!components) {
      components = make_component_lookup(global, config, recorded);
      if (!components->registry) throw Error(ErrorKind::kInternal, components->unavailable_reason);
    }
    looked_up.clear();
    const config::ComponentSchemaLookup recording = [&](pb_component_kind kind,
                                                        std::string_view name) {
      config::ComponentLookupResult found = components->lookup(kind, name);
      if (found.schema)
        looked_up.push_back({runtime::kind_name(kind), std::string(name), found.schema->origin});
      return found;
    };
    train::validate_training_config(config, recording);
    (void)train::train_options_from_config(config);  // rules the schema cannot state
    train::check_training_tasks(config);  // [eval] tasks: a bad name stops the sweep here
  };
  const sweep::PluginUseFinder third_party = [&](const config::ResolvedConfig& config) {
    return third_party_plugin_uses(looked_up, config);
  };
  const std::vector<sweep::ResolvedJob> resolved =
      sweep::resolve_jobs(spec, jobs, validate, sweep_dir, third_party);
  std::cout << "sweep " << spec.name << ": " << resolved.size() << " jobs, base "
            << spec.base_config.string() << ", directory " << sweep_dir.string() << "\n";
  if (dry_run) {
    for (const sweep::ResolvedJob& job : resolved) {
      std::cout << "  #" << job.spec.index << "  " << job.id << "  ";
      for (size_t i = 0; i < job.spec.all_overrides.size(); ++i)
        std::cout << (i ? " " : "") << "--set " << job.spec.all_overrides[i];
      for (const sweep::PluginUse& use : job.plugins)
        std::cout << "  [" << use.kind << " '" << use.name << "' from " << use.file << "]";
      std::cout << "\n";
    }
    std::cout << "(dry run: every job's config is valid; nothing was run)\n";
    return kExitOk;
  }
  sweep::RunnerOptions runner;
  runner.executable = fs::read_symlink("/proc/self/exe");
  // No --plugin-path for the jobs: each job.toml names its third-party plugin files
  // (run.plugin_paths) and a resumed job reloads what its checkpoint recorded.
  runner.global_args = {"--log-level=" + global.log_level};
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
