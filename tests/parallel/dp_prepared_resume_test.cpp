// Prepared token shards under data parallelism (ctest runs this under mpirun -np 2):
//   - a 2-rank run reads, step by step, exactly the global batches a 1-process run reads (the
//     epoch order is a pure function of (seed, step, micro) and the global batch shape);
//   - its step-3 checkpoint resumed in one process reads exactly the batches the 2-rank run
//     read at steps 4 to 6, records the same tokens and epochs at every step, and ends where it
//     ended (losses and weights to f32 rounding: the 2-rank mean of per-rank means rounds
//     differently from one mean, see dp_train_test.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../train/train_fixture.hpp"
#include "data/prepare.hpp"
#include "data/tokenizer_io.hpp"
#include "mpi_test_fixture.hpp"
#include "run/metrics_log.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"

namespace fs = std::filesystem;
namespace tt = patchbay::train::testing;
namespace pt = patchbay::parallel::testing;
using namespace patchbay;

namespace {

const std::string kParallel = "[parallelism]\nkind = \"mpi_data\"\nbucket_mb = 0.002\n";

// The batches a run made, by (step, micro): inputs then targets, as ids.
using BatchLog = std::map<std::pair<int64_t, int64_t>, std::vector<int32_t>>;

train::TrainRequest recording(BatchLog& log) {
  train::TrainRequest r = pt::quiet();
  r.on_batch = [&log](int64_t step, int64_t micro, const train::Batch& batch) {
    std::vector<int32_t> ids;
    for (const engine::Tensor& t : {batch.inputs, batch.targets}) {
      const engine::Tensor c = t.contiguous();
      ids.insert(ids.end(), c.data<int32_t>(), c.data<int32_t>() + c.numel());
    }
    log[{step, micro}] = std::move(ids);
  };
  return r;
}

// 40 documents of the tiny corpus prepared into ~8 KB shards with a char tokenizer trained on it.
void prepare(const fs::path& folder) {
  tt::write_tiny_corpus(folder);
  fs::create_directories(folder / "docs");
  const std::string text = data::read_text_file(folder / "corpus.txt");
  for (int d = 0; d < 40; ++d)
    std::ofstream(folder / "docs" / (std::string("d") + std::to_string(100 + d) + ".txt"))
        << text.substr(d * 1000, 1000);
  data::TokenizerSettings settings;
  settings.kind = "char";
  runtime::TokenizerHandle tokenizer = data::create_tokenizer(pt::setup().registry, settings);
  tokenizer.train(text);
  tokenizer.save((folder / "char.tok").string());
  data::PrepareOptions o;
  o.sources = {{folder / "docs", {}, {}, "text"}};
  o.out = folder / "prepared";
  o.val_fraction = 0.2;
  o.shard_bytes = 8000;
  data::prepare_dataset(o, {&tokenizer, "char", folder / "char.tok"});
}

std::map<int64_t, nlohmann::json> step_records(const fs::path& metrics) {
  std::map<int64_t, nlohmann::json> records;
  for (const nlohmann::json& r : run::read_metrics(metrics))
    if (r.contains("loss")) records[r["step"].get<int64_t>()] = r;
  return records;
}

}  // namespace

TEST_CASE(
    "prepared shards: 2 ranks read the 1-process batches, and a 2-rank checkpoint resumes on 1 "
    "exactly") {
  parallel::ParallelRun& world = pt::world(kParallel);
  REQUIRE(world.world_size() == 2);
  std::optional<patchbay::testing::TempDir> owned;
  const fs::path folder = pt::shared_folder(world, owned, "dp_prepared");
  if (world.writer()) prepare(folder);
  world.barrier();
  const std::string prepared = "data.prepared=\"" + (folder / "prepared").string() + "\"";
  BatchLog two_ranks;
  const auto dp_config =
      pt::setup().config(tt::tiny_config_text(folder) + kParallel,
                         {prepared, "train.out_dir=\"" + (folder / "dp").string() + "\""});
  CHECK(
      train::train_model(dp_config, pt::setup().registry, pt::setup().lookup, recording(two_ranks))
          .steps_done == 6);
  world.barrier();
  if (world.writer()) {
    REQUIRE(two_ranks.size() == 6);  // grad_accum_steps = 1
    BatchLog single;
    const auto single_config =
        pt::setup().config(tt::tiny_config_text(folder),
                           {prepared, "train.out_dir=\"" + (folder / "single").string() + "\""});
    train::train_model(single_config, pt::setup().registry, pt::setup().lookup, recording(single));
    CHECK(single == two_ranks);

    BatchLog resumed_batches;
    const auto resume_config =
        pt::setup().config(tt::tiny_config_text(folder),
                           {prepared, "train.out_dir=\"" + (folder / "resumed").string() + "\""});
    train::TrainRequest resume = recording(resumed_batches);
    resume.resume = folder / "dp" / "checkpoints" / "step_3.safetensors";
    const train::TrainSummary resumed =
        train::train_model(resume_config, pt::setup().registry, pt::setup().lookup, resume);
    CHECK(resumed.start_step == 3);
    REQUIRE(resumed_batches.size() == 3);
    for (const auto& [key, ids] : resumed_batches) {
      CAPTURE(key.first);
      CHECK(key.first >= 3);
      CHECK(ids == two_ranks.at(key));  // the same windows, bit for bit
    }
    const std::map<int64_t, nlohmann::json> a = step_records(folder / "dp" / "metrics.jsonl");
    const std::map<int64_t, nlohmann::json> b = step_records(folder / "resumed" / "metrics.jsonl");
    for (int64_t step = 4; step <= 6; ++step) {
      CAPTURE(step);
      REQUIRE(a.count(step) == 1);
      REQUIRE(b.count(step) == 1);
      CHECK(b.at(step)["tokens"] == a.at(step)["tokens"]);
      CHECK(b.at(step)["epoch"] == a.at(step)["epoch"]);
      CHECK(b.at(step)["loss"].get<double>() ==
            doctest::Approx(a.at(step)["loss"].get<double>()).epsilon(1e-5));
    }
    const train::Checkpoint dp_end = train::load_checkpoint(folder / "dp");
    const train::Checkpoint resumed_end = train::load_checkpoint(folder / "resumed");
    double worst = 0;
    for (const std::string& name : dp_end.names()) {
      if (name.rfind("optimizer.", 0) == 0) continue;
      const std::vector<float> x = dp_end.tensor(name).to_vector(),
                               y = resumed_end.tensor(name).to_vector();
      REQUIRE(x.size() == y.size());
      for (size_t i = 0; i < x.size(); ++i)
        worst = std::max(worst, static_cast<double>(std::fabs(x[i] - y[i])));
    }
    CHECK(worst < 1e-4);
  }
  world.barrier();
}
