// Sweeps run end to end through the `patchbay` executable on a tiny generated corpus:
// validation of every job before launch (a typo in one job fails the sweep, nothing runs),
// job ids stable across runs and different for different configs, resume after the sweep is
// killed mid-job (the job continues from its checkpoint), a changed sweep file refused, and
// the failure policy (continue by default with the failure listed; --fail-fast stops), and
// [eval] tasks recorded per job in the ledger and tabulated by compare.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "../train/train_fixture.hpp"
#include "config/config_error.hpp"
#include "sweep/sweep_jobs.hpp"
#include "sweep/sweep_spec.hpp"

namespace fs = std::filesystem;
using namespace patchbay;

namespace {

struct Folder {  // the folder is removed with `dir`, also when a check fails
  patchbay::testing::TempDir dir = train::testing::fresh_folder("sweep");
  fs::path path = dir.path();
};

// Writes base.toml (the tiny training config) and returns the folder.
void write_base(const fs::path& folder, int max_steps = 6, int checkpoint_every = 3) {
  train::testing::write_tiny_corpus(folder);
  std::ofstream(folder / "base.toml") << train::testing::tiny_config_text(folder) << "\n";
  std::ofstream(folder / "steps.txt") << max_steps << " " << checkpoint_every;
}

struct Result {
  int code = 0;
  std::string output;
};

Result patchbay_cli(const std::string& arguments) {
  const fs::path log =
      fs::temp_directory_path() / ("patchbay_sweep_cli_" + std::to_string(::getpid()) + ".log");
  const std::string command =
      std::string(PATCHBAY_EXECUTABLE) + " " + arguments + " > " + log.string() + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  fs::remove(log);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, text.str()};
}

nlohmann::json ledger(const fs::path& sweep_dir) {
  std::ifstream in(sweep_dir / "ledger.json");
  return nlohmann::json::parse(in);
}

int count_state(const nlohmann::json& l, const std::string& state) {
  int n = 0;
  for (const auto& [id, e] : l["jobs"].items()) n += e["state"] == state ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("every job is validated before launch; ids are stable and differ between configs") {
  Folder folder;
  write_base(folder.path);
  train::testing::TinySetup setup;
  const sweep::ConfigValidator validate = [&](config::ResolvedConfig& c) {
    train::validate_training_config(c, setup.lookup);
  };
  const fs::path base = folder.path / "base.toml";
  const sweep::SweepSpec good = sweep::parse_sweep_spec(
      "base = \"" + base.string() + "\"\nseeds = [0, 1]\n[grid]\n\"train.lr\" = [0.01, 0.02]\n",
      "s.toml", "/");
  const auto jobs =
      sweep::resolve_jobs(good, sweep::expand_jobs(good), validate, folder.path / "sw");
  REQUIRE(jobs.size() == 4);
  std::set<std::string> ids;
  for (const auto& job : jobs) ids.insert(job.id);
  CHECK(ids.size() == 4);
  CHECK(jobs[0].config_id == jobs[1].config_id);  // same config, other seed
  CHECK(jobs[0].config_id != jobs[2].config_id);
  CHECK(jobs[0].run_dir == folder.path / "sw" / "runs" / jobs[0].id);
  CHECK(jobs[0].frozen_toml.find(jobs[0].run_dir.string()) != std::string::npos);
  // Same sweep again (and the same config reached through another file): same ids.
  const auto again =
      sweep::resolve_jobs(good, sweep::expand_jobs(good), validate, folder.path / "other");
  CHECK(again[3].id == jobs[3].id);
  // Jobs that use no third-party plugin keep their ids when plugin files are resolved; a job
  // that uses one carries its file in run.plugin_paths and in its id.
  const auto no_plugins = sweep::resolve_jobs(
      good, sweep::expand_jobs(good), validate, folder.path / "sw",
      [](const config::ResolvedConfig&) { return std::vector<sweep::PluginUse>{}; });
  CHECK(no_plugins[2].id == jobs[2].id);
  const auto with_plugin = sweep::resolve_jobs(
      good, sweep::expand_jobs(good), validate, folder.path / "sw",
      [](const config::ResolvedConfig&) {
        return std::vector<sweep::PluginUse>{{"attention", "mine", "/opt/mine/mine.so"}};
      });
  CHECK(with_plugin[2].id != jobs[2].id);
  REQUIRE(with_plugin[2].plugins.size() == 1);
  CHECK(with_plugin[2].frozen_toml.find("/opt/mine/mine.so") != std::string::npos);

  // A typo in the third value only: the whole sweep fails before anything runs, naming the job.
  const sweep::SweepSpec typo = sweep::parse_sweep_spec(
      "base = \"" + base.string() +
          "\"\n[grid]\n\"model.positional\" = [\"learned\", \"rotary\", \"rotray\"]\n",
      "s.toml", "/");
  CHECK_THROWS_WITH_AS(
      sweep::resolve_jobs(typo, sweep::expand_jobs(typo), validate, folder.path / "t"),
      doctest::Contains("job 2 (model.positional=\"rotray\")"), config::ConfigError);
  CHECK_FALSE(fs::exists(folder.path / "t"));

  // Through the CLI: --dry-run lists every job, a typo exits with the config code (3).
  std::ofstream(folder.path / "typo.toml")
      << "base = \"base.toml\"\n[grid]\n\"train.lrr\" = [0.1]\n";
  const Result bad = patchbay_cli("sweep " + (folder.path / "typo.toml").string() + " --out " +
                                  (folder.path / "t").string());
  CHECK(bad.code == 3);
  CHECK(bad.output.find("train.lrr") != std::string::npos);
  std::ofstream(folder.path / "ok.toml")
      << "base = \"base.toml\"\nseeds = [0, 1]\n[ofat]\n\"train.lr\" = [0.01, 0.02]\n";
  const Result dry = patchbay_cli("sweep " + (folder.path / "ok.toml").string() +
                                  " --dry-run --out " + (folder.path / "d").string());
  CHECK(dry.code == 0);
  CHECK(dry.output.find("--set train.lr=0.02 --set run.seed=1") != std::string::npos);
  CHECK_FALSE(fs::exists(folder.path / "d" / "ledger.json"));
}

TEST_CASE(
    "a sweep killed mid-job resumes from the checkpoint; finished jobs are skipped; a changed file "
    "is refused") {
  Folder folder;
  write_base(folder.path);
  const fs::path sweep_file = folder.path / "resume.toml";
  std::ofstream(sweep_file)
      << "base = \"base.toml\"\nset = [\"train.max_steps=400\", \"train.checkpoint_every=5\", "
         "\"train.eval_every=200\", \"train.log_every=50\"]\nseeds = [0, 1]\n";
  const fs::path sweep_dir = folder.path / "sw";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::string out = sweep_dir.string();
    ::execl(PATCHBAY_EXECUTABLE, PATCHBAY_EXECUTABLE, "sweep", sweep_file.c_str(), "--out",
            out.c_str(), "--jobs", "1", "--threads", "1", "--no-progress",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Wait for a checkpoint of the first job, then kill the sweep (its child dies with it).
  bool checkpointed = false;
  for (int i = 0; i < 3000 && !checkpointed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (fs::exists(sweep_dir / "runs"))
      for (const auto& run : fs::directory_iterator(sweep_dir / "runs"))
        checkpointed = checkpointed || fs::exists(run.path() / "checkpoints" / "latest");
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(checkpointed);
  const nlohmann::json before = ledger(sweep_dir);
  CHECK(count_state(before, "done") < 2);

  const Result resumed = patchbay_cli("sweep " + sweep_file.string() + " --out " +
                                      sweep_dir.string() + " --jobs 1 --threads 1");
  INFO(resumed.output);
  CHECK(resumed.code == 0);
  const nlohmann::json after = ledger(sweep_dir);
  CHECK(count_state(after, "done") == 2);
  bool saw_resume = false;
  for (const auto& [id, e] : after["jobs"].items()) {
    std::ifstream log(sweep_dir / "runs" / id / "sweep_job.log");
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    saw_resume = saw_resume || text.find("resuming job") != std::string::npos;
  }
  CHECK(saw_resume);

  // Rerun: everything skipped.
  const Result skip = patchbay_cli("sweep " + sweep_file.string() + " --out " + sweep_dir.string());
  CHECK(skip.code == 0);
  CHECK(skip.output.find("0 finished now, 2 already done") != std::string::npos);
  // Adding a seed is allowed (dry run only); changing what finished jobs are is refused.
  std::ofstream(sweep_file)
      << "base = \"base.toml\"\nset = [\"train.max_steps=300\", \"train.checkpoint_every=5\", "
         "\"train.eval_every=200\", \"train.log_every=50\"]\nseeds = [0, 1]\n";
  const Result changed =
      patchbay_cli("sweep " + sweep_file.string() + " --out " + sweep_dir.string());
  CHECK(changed.code != 0);
  CHECK(changed.output.find("changed in a way that alters finished jobs") != std::string::npos);
}

TEST_CASE("an axis that swaps a component: each kind takes its own options table") {
  Folder folder;
  write_base(folder.path);
  std::ofstream(folder.path / "base.toml", std::ios::app)
      << "[optimizer.adamw]\nbeta2 = 0.95\n[optimizer.sgd]\nmomentum = 0.9\n";
  train::testing::TinySetup setup;
  const sweep::ConfigValidator validate = [&](config::ResolvedConfig& c) {
    train::validate_training_config(c, setup.lookup);
  };
  const std::string base = "base = \"" + (folder.path / "base.toml").string() + "\"\n";
  const sweep::SweepSpec spec = sweep::parse_sweep_spec(
      base + "[grid]\n\"optimizer.kind\" = [\"adamw\", \"sgd\"]\n", "swap.toml", "/");
  const auto jobs =
      sweep::resolve_jobs(spec, sweep::expand_jobs(spec), validate, folder.path / "sw");
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0].id != jobs[1].id);
  CHECK(jobs[0].frozen_toml.find("kind = \"adamw\"") != std::string::npos);
  CHECK(jobs[1].frozen_toml.find("kind = \"sgd\"") != std::string::npos);
  // A key the chosen kind does not have is still refused before launch.
  const sweep::SweepSpec bad = sweep::parse_sweep_spec(
      base + "set = [\"optimizer.kind=sgd\"]\n[grid]\n\"optimizer.sgd.betta\" = [0.5]\n",
      "swap.toml", "/");
  CHECK_THROWS_WITH_AS(
      sweep::resolve_jobs(bad, sweep::expand_jobs(bad), validate, folder.path / "b"),
      doctest::Contains("betta"), config::ConfigError);
}

TEST_CASE("failure policy: a failing job does not stop the sweep; --fail-fast does") {
  Folder folder;
  write_base(folder.path);
  // Jobs with train.seq_len 48 pass validation but fail when they run (longer than the
  // model's context of 32).
  const fs::path sweep_file = folder.path / "fail.toml";
  std::ofstream(sweep_file) << "base = \"base.toml\"\n[grid]\n\"train.seq_len\" = [16, "
                               "48]\n\"train.lr\" = [0.01, 0.02]\n";
  const Result all =
      patchbay_cli("sweep " + sweep_file.string() + " --out " + (folder.path / "a").string() +
                   " --jobs 1 --threads 1 --no-progress");
  CHECK(all.code == 1);
  const nlohmann::json l = ledger(folder.path / "a");
  CHECK(count_state(l, "done") == 2);
  CHECK(count_state(l, "failed") == 2);
  CHECK(all.output.find("FAILED job") != std::string::npos);
  CHECK(all.output.find("exceeds model.context_length") !=
        std::string::npos);  // the log tail names the cause

  std::ofstream(sweep_file) << "base = \"base.toml\"\n[grid]\n\"train.seq_len\" = [48, 16]\n";
  const Result fast =
      patchbay_cli("sweep " + sweep_file.string() + " --out " + (folder.path / "f").string() +
                   " --jobs 1 --threads 1 --fail-fast --no-progress");
  CHECK(fast.code == 1);
  const nlohmann::json lf = ledger(folder.path / "f");
  CHECK(count_state(lf, "failed") == 1);
  CHECK(count_state(lf, "done") == 0);
  CHECK(count_state(lf, "pending") == 1);
}

TEST_CASE("[eval] tasks: the ledger records each job's task metrics; compare tabulates them") {
  Folder folder;
  train::testing::write_tiny_corpus(folder.path);
  std::ofstream(folder.path / "words.jsonl")
      << R"({"q": "the cat sat on", "choices": ["the mat.", "a tree."], "label": 0})" << "\n"
      << R"({"q": "a dog ran to", "choices": ["the river.", "the door."], "label": 1})" << "\n";
  std::ofstream(folder.path / "words.yaml")
      << "task: words\ndataset_path: json\ndataset_kwargs: {data_files: {test: words.jsonl}}\n"
         "test_split: test\noutput_type: multiple_choice\ndoc_to_text: \"{{q}}\"\n"
         "doc_to_choice: \"{{choices}}\"\ndoc_to_target: label\n";
  std::ofstream(folder.path / "base.toml")
      << train::testing::tiny_config_text(folder.path) << "[eval]\ntasks = [\""
      << (folder.path / "words.yaml").string() << "\"]\n";
  const fs::path sweep_file = folder.path / "seeds.toml";
  std::ofstream(sweep_file) << "base = \"base.toml\"\nseeds = [1, 2]\n";
  const fs::path out = folder.path / "s";
  const Result run = patchbay_cli("sweep " + sweep_file.string() + " --out " + out.string() +
                                  " --jobs 1 --threads 1");
  REQUIRE_MESSAGE(run.code == 0, run.output);
  const nlohmann::json l = ledger(out);
  REQUIRE(count_state(l, "done") == 2);
  for (const auto& [id, e] : l["jobs"].items()) {
    REQUIRE_MESSAGE(e.contains("final"), id);
    CHECK(e["final"]["step"] == 6);
    CHECK(e["final"].contains("val_loss"));
    CHECK(e["final"]["task.words.items"] == 2);
    CHECK(e["final"].contains("task.words.acc"));
    CHECK(e["final"].contains("task.words.acc_norm_stderr"));
  }
  CHECK(run.output.find("task.words.acc ") != std::string::npos);  // the per-job progress line

  // A typo in a task name stops the sweep before any job runs.
  std::ofstream(folder.path / "bad.toml")
      << train::testing::tiny_config_text(folder.path) << "[eval]\ntasks = [\"wordz\"]\n";
  std::ofstream(folder.path / "bad_sweep.toml") << "base = \"bad.toml\"\nseeds = [1, 2]\n";
  const Result bad = patchbay_cli("sweep " + (folder.path / "bad_sweep.toml").string() +
                                  " --out " + (folder.path / "b").string() + " --jobs 1");
  CHECK(bad.code != 0);
  CHECK(bad.output.find("eval.tasks[0] = \"wordz\"") != std::string::npos);
  CHECK_FALSE(fs::exists(folder.path / "b" / "ledger.json"));

  const Result compare = patchbay_cli("compare " + out.string() + " --no-plots");
  REQUIRE_MESSAGE(compare.code == 0, compare.output);
  CHECK(compare.output.find("| task metric |") != std::string::npos);
  CHECK(compare.output.find("| words.acc |") != std::string::npos);
  CHECK(fs::exists(out / "compare_tasks.csv"));
}
