// Data-parallel training on 2 ranks (ctest runs this under mpirun -np 2) against one process:
//   - 6 AdamW steps of the tiny model with [parallelism] kind = "mpi_data" (small buckets so
//     several all-reduces start during backward) give the same parameters as one process on
//     the full batch. Not bitwise: each rank's mean loss over its 2 rows and the average of
//     the two gradients round differently from one mean over 4 rows (the GEMMs sum the
//     batch in another order), so values agree to f32 rounding amplified by 6 AdamW steps;
//     1e-4 absolute on parameters of size ~0.02-1 is far below one step's update (lr 0.01)
//     yet fails for any real mistake (a missing average doubles the gradient, a wrong shard
//     changes the data) — checked below by the loss curve too.
//   - the checkpoint the 2-rank run wrote at step 3 resumes in one process to the same end;
//   - only rank 0 wrote files; the agreement check names the rank whose config differs.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../train/train_fixture.hpp"
#include "mpi_test_fixture.hpp"
#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "parallel/gradient_reducer.hpp"
#include "parallel/parallel_run.hpp"
#include "run/metrics_log.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"

namespace fs = std::filesystem;
namespace tt = patchbay::train::testing;
namespace eng = patchbay::engine;
using patchbay::parallel::ParallelRun;
namespace pt = patchbay::parallel::testing;
using pt::quiet;
using pt::setup;

namespace {


const std::string kParallel = "[parallelism]\nkind = \"mpi_data\"\nbucket_mb = 0.002\n";

ParallelRun& world() { return pt::world(kParallel); }

fs::path shared_folder(std::optional<patchbay::testing::TempDir>& owned, const std::string& name) {
  return pt::shared_folder(world(), owned, name);
}

double max_abs_difference(const patchbay::train::Checkpoint& a,
                          const patchbay::train::Checkpoint& b) {
  double worst = 0;
  for (const std::string& name : a.names()) {
    if (name.rfind("optimizer.", 0) == 0) continue;
    const std::vector<float> x = a.tensor(name).to_vector(), y = b.tensor(name).to_vector();
    REQUIRE(x.size() == y.size());
    for (size_t i = 0; i < x.size(); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(x[i] - y[i])));
  }
  return worst;
}

std::vector<double> losses(const fs::path& metrics) {
  std::vector<double> out;
  for (const nlohmann::json& r : patchbay::run::read_metrics(metrics))
    if (r.contains("loss")) out.push_back(r["loss"].get<double>());
  return out;
}

}  // namespace

TEST_CASE(
    "2-rank data parallel equals one process on the full batch, and its checkpoint resumes on 1") {
  REQUIRE(world().world_size() == 2);
  std::optional<patchbay::testing::TempDir> owned;
  const fs::path folder = shared_folder(owned, "dp");
  if (world().writer()) tt::write_tiny_corpus(folder);
  world().barrier();
  const std::string out = "train.out_dir=\"" + (folder / "dp").string() + "\"";
  const auto dp_config = setup().config(tt::tiny_config_text(folder) + kParallel, {out});
  const patchbay::train::TrainSummary dp =
      patchbay::train::train_model(dp_config, setup().registry, setup().lookup, quiet());
  CHECK(dp.steps_done == 6);
  world().barrier();
  if (world().writer()) {
    // Rank 0 alone: the same run in one process (no [parallelism] table), full batch of 4.
    const auto single_config = setup().config(
        tt::tiny_config_text(folder), {"train.out_dir=\"" + (folder / "single").string() + "\""});
    patchbay::train::train_model(single_config, setup().registry, setup().lookup, quiet());
    const auto dp_end = patchbay::train::load_checkpoint(folder / "dp");
    const auto single_end = patchbay::train::load_checkpoint(folder / "single");
    CHECK(dp_end.step() == 6);
    const double diff = max_abs_difference(dp_end, single_end);
    MESSAGE("max |param_dp - param_single| after 6 AdamW steps: ", diff);
    CHECK(diff < 1e-4);
    const std::vector<double> a = losses(folder / "dp" / "metrics.jsonl"),
                              b = losses(folder / "single" / "metrics.jsonl");
    CHECK(a.size() == 6);  // log_every = 1: one record per step, written by rank 0 alone
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-5));

    // The step-3 checkpoint of the 2-rank run, resumed in one process, ends where the 2-rank run
    // ended.
    const auto resume_config = setup().config(
        tt::tiny_config_text(folder), {"train.out_dir=\"" + (folder / "resumed").string() + "\""});
    patchbay::train::TrainRequest resume = quiet();
    resume.resume = folder / "dp" / "checkpoints" / "step_3.safetensors";
    const patchbay::train::TrainSummary resumed =
        patchbay::train::train_model(resume_config, setup().registry, setup().lookup, resume);
    CHECK(resumed.start_step == 3);
    CHECK(max_abs_difference(patchbay::train::load_checkpoint(folder / "resumed"), dp_end) < 1e-4);
  }
  world().barrier();
}

TEST_CASE("the start-up agreement check names the rank whose config differs") {
  const ParallelRun& w = world();
  CHECK_NOTHROW(w.check_agreement("config A", "plugins P"));
  const std::string config = w.rank() == 1 ? "config B" : "config A";
  try {
    w.check_agreement(config, "plugins P");
    FAIL("no error");
  } catch (const patchbay::Error& e) {
    CHECK(std::string(e.what()).find("rank 1 of 2 runs a different resolved config than rank 0") !=
          std::string::npos);
  }
  const std::string plugins = w.rank() == 1 ? "plugins Q" : "plugins P";
  try {
    w.check_agreement("config A", plugins);
    FAIL("no error");
  } catch (const patchbay::Error& e) {
    CHECK(std::string(e.what()).find("rank 1 of 2 runs a different plugin set") !=
          std::string::npos);
  }
}

TEST_CASE(
    "batch shards: rank r gets rows [r*B/W, (r+1)*B/W); a batch the ranks cannot share equally is "
    "refused") {
  const ParallelRun& w = world();
  std::vector<float> rows(8);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i);
  const eng::Tensor global = eng::Tensor::from_vector(rows, {4, 2});
  const std::vector<float> mine = w.shard_rows(global).contiguous().to_vector();
  const float first = static_cast<float>(4 * w.rank());
  CHECK(mine == std::vector<float>{first, first + 1, first + 2, first + 3});
  try {
    w.shard_rows(eng::Tensor::from_vector({1, 2, 3}, {3, 1}));
    FAIL("no error");
  } catch (const patchbay::Error& e) {
    CHECK(std::string(e.what()).find("train.batch_size (3) must be a multiple of the 2 ranks") !=
          std::string::npos);
  }
}

TEST_CASE("gradient buckets start during backward, in order, and average the ranks' gradients") {
  ParallelRun& w = world();
  // Three parameters, one bucket each (4-byte cap): backward reaches c, then b, then a.
  eng::Tensor a = eng::full({3}, 1.0).set_requires_grad(true);
  eng::Tensor b = eng::full({2, 2}, 2.0).set_requires_grad(true);
  eng::Tensor c = eng::full({5}, 3.0).set_requires_grad(true);
  patchbay::parallel::GradientReducer reducer(w.group(), {a, b, c}, 4, /*overlap=*/true);
  REQUIRE(reducer.bucket_count() == 3);
  CHECK(reducer.bucket_parameters(0) == std::vector<size_t>{2});  // reverse registration order
  const double scale =
      static_cast<double>(w.rank() + 1);  // rank r's loss is (r + 1) x the same sum
  reducer.begin();
  eng::Tensor h = (eng::sum(a) * 1.0 + eng::sum(b) * 2.0) * 1.0;
  eng::Tensor loss = (h + eng::sum(c) * 3.0) * scale;
  eng::backward(loss);
  CHECK(reducer.buckets_started_in_backward() == 3);  // every bucket left before finish()
  reducer.finish();
  const double mean_scale = 1.5;  // (1 + 2) / 2
  CHECK(a.grad().to_vector() == std::vector<float>(3, static_cast<float>(1.0 * mean_scale)));
  CHECK(b.grad().to_vector() == std::vector<float>(4, static_cast<float>(2.0 * mean_scale)));
  CHECK(c.grad().to_vector() == std::vector<float>(5, static_cast<float>(3.0 * mean_scale)));
  // overlap = false: nothing starts during backward; the result is the same.
  for (eng::Tensor* p : {&a, &b, &c}) p->zero_grad();
  patchbay::parallel::GradientReducer after(w.group(), {a, b, c}, 1 << 20, /*overlap=*/false);
  after.begin();
  eng::backward((eng::sum(a) + eng::sum(b) * 2.0 + eng::sum(c) * 3.0) * scale);
  CHECK(after.buckets_started_in_backward() == 0);
  after.finish();
  CHECK(c.grad().to_vector() == std::vector<float>(5, static_cast<float>(3.0 * mean_scale)));
}

// Fine-tuning under data parallelism (docs/finetuning.md): a LoRA run (the reducer averages the
// targeted weights' gradients, each rank folds them into the adapters) and a frozen fine-tune
// (frozen tensors left out of the all-reduce) on 2 ranks end where one process ends, within the
// tolerance of the test above; the frozen tensors keep the base's bits.
TEST_CASE("2-rank data-parallel LoRA and freeze fine-tunes equal one process") {
  REQUIRE(world().world_size() == 2);
  std::optional<patchbay::testing::TempDir> owned;
  const fs::path folder = shared_folder(owned, "dp_finetune");
  if (world().writer()) {
    tt::write_tiny_corpus(folder);
    const auto base = setup().config(tt::tiny_config_text(folder),
                                     {"train.out_dir=\"" + (folder / "base").string() + "\""});
    patchbay::train::train_model(base, setup().registry, setup().lookup, quiet());
  }
  world().barrier();
  const std::string init = "train.init_from=\"" + (folder / "base").string() + "\"";
  const std::string lora = "[train.lora]\nrank = 2\ntargets = [\"attention.*\", \"mlp.*\"]\n";
  struct Variant {
    std::string name, table;
    std::vector<std::string> overrides;
  };
  const std::vector<Variant> variants = {
      {"lora", lora, {init, "train.lr=0.03"}},
      {"freeze", "", {init, "train.freeze=[\"wte\", \"blocks.0\"]"}}};
  for (const Variant& v : variants) {
    std::vector<std::string> dp_overrides = v.overrides;
    dp_overrides.push_back("train.out_dir=\"" + (folder / (v.name + "_dp")).string() + "\"");
    const auto dp_config =
        setup().config(tt::tiny_config_text(folder, v.table) + kParallel, dp_overrides);
    CHECK(patchbay::train::train_model(dp_config, setup().registry, setup().lookup, quiet())
              .steps_done == 6);
    world().barrier();
    if (world().writer()) {
      std::vector<std::string> single_overrides = v.overrides;
      single_overrides.push_back("train.out_dir=\"" + (folder / (v.name + "_single")).string() +
                                 "\"");
      patchbay::train::train_model(
          setup().config(tt::tiny_config_text(folder, v.table), single_overrides), setup().registry,
          setup().lookup, quiet());
      const auto dp_end = patchbay::train::load_checkpoint(folder / (v.name + "_dp"));
      const auto single_end = patchbay::train::load_checkpoint(folder / (v.name + "_single"));
      const auto base_end = patchbay::train::load_checkpoint(folder / "base");
      REQUIRE(dp_end.names() == single_end.names());
      const double diff = max_abs_difference(dp_end, single_end);
      MESSAGE(v.name, ": max |param_dp - param_single| after 6 AdamW steps: ", diff);
      CHECK(diff < 1e-4);
      if (v.name == "freeze") {
        for (const char* name : {"wte.weight", "blocks.0.attn.qkv.weight"})
          CHECK(dp_end.tensor(name).to_vector() == base_end.tensor(name).to_vector());
        const std::vector<float> trained = dp_end.tensor("blocks.1.attn.qkv.weight").to_vector(),
                                 before = base_end.tensor("blocks.1.attn.qkv.weight").to_vector();
        double moved = 0;
        for (size_t i = 0; i < trained.size(); ++i)
          moved = std::max(moved, static_cast<double>(std::fabs(trained[i] - before[i])));
        CHECK(moved > 1e-3);  // it trained
      } else {
        double b_size = 0;
        for (float x : dp_end.tensor("lora/blocks.1.ffn.proj.weight/all/B").to_vector())
          b_size = std::max(b_size, static_cast<double>(std::fabs(x)));
        CHECK(b_size > 1e-3);  // B starts at 0: the adapters trained
      }
    }
    world().barrier();
  }
}
