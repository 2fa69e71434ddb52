// A newcomer's first hour, from an installed prefix only (the steps docs/plugins.md and
// docs/ablations.md describe):
//   1. cmake --install <this build> --prefix <scratch>/prefix; the configs come with it;
//   2. <prefix>/bin/patchbay plugin new attention my_attention; build the plugin alone against
//      the prefix (find_package(Patchbay), Release by default);
//   3. a sweep of 2 attention kinds (the new plugin and dense) x 2 seeds on the installed
//      quickstart config shrunk to seconds, run with --plugin-path my_attention.so, killed
//      (SIGKILL) once the plugin's first job has a checkpoint, then resumed with the same
//      command: every job done, the killed one resumed from its checkpoint;
//   4. job files: the plugin's jobs name its absolute file, dense jobs name none (their ids do
//      not depend on the plugin); a rerun without --plugin-path finds the plugin again;
//   5. `compare`: rows labelled by the attention kind alone, plots written;
//   6. the plugin moved away: the rerun is refused naming the file; `export` of the plugin's
//      run is refused with exit code 1 (the work cannot be done, not a bad command line).
// Each step's output goes to <scratch>/<step>.log, printed when a step fails. The scratch
// folder is removed at the end (kept when a step fails; the next run clears it).
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

namespace fs = std::filesystem;

namespace {

const fs::path kScratch = PATCHBAY_NEWCOMER_SCRATCH_DIR;

std::string quoted(const fs::path& p) {  // appended piecewise: g++ 12's -Wrestrict misfires
  std::string out(1, '\'');
  out.append(p.string());
  out.push_back('\'');
  return out;
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_text(const fs::path& file, const std::string& text) { std::ofstream(file) << text; }

// Runs `command` with output to <scratch>/<step>.log; returns the exit code and the output.
std::pair<int, std::string> run(const std::string& step, const std::string& command) {
  const fs::path log = kScratch / (step + ".log");
  const int status = std::system((command + " > " + quoted(log) + " 2>&1").c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, read_text(log)};
}

std::string run_ok(const std::string& step, const std::string& command) {
  auto [code, output] = run(step, command);
  INFO("step '", step, "' ran: ", command, "\n--- output ---\n", output);
  REQUIRE(code == 0);
  return output;
}

nlohmann::json read_ledger(const fs::path& sweep_dir) {
  std::ifstream in(sweep_dir / "ledger.json");
  return nlohmann::json::parse(in);
}

// The run directory of the first job whose overrides mention `text`.
fs::path job_dir(const nlohmann::json& ledger, const std::string& text) {
  for (const auto& [id, entry] : ledger["jobs"].items())
    if (entry["label"].get<std::string>().find(text) != std::string::npos)
      return entry["run_dir"].get<std::string>();
  FAIL("no job labelled with ", text);
  return {};
}

// job_dir() while the sweep runs: nullopt until the ledger exists and lists the job (the
// ledger is replaced atomically, but it may not be written yet).
std::optional<fs::path> job_dir_if_listed(const fs::path& sweep_dir, const std::string& text) {
  if (!fs::exists(sweep_dir / "ledger.json")) return std::nullopt;
  try {
    const nlohmann::json ledger = read_ledger(sweep_dir);
    for (const auto& [id, entry] : ledger.at("jobs").items())
      if (entry.at("label").get<std::string>().find(text) != std::string::npos)
        return fs::path(entry.at("run_dir").get<std::string>());
  } catch (const nlohmann::json::exception&) {
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("newcomer: scaffold, build, sweep with the plugin, kill, resume, compare") {
  const fs::path prefix = kScratch / "prefix", plugin_src = kScratch / "my_attention",
                 plugin_build = kScratch / "build", sweep_dir = kScratch / "sweep";
  fs::remove_all(kScratch);
  fs::create_directories(kScratch);
  const std::string cmake = quoted(PATCHBAY_CMAKE_COMMAND);
  // The installed CLI as a user runs it: ctest's PATCHBAY_PLUGIN_PATH must not leak in.
  const std::string patchbay = "env -u PATCHBAY_PLUGIN_PATH " + quoted(prefix / "bin/patchbay");

  run_ok("install",
         cmake + " --install " + quoted(PATCHBAY_BUILD_DIR) + " --prefix " + quoted(prefix));
  const fs::path configs = prefix / "share/patchbay/configs";
  REQUIRE(fs::exists(configs / "quickstart.toml"));
  REQUIRE(fs::exists(configs / "base/data_kjv.toml"));

  run_ok("new", patchbay + " plugin new attention my_attention " + quoted(plugin_src));
  run_ok("configure", cmake + " -S " + quoted(plugin_src) + " -B " + quoted(plugin_build) + " -G " +
                          quoted(PATCHBAY_CMAKE_GENERATOR) + " -DCMAKE_CXX_COMPILER=" +
                          quoted(PATCHBAY_CXX_COMPILER) + " -DCMAKE_PREFIX_PATH=" + quoted(prefix) +
                          " -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF" + PATCHBAY_LAUNCHER_OPTION);
  run_ok("build", cmake + " --build " + quoted(plugin_build) + " --target my_attention");
  const fs::path plugin = plugin_build / "my_attention.so";
  REQUIRE(fs::exists(plugin));

  // A tiny corpus; the installed quickstart shrunk to a few seconds per job.
  std::string corpus;
  const char* words[] = {"the cat sat.", "a dog ran.", "my bird sang.", "his fish swam."};
  for (int i = 0; i < 800; ++i)
    corpus += std::string(words[i % 4]) + " " + words[(i / 4) % 4] + "\n";
  write_text(kScratch / "corpus.txt", corpus);
  const fs::path sweep_file = kScratch / "attention.toml";
  write_text(sweep_file,
             "base = \"" + (configs / "quickstart.toml").string() + "\"\nname = \"attention\"\n" +
                 "set = [\"data.corpus=\\\"" + (kScratch / "corpus.txt").string() +
                 "\\\"\", \"data.output_dir=\\\"" + (kScratch / "data").string() + "\\\"\",\n" +
                 "  \"model.n_layers=1\", \"model.d_model=32\", \"model.n_heads=2\", "
                 "\"model.context_length=16\", \"train.seq_len=16\", \"train.batch_size=4\",\n"
                 "  \"train.max_steps=200\", \"train.warmup_steps=2\", \"train.eval_every=100\", "
                 "\"train.eval_batches=2\", \"train.checkpoint_every=5\", \"train.log_every=10\", "
                 "\"train.sample_tokens=0\"]\nseeds = [0, 1]\n\n[grid]\n"
                 "\"model.attention.kind\" = [\"my_attention\", \"dense\"]\n");
  const std::string sweep_command = patchbay + " --plugin-path " + quoted(plugin) + " sweep " +
                                    quoted(sweep_file) + " --out " + quoted(sweep_dir) +
                                    " --jobs 1 --threads 1 --no-progress";

  // Started, then killed once the first job (the plugin's) has a checkpoint.
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::string command =
        "exec " + sweep_command + " > " + quoted(kScratch / "sweep_killed.log") + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // The plugin's job specifically: the ledger orders jobs by id, which any change to the
  // resolved config (a new key with a default) reorders, so "the first job" is not a fixed one.
  bool checkpointed = false;
  for (int i = 0; i < 6000 && !checkpointed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const std::optional<fs::path> job = job_dir_if_listed(sweep_dir, "my_attention");
    checkpointed = job && fs::exists(*job / "checkpoints" / "latest");
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  INFO(read_text(kScratch / "sweep_killed.log"));
  REQUIRE(checkpointed);
  const nlohmann::json killed = read_ledger(sweep_dir);
  REQUIRE(killed["jobs"].size() == 4);
  const fs::path plugin_job = job_dir(killed, "my_attention");
  CHECK(fs::exists(plugin_job / "checkpoints" / "latest"));

  // Resumed with the same command.
  // Jobs ordered before the plugin's may have finished before the kill.
  int unfinished = 0;
  for (const auto& [id, entry] : killed["jobs"].items()) unfinished += entry["state"] != "done";
  REQUIRE(unfinished >= 1);
  const std::string resumed = run_ok("resume", sweep_command);
  CAPTURE(resumed);
  CHECK(resumed.find(std::to_string(unfinished) + " finished now") != std::string::npos);
  const nlohmann::json done = read_ledger(sweep_dir);
  for (const auto& [id, entry] : done["jobs"].items()) {
    CAPTURE(id);
    CHECK(entry["state"] == "done");
  }
  CHECK(read_text(plugin_job / "sweep_job.log").find("resuming job") != std::string::npos);

  // The plugin's jobs carry its absolute file; dense jobs carry none.
  const std::string plugin_file = fs::canonical(plugin).string();
  const std::string job_toml = read_text(plugin_job / "job.toml");
  const size_t paths_line = job_toml.find("plugin_paths = [");
  REQUIRE(paths_line != std::string::npos);
  const std::string paths =
      job_toml.substr(paths_line, job_toml.find('\n', paths_line) - paths_line);
  CHECK(paths.find(plugin_file) != std::string::npos);
  const fs::path dense_job = job_dir(done, "dense");
  CHECK(read_text(dense_job / "job.toml").find("plugin_paths = []") != std::string::npos);
  CHECK(done["jobs"][plugin_job.filename().string()]["plugins"][0]["file"] == plugin_file);
  // Without --plugin-path the sweep still finds the plugin its jobs recorded.
  const std::string rerun =
      run_ok("rerun_no_path", patchbay + " sweep " + quoted(sweep_file) + " --out " +
                                  quoted(sweep_dir) + " --jobs 1 --threads 1 --no-progress");
  CHECK(rerun.find("0 finished now, 4 already done") != std::string::npos);

  // compare: one row per kind, labelled by the kind alone.
  const std::string compared = run_ok("compare", patchbay + " compare " + quoted(sweep_dir));
  CHECK(compared.find("| 0 | model.attention.kind=\"my_attention\" **(baseline)** | 2 |") !=
        std::string::npos);
  CHECK(compared.find("| 1 | model.attention.kind=\"dense\" | 2 |") != std::string::npos);
  CHECK(compared.find("<unset>") == std::string::npos);
  CHECK(fs::file_size(sweep_dir / "plots" / "val_loss_curves.png") > 1000);
  CHECK(fs::file_size(sweep_dir / "plots" / "final_loss_bars.png") > 1000);

  // export: the plugin's attention has no transformers counterpart: refused, exit code 1.
  const auto [export_code, export_output] =
      run("export",
          patchbay + " export " + quoted(plugin_job) + " --format hf " + quoted(kScratch / "hf"));
  CHECK(export_code == 1);
  CHECK(export_output.find("cannot export") != std::string::npos);

  // Moved away: the rerun is refused with the message generate gives, naming the file.
  fs::rename(plugin, kScratch / "moved.so");
  const auto [moved_code, moved_output] = run("moved", sweep_command);
  INFO(moved_output);
  CHECK(moved_code == 4);
  CHECK(moved_output.find("from the plugin file '" + plugin_file + "'") != std::string::npos);
  CHECK(moved_output.find("no longer exists") != std::string::npos);

  fs::remove_all(kScratch);
}
