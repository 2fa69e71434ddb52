// A run directory is its own, and checkpoints are verified (issue 39), through the real
// `patchbay` CLI as a user meets it:
//   - `train --resume COPY` of a copied run writes only into COPY (the original's metrics.jsonl
//     and `latest` keep their bytes);
//   - a second process training into a locked run directory is refused, naming the holder;
//   - a corrupt latest checkpoint: eval and train --resume exit 5 naming the newest intact
//     one, --resume-from-intact continues from it, and the numeric failure message
//     (trainer) names only intact checkpoints;
//   - `latest` deleted: the newest intact step file is used, the step files are named;
//   - metadata step "-5" / "abc": exit 5 naming the field, metrics.jsonl untouched;
//   - a NaN weight: refused at load naming the tensor;
//   - a checkpoint from before checksums: loads, saying the check was skipped;
//   - a temporary left by a killed write: removed on the next start;
//   - a numeric failure names only a checkpoint that verifies (API, TrainRequest hooks).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../command_runner.hpp"
#include "run/run_directory.hpp"
#include "run/safetensors.hpp"
#include "train/trainer.hpp"
#include "train_fixture.hpp"

namespace fs = std::filesystem;
using patchbay::testing::CommandResult;

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// `patchbay ARGS` with one OpenMP thread (a tiny model on a shared machine).
CommandResult cli(const std::string& arguments) {
  return patchbay::testing::run_patchbay(arguments, "OMP_NUM_THREADS=1");
}

// Joins its pieces by appending (GCC 12 reports a false -Wrestrict, PR 105329, on
// "literal" + std::string temporaries).
template <class... Pieces>
std::string cat(const Pieces&... pieces) {
  std::string text;
  ((text += pieces), ...);
  return text;
}

std::string quoted(const fs::path& p) { return cat("'", p.string(), "'"); }

// A scratch folder with the tiny corpus and config; `trained()` is a finished 6-step run
// (checkpoints at steps 3 and 6) made once per test.
struct TrainedRun {
  patchbay::testing::TempDir dir = patchbay::train::testing::fresh_folder("integrity");
  fs::path folder = dir.path();
  fs::path run = folder / "run";
  TrainedRun() {
    patchbay::train::testing::write_tiny_corpus(folder);
    std::ofstream(folder / "tiny.toml") << patchbay::train::testing::tiny_config_text(folder);
    const CommandResult r = cli(cat("train ", quoted(folder / "tiny.toml"), " --no-progress"));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    REQUIRE(fs::exists(run / "checkpoints" / "step_3.safetensors"));
    REQUIRE(fs::exists(run / "checkpoints" / "step_6.safetensors"));
  }
  fs::path checkpoint(int step) const {
    return run / "checkpoints" / cat("step_", std::to_string(step), ".safetensors");
  }
};

// Rewrites a checkpoint with changed metadata and tensors (as a corrupting tool would, with
// a valid checksum over the changed data, so only the field checks can catch it).
void rewrite_checkpoint(const fs::path& file,
                        const std::map<std::string, std::string>& meta_changes,
                        const std::string& nan_tensor = "") {
  patchbay::run::SafetensorsFile original(file);
  std::map<std::string, std::string> meta = original.metadata();
  meta.erase(patchbay::run::kDataChecksumKey);
  for (const auto& [k, v] : meta_changes) meta[k] = v;
  std::vector<std::vector<std::byte>> copies;
  std::vector<patchbay::run::TensorToWrite> tensors;
  for (const std::string& name : original.names()) {
    const auto& t = original.tensor(name);
    copies.emplace_back(t.data.begin(), t.data.end());
    if (name == nan_tensor) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(copies.back().data() + 4, &nan, 4);
    }
  }
  const std::vector<std::string> names = original.names();
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto& t = original.tensor(names[i]);
    tensors.push_back({names[i], t.dtype, t.shape, copies[i]});
  }
  patchbay::run::write_safetensors(file, tensors, meta);
}

// Flips one byte in the middle of a file's data section (the checksum no longer matches).
void flip_data_byte(const fs::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-100, std::ios::end);
  const char c = static_cast<char>(f.get());
  f.seekp(-100, std::ios::end);
  f.put(static_cast<char>(c ^ 0x10));
}

}  // namespace

TEST_CASE("a copied run resumes in its copy and leaves the original's files untouched") {
  TrainedRun t;
  const fs::path copy = t.folder / "elsewhere" / "copy";
  fs::create_directories(copy.parent_path());
  fs::copy(t.run, copy, fs::copy_options::recursive);
  const std::string metrics_before = read_text(t.run / "metrics.jsonl");
  const std::string latest_before = read_text(t.run / "checkpoints" / "latest");
  const CommandResult r =
      cli(cat("train --resume ", quoted(copy), " --no-progress --set train.max_steps=9"));
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(read_text(t.run / "metrics.jsonl") == metrics_before);
  CHECK(read_text(t.run / "checkpoints" / "latest") == latest_before);
  CHECK_FALSE(fs::exists(t.run / "checkpoints" / "step_9.safetensors"));
  CHECK(read_text(copy / "checkpoints" / "latest") == "step_9.safetensors\n");
  CHECK(contains(read_text(copy / "metrics.jsonl"), "\"step\":9"));
  CHECK(contains(r.output, cat("run: ", copy.string())));
}

TEST_CASE("a second process training into a locked run directory is refused, naming the first") {
  TrainedRun t;
  const patchbay::run::RunDirectoryLock held(t.run);  // this test process is "the other trainer"
  const std::string metrics_before = read_text(t.run / "metrics.jsonl");
  const CommandResult r =
      cli(cat("train --resume ", quoted(t.run), " --no-progress --set train.max_steps=9"));
  CHECK(r.exit_code == 5);
  CHECK(contains(r.output, cat("in use by another process (pid ", std::to_string(::getpid()))));
  CHECK(read_text(t.run / "metrics.jsonl") == metrics_before);
  // A fresh run with --overwrite into the same folder is refused the same way.
  const CommandResult fresh =
      cli(cat("train ", quoted(t.folder / "tiny.toml"), " --no-progress --overwrite"));
  CHECK(fresh.exit_code == 5);
  CHECK(fs::exists(t.run / "metrics.jsonl"));
}

TEST_CASE("a corrupt latest checkpoint names the newest intact one; --resume-from-intact uses it") {
  TrainedRun t;
  flip_data_byte(t.checkpoint(6));
  const CommandResult eval = cli(cat("eval ", quoted(t.run)));
  CHECK(eval.exit_code == 5);
  CHECK(contains(eval.output, "step_6.safetensors' is not a valid safetensors file"));
  CHECK(contains(eval.output, "checksum"));
  CHECK(contains(eval.output, cat("newest intact checkpoint is ", t.checkpoint(3).string())));

  const CommandResult refused = cli(cat("train --resume ", quoted(t.run), " --no-progress"));
  CHECK(refused.exit_code == 5);
  CHECK(contains(refused.output, "--resume-from-intact"));

  const CommandResult resumed =
      cli(cat("train --resume ", quoted(t.run), " --resume-from-intact --no-progress"));
  REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.output);
  CHECK(contains(resumed.output, "steps: 3 -> 6"));
  CHECK(cli(cat("eval ", quoted(t.run))).exit_code == 0);  // step 6 written again, intact
}

TEST_CASE("a deleted `latest` resumes from the newest intact step file, naming them") {
  TrainedRun t;
  fs::remove(t.run / "checkpoints" / "latest");
  flip_data_byte(t.checkpoint(6));
  const CommandResult r =
      cli(cat("train --resume ", quoted(t.run), " --no-progress --set train.max_steps=8"));
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(contains(r.output, "step_6.safetensors, step_3.safetensors"));
  CHECK(contains(r.output, "steps: 3 -> 8"));
}

TEST_CASE("a malformed step in the metadata is refused naming the field, before metrics change") {
  TrainedRun t;
  const std::string metrics_before = read_text(t.run / "metrics.jsonl");
  for (const char* step : {"-5", "abc", "99999999999999999999"}) {
    INFO("step = " << step);
    rewrite_checkpoint(t.checkpoint(6), {{"step", step}});
    const CommandResult r = cli(cat("train --resume ", quoted(t.checkpoint(6)), " --no-progress"));
    CHECK(r.exit_code == 5);
    CHECK(contains(r.output, cat("metadata 'step' is '", std::string(step),
                                 "'; expected a non-negative integer")));
    CHECK_FALSE(contains(r.output, "internal"));
    CHECK(read_text(t.run / "metrics.jsonl") == metrics_before);
  }
}

TEST_CASE("a NaN weight is refused at load, naming the tensor") {
  TrainedRun t;
  rewrite_checkpoint(t.checkpoint(6), {}, "wte.weight");
  const CommandResult r = cli(cat("eval ", quoted(t.run)));
  CHECK(r.exit_code == 5);
  CHECK(contains(r.output, "tensor 'wte.weight' holds a NaN or infinite value (element 1)"));
  const CommandResult g = cli(cat("generate ", quoted(t.checkpoint(6)), " --prompt 'the' -n 4"));
  CHECK(g.exit_code == 5);
  CHECK(contains(g.output, "wte.weight"));
}

TEST_CASE("a checkpoint from before checksums loads and says the check was skipped") {
  TrainedRun t;
  // Rebuild the file without the checksum key: the layout of checkpoints written before it.
  patchbay::run::SafetensorsFile original(t.checkpoint(6));
  std::string header_text;
  {
    const std::string bytes = read_text(t.checkpoint(6));
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i)
      n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
    nlohmann::ordered_json header = nlohmann::ordered_json::parse(bytes.substr(8, n));
    header["__metadata__"].erase(patchbay::run::kDataChecksumKey);
    header_text = header.dump();
    header_text.append((8 - header_text.size() % 8) % 8, ' ');
    std::ofstream out(t.checkpoint(6), std::ios::binary | std::ios::trunc);
    const uint64_t m = header_text.size();
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>(m >> (8 * i)));
    out << header_text << bytes.substr(8 + n);
  }
  const CommandResult r = cli(cat("eval ", quoted(t.run)));
  CHECK_MESSAGE(r.exit_code == 0, r.output);
  CHECK(contains(r.output, "written before checkpoints carried a checksum"));
}

TEST_CASE("a temporary left by a killed checkpoint write is removed on the next start") {
  TrainedRun t;
  const pid_t gone = [] {
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    ::waitpid(child, nullptr, 0);
    return child;
  }();
  const fs::path left =
      t.run / "checkpoints" / cat("step_9.safetensors.tmp-", std::to_string(gone));
  std::ofstream(left) << "half a checkpoint";
  const CommandResult r =
      cli(cat("train --resume ", quoted(t.run), " --no-progress --set train.max_steps=7"));
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK_FALSE(fs::exists(left));
  CHECK(contains(r.output, "left by a write that was killed"));
}

TEST_CASE("the numeric-failure message names only a checkpoint that verifies") {
  patchbay::train::testing::TinySetup setup;
  const auto folder = patchbay::train::testing::fresh_folder("nan_intact");
  patchbay::train::testing::write_tiny_corpus(folder);
  const auto config = setup.config(patchbay::train::testing::tiny_config_text(folder),
                                   {"train.checkpoint_every=2"});
  patchbay::train::TrainRequest request;
  request.show_progress = false;
  request.print_samples = false;
  request.before_step = [&](int64_t step,
                            const std::vector<patchbay::model::NamedParameter>& params) {
    if (step != 4) return;
    flip_data_byte(folder / "run" / "checkpoints" / "step_4.safetensors");  // the disk corrupts it
    params[0].tensor.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  };
  const patchbay::train::TrainSummary summary =
      patchbay::train::train_model(config, setup.registry, setup.lookup, request);
  REQUIRE(summary.numeric_failure);
  CHECK(summary.failure_message.find("step_4.safetensors") == std::string::npos);
  CHECK(summary.failure_message.find(
            cat("the last good checkpoint is ",
                (folder / "run" / "checkpoints" / "step_2.safetensors").string())) !=
        std::string::npos);
}
