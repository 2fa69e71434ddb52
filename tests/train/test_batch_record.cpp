// Recording what a run trains on (train/batch_record.hpp, `patchbay train --record-batches`)
// and its starting point (TrainRequest::checkpoint_at_start, `--checkpoint-at-start`), which
// the side-by-side benchmark against PyTorch + PEFT feeds the other side from: the recorded
// lines equal the batches the trainer made, in order, a resumed run appends the rest, and
// step_0 holds the weights before any update.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/batch_record.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"
#include "train_fixture.hpp"

using namespace patchbay;
using train::testing::TinySetup;

namespace {

std::vector<nlohmann::json> read_lines(const std::filesystem::path& file) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

}  // namespace

TEST_CASE("batch record: one JSON line per micro-batch with inputs, targets, segment ids") {
  const int32_t inputs[] = {1, 2, 3, 4, 5, 6}, targets[] = {2, 3, -100, 5, 6, -100},
                segments[] = {0, 0, 1, 0, 0, 0};
  train::Batch b{engine::Tensor::from_data(inputs, {2, 3}, engine::DType::kI32),
                 engine::Tensor::from_data(targets, {2, 3}, engine::DType::kI32)};
  CHECK(train::batch_record(4, 1, b).dump() ==
        R"({"inputs":[[1,2,3],[4,5,6]],"micro":1,"step":4,"targets":[[2,3,-100],[5,6,-100]]})");
  b.segment_ids = engine::Tensor::from_data(segments, {2, 3}, engine::DType::kI32);
  CHECK(train::batch_record(0, 0, b)["segment_ids"] == nlohmann::json::parse("[[0,0,1],[0,0,0]]"));
  const auto folder = train::testing::fresh_folder("batch_record_bad");
  CHECK_THROWS_WITH(train::BatchRecorder(folder / "missing" / "b.jsonl", false),
                    doctest::Contains("to record the training batches (--record-batches)"));
}

TEST_CASE(
    "batch record through the trainer: the batches trained, in order; resume appends; "
    "checkpoint at start") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("batch_record_run");
  train::testing::write_tiny_corpus(folder);
  const std::string text = train::testing::tiny_config_text(folder);
  const std::filesystem::path file = folder / "batches.jsonl";
  std::vector<nlohmann::json> seen;
  std::optional<train::BatchRecorder> recorder;
  train::TrainRequest request;
  request.show_progress = false;
  request.print_samples = false;
  request.checkpoint_at_start = true;
  request.on_batch = [&](int64_t step, int64_t micro, const train::Batch& batch) {
    seen.push_back(train::batch_record(step, micro, batch));
    recorder->record(step, micro, batch);
  };
  request.before_step = [](int64_t step, const std::vector<model::NamedParameter>&) {
    if (step == 4) throw std::runtime_error("interrupted");
  };
  const config::ResolvedConfig config =
      setup.config(text, {"train.grad_accum_steps=2", "train.checkpoint_every=2"});
  recorder.emplace(file, /*append=*/false);
  CHECK_THROWS_WITH(train::train_model(config, setup.registry, setup.lookup, request),
                    "interrupted");
  // step_0 is the model before any update: it differs from step_2's weights.
  const train::Checkpoint start =
      train::load_checkpoint(folder / "run" / "checkpoints" / "step_0.safetensors");
  const train::Checkpoint later =
      train::load_checkpoint(folder / "run" / "checkpoints" / "step_2.safetensors");
  CHECK(start.step() == 0);
  const engine::Tensor w0 = start.tensor("wte.weight"), w2 = later.tensor("wte.weight");
  REQUIRE(w0.nbytes() == w2.nbytes());
  CHECK(std::memcmp(w0.data_ptr(), w2.data_ptr(), w0.nbytes()) != 0);

  // Resume from step 4 to 6: the file gets steps 4 and 5 appended (two micro-batches each).
  request.before_step = nullptr;
  request.resume = folder / "run";
  recorder.emplace(file, /*append=*/true);
  const train::TrainSummary s = train::train_model(config, setup.registry, setup.lookup, request);
  CHECK(s.steps_done == 6);
  const std::vector<nlohmann::json> lines = read_lines(file);
  REQUIRE(lines.size() == 12);
  CHECK(lines == seen);
  for (size_t i = 0; i < lines.size(); ++i) {
    CHECK(lines[i]["step"] == static_cast<int64_t>(i / 2));
    CHECK(lines[i]["micro"] == static_cast<int64_t>(i % 2));
    CHECK(lines[i]["inputs"].size() == 4);      // batch_size rows
    CHECK(lines[i]["inputs"][0].size() == 16);  // seq_len ids
  }
}
