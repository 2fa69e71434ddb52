// Packing conversations in the "sft" objective ([train.sft] pack_examples;
// core/train/instruction_packing.hpp) on a tiny model built here (character tokenizer, ChatML
// markers as special tokens, rotary positions, 2 layers):
//   - the layout by hand: first-fit rows, L - 1 positions per example, targets only on the
//     example's own assistant ids, a segment per example and one for the trailing padding;
//   - equivalence: a packed batch gives each conversation exactly the summed assistant-token
//     loss it gets alone in a padded row (relative 1e-5), and the parameters' gradients equal
//     the sum of the separate runs' (1e-5 of the largest entry), f32;
//   - through the trainer: every batch carries segment ids with no target crossing into the
//     next conversation, fewer rows cover an epoch than unpacked, the loss falls, a resume is
//     bit-identical;
//   - config: train.sft.pack_examples a boolean, false by default; refusals: an attention kind
//     without the packed-sequences capability (named, before the first step), and
//     [data] pack_documents with sft.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "eval/chat_template.hpp"
#include "resume_check.hpp"
#include "run/metrics_log.hpp"
#include "sft_fixture.hpp"
#include "train/checkpoint.hpp"
#include "train/evaluator.hpp"
#include "train/instruction_data.hpp"
#include "train/instruction_packing.hpp"
#include "train/objective.hpp"
#include "train/trainer.hpp"
#include "train/training_data.hpp"
#include "train_fixture.hpp"

using namespace patchbay;
namespace eng = patchbay::engine;
using train::testing::TinySetup;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<std::string> sft_overrides(const std::filesystem::path& folder,
                                       std::vector<std::string> extra = {}) {
  std::vector<std::string> all = {"tokenizer.special_tokens=[\"<|im_start|>\", \"<|im_end|>\"]",
                                  "train.objective=\"sft\"",
                                  "train.sft.template=\"chatml\"",
                                  "train.sft.data=\"" + (folder / "chat.jsonl").string() + "\"",
                                  "train.seq_len=96",
                                  "model.context_length=128",
                                  "model.positional=\"rotary\"",
                                  "model.norm=\"rmsnorm\""};
  all.insert(all.end(), extra.begin(), extra.end());
  return all;
}

train::InstructionExample example_of(std::vector<int32_t> ids, std::vector<uint8_t> assistant) {
  return train::InstructionExample{std::move(ids), std::move(assistant), "hand"};
}

std::vector<int32_t> ints(const eng::Tensor& t) {
  const int32_t* p = t.data<int32_t>();
  return std::vector<int32_t>(p, p + t.numel());
}

// Summed cross-entropy of logits [rows, T, V] against targets [rows, T] i32 over positions
// [begin, begin + len) of row `row` (kIgnoreTarget positions contribute nothing).
eng::Tensor loss_sum(const eng::Tensor& logits, const eng::Tensor& targets, int64_t row,
                     int64_t begin, int64_t len) {
  eng::CrossEntropyOptions sum;
  sum.reduction = eng::LossReduction::kSum;
  const int64_t vocab = logits.size(2);
  const eng::Tensor l =
      eng::reshape(eng::narrow(eng::narrow(logits, 0, row, 1), 1, begin, len), {len, vocab});
  const eng::Tensor t =
      eng::reshape(eng::narrow(eng::narrow(targets, 0, row, 1), 1, begin, len).contiguous(), {len});
  return eng::cross_entropy(l, t, sum);
}

std::map<std::string, std::vector<float>> take_gradients(model::LanguageModel& model) {
  std::map<std::string, std::vector<float>> out;
  for (const model::NamedParameter& p : model.parameters()) {
    eng::Tensor t = p.tensor;
    if (t.grad().defined()) out[p.name] = t.grad().to_vector();
    t.zero_grad();
  }
  return out;
}

}  // namespace

TEST_CASE("sft packing: first-fit rows, L - 1 positions per example, own targets, segments") {
  // Lengths 5, 9, 4, 7, 3 ids take 4, 8, 3, 6, 2 positions; rows of 10: first-fit puts
  // 0 and 2 (4 + 3) then 4 (2) in row 0, 1 in row 1, 3 in row 2.
  std::vector<train::InstructionExample> examples = {
      example_of({10, 11, 12, 13, 14}, {0, 0, 1, 1, 1}),
      example_of({20, 21, 22, 23, 24, 25, 26, 27, 28}, {0, 0, 0, 0, 0, 1, 1, 0, 1}),
      example_of({30, 31, 32, 33}, {0, 1, 1, 1}),
      example_of({40, 41, 42, 43, 44, 45, 46}, {0, 0, 0, 1, 1, 1, 1}),
      example_of({50, 51, 52}, {0, 0, 1})};
  const std::vector<std::vector<int64_t>> rows =
      train::first_fit_rows({0, 1, 2, 3, 4}, examples, 10);
  CHECK(rows == std::vector<std::vector<int64_t>>{{0, 2, 4}, {1}, {3}});

  std::vector<std::vector<const train::InstructionExample*>> packed;
  for (const auto& row : rows) {
    packed.emplace_back();
    for (int64_t i : row) packed.back().push_back(&examples[static_cast<size_t>(i)]);
  }
  const train::Batch b = train::packed_instruction_batch(packed, 10, 99);
  REQUIRE(b.segment_ids.defined());
  const int32_t x = train::kIgnoreTarget;
  // Row 0: [10 11 12 13 | 30 31 32 | 50 51 | pad]; targets only where the next id is the
  // example's own assistant id; the last id of each example (14, 33, 52) is a target, never an
  // input, so nothing predicts the next example's first id.
  CHECK(ints(b.inputs) == std::vector<int32_t>{10, 11, 12, 13, 30, 31, 32, 50, 51, 99,  //
                                               20, 21, 22, 23, 24, 25, 26, 27, 99, 99,  //
                                               40, 41, 42, 43, 44, 45, 99, 99, 99, 99});
  CHECK(ints(b.targets) == std::vector<int32_t>{x, 12, 13, 14, 31, 32, 33, x,  52, x,  //
                                                x, x,  x,  x,  25, 26, x,  28, x,  x,  //
                                                x, x,  43, 44, 45, 46, x,  x,  x,  x});
  CHECK(ints(b.segment_ids) == std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1, 2, 2, 3,  //
                                                    0, 0, 0, 0, 0, 0, 0, 0, 1, 1,  //
                                                    0, 0, 0, 0, 0, 0, 1, 1, 1, 1});
  // Against a plain first-fit scan of the open rows, on 300 examples of 2..11 ids (seeded).
  std::vector<train::InstructionExample> many;
  std::vector<int64_t> many_order;
  uint32_t state = 12345;
  for (int64_t i = 0; i < 300; ++i) {
    state = state * 1664525u + 1013904223u;
    const size_t ids = 2 + (state >> 16) % 10;
    many.push_back(example_of(std::vector<int32_t>(ids, 1), std::vector<uint8_t>(ids, 1)));
    many_order.push_back((i * 7) % 300);  // a permutation of 0..299
  }
  std::vector<std::vector<int64_t>> scan;
  std::vector<int64_t> room;
  for (const int64_t i : many_order) {
    const int64_t length = train::packed_length(many[static_cast<size_t>(i)]);
    size_t r = 0;
    while (r < scan.size() && room[r] < length) ++r;
    if (r == scan.size()) {
      scan.emplace_back();
      room.push_back(16);
    }
    scan[r].push_back(i);
    room[r] -= length;
  }
  CHECK(train::first_fit_rows(many_order, many, 16) == scan);
  CHECK(scan.size() < 150);  // rows of 16 positions hold 1-10-position examples several at once

  // An example that fills a row exactly: no padding segment.
  const train::Batch full = train::packed_instruction_batch({{&examples[1], &examples[4]}}, 10, 99);
  CHECK(ints(full.segment_ids) == std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1});
}

TEST_CASE("sft packing: each conversation gets exactly the loss and gradients it gets alone") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("sft_pack_equal");
  train::testing::write_chat_data(folder);
  const config::ResolvedConfig c =
      setup.config(train::testing::tiny_config_text(folder), sft_overrides(folder));
  train::TrainingData data = train::prepare_training_data(c, setup.registry, setup.lookup);
  const std::vector<train::Conversation> conversations =
      train::read_conversations(folder / "chat.jsonl");
  std::vector<train::InstructionExample> examples;
  for (int i = 0; i < 6; ++i)  // lines 0 and 3 have two turns and a system message
    examples.push_back(train::tokenize_conversation(conversations[static_cast<size_t>(i)],
                                                    eval::builtin_chat_template("chatml"),
                                                    data.tokenizer));
  const int64_t t = 128;  // the two-turn conversations are about 100 ids, the others 50
  examples = train::fit_to_context(std::move(examples), t, train::Overlong::kRefuse).examples;
  std::vector<int64_t> order = {0, 1, 2, 3, 4, 5};
  const std::vector<std::vector<int64_t>> rows = train::first_fit_rows(order, examples, t);
  REQUIRE(rows.size() >= 2);
  REQUIRE(rows.size() < examples.size());  // some row holds several conversations
  std::vector<std::vector<const train::InstructionExample*>> packed_rows;
  for (const auto& row : rows) {
    packed_rows.emplace_back();
    for (int64_t i : row) packed_rows.back().push_back(&examples[static_cast<size_t>(i)]);
  }
  const train::Batch packed = train::packed_instruction_batch(packed_rows, t, 0);

  train::TrainableModel trainable =
      train::build_trainable_model(c, setup.registry, setup.lookup, data.tokenizer.vocab_size());
  model::LanguageModel& model = *trainable.model;
  const eng::Tensor logits = train::forward_batch(model, packed, false).logits;
  // Each conversation's summed loss inside the packed batch; then the whole batch's backward.
  std::vector<double> packed_loss;
  eng::Tensor total;
  for (size_t r = 0; r < rows.size(); ++r) {
    int64_t begin = 0;
    for (const train::InstructionExample* e : packed_rows[r]) {
      const int64_t len = train::packed_length(*e);
      const eng::Tensor l = loss_sum(logits, packed.targets, static_cast<int64_t>(r), begin, len);
      packed_loss.push_back(l.item());
      total = total.defined() ? eng::add(total, l) : l;
      begin += len;
    }
  }
  eng::backward(total);
  const std::map<std::string, std::vector<float>> packed_grads = take_gradients(model);

  std::map<std::string, std::vector<float>> separate_grads;
  size_t k = 0;
  for (size_t r = 0; r < rows.size(); ++r)
    for (const train::InstructionExample* e : packed_rows[r]) {
      CAPTURE(e->ids.size());
      const train::Batch alone = train::instruction_batch({e}, t, 0);  // padded, unpacked
      CHECK_FALSE(alone.segment_ids.defined());
      const eng::Tensor alone_logits = train::forward_batch(model, alone, false).logits;
      const eng::Tensor l = loss_sum(alone_logits, alone.targets, 0, 0, t);
      CHECK(l.item() > 0.1);  // the example carries loss
      CHECK(packed_loss[k] == doctest::Approx(l.item()).epsilon(1e-5));
      eng::backward(l);
      for (const auto& [name, g] : take_gradients(model)) {
        std::vector<float>& sum = separate_grads[name];
        sum.resize(g.size(), 0.0f);
        for (size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
      }
      ++k;
    }
  REQUIRE(k == examples.size());
  REQUIRE(packed_grads.size() == separate_grads.size());
  for (const auto& [name, p] : packed_grads) {
    CAPTURE(name);
    const std::vector<float>& s = separate_grads.at(name);
    REQUIRE(s.size() == p.size());
    double scale = 0, worst = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      scale = std::max(scale, double(std::fabs(s[i])));
      worst = std::max(worst, double(std::fabs(s[i] - p[i])));
    }
    CHECK(scale > 0);
    CHECK(worst <= 1e-5 * scale + 1e-7);
  }
}

TEST_CASE("sft packing through the trainer: segments in every batch, fewer rows, resume exact") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("sft_pack_run");
  train::testing::write_chat_data(folder);
  const std::string text = train::testing::tiny_config_text(folder);
  train::TrainRequest quiet;
  quiet.show_progress = false;
  quiet.print_samples = false;
  int64_t conversations_seen = 0, batches = 0, most_in_a_row = 0;
  train::TrainRequest watch = quiet;
  watch.on_batch = [&](int64_t, int64_t, const train::Batch& b) {
    REQUIRE(b.segment_ids.defined());
    const std::vector<int32_t> seg = ints(b.segment_ids), tgt = ints(b.targets);
    const int64_t rows = b.inputs.size(0), width = b.inputs.size(1);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < width; ++i) {
        const size_t at = static_cast<size_t>(r * width + i);
        if (i > 0) CHECK(seg[at] >= seg[at - 1]);
        const bool last_of_segment = i + 1 == width || seg[at + 1] != seg[at];
        // A segment's last position predicts its own last id (or nothing): never the next
        // segment's first id, which would be the input at i + 1.
        if (last_of_segment && i + 1 < width && tgt[at] != train::kIgnoreTarget)
          CHECK(tgt[at] != ints(b.inputs)[at + 1]);
      }
      // Segments with a target are conversations (the trailing padding has none).
      std::vector<int32_t> with_target;
      for (int64_t i = 0; i < width; ++i) {
        const size_t at = static_cast<size_t>(r * width + i);
        if (tgt[at] != train::kIgnoreTarget &&
            std::find(with_target.begin(), with_target.end(), seg[at]) == with_target.end())
          with_target.push_back(seg[at]);
      }
      conversations_seen += static_cast<int64_t>(with_target.size());
      most_in_a_row = std::max(most_in_a_row, static_cast<int64_t>(with_target.size()));
    }
    ++batches;
  };
  std::vector<std::string> run = sft_overrides(
      folder, {"train.sft.pack_examples=true", "train.max_steps=40", "train.eval_every=40",
               "train.eval_batches=4", "train.checkpoint_every=0", "train.sample_tokens=0",
               "train.out_dir=\"" + (folder / "packed").string() + "\""});
  const train::TrainSummary s =
      train::train_model(setup.config(text, run), setup.registry, setup.lookup, watch);
  REQUIRE(s.steps_done == 40);
  CHECK(batches == 40);
  // 40 steps x 4 packed rows hold more than the 160 conversations unpacked rows would.
  CHECK(conversations_seen > 160);
  CHECK(most_in_a_row >= 2);
  std::vector<nlohmann::json> steps;
  for (const nlohmann::json& r : run::read_metrics(folder / "packed" / "metrics.jsonl"))
    if (!r.contains("val_loss")) steps.push_back(r);
  INFO("train loss " << steps.front()["loss"] << " -> " << steps.back()["loss"]);
  CHECK(steps.back()["loss"].get<double>() < steps.front()["loss"].get<double>() - 1.0);

  // Resume: 6 steps straight against 3 + 3, bit-identical.
  const std::vector<std::string> short_run = {"train.sft.pack_examples=true", "train.max_steps=6",
                                              "train.checkpoint_every=3"};
  train::testing::check_resume_bit_identical(setup, text, sft_overrides(folder, short_run), folder,
                                             quiet);
}

TEST_CASE("sft packing is refused where it cannot be honoured, before the first step") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("sft_pack_refuse");
  train::testing::write_chat_data(folder);
  const std::string text = train::testing::tiny_config_text(folder);
  train::TrainRequest quiet;
  quiet.show_progress = false;
  quiet.print_samples = false;
  int64_t steps_begun = 0;
  quiet.before_step = [&](int64_t, const std::vector<model::NamedParameter>&) { ++steps_begun; };
  // The key: a boolean, false by default.
  const config::ResolvedConfig plain = setup.config(text, sft_overrides(folder));
  CHECK(plain.find("train.sft.pack_examples") != nullptr);
  CHECK(plain.find("train.sft.pack_examples")->value<bool>() == false);
  CHECK(error_of([&] {
          setup.config(text, sft_overrides(folder, {"train.sft.pack_examples=3"}));
        }).find("pack_examples") != std::string::npos);
  // An attention kind without PB_ATTENTION_CAP_PACKED: named, with what to do.
  const std::string linear = error_of([&] {
    train::train_model(setup.config(text, sft_overrides(folder, {"train.sft.pack_examples=true",
                                                                 "model.attention.kind=\"linear\"",
                                                                 "model.positional=\"learned\""})),
                       setup.registry, setup.lookup, quiet);
  });
  CHECK(linear.find("attention 'linear'") != std::string::npos);
  CHECK(linear.find("[train.sft] pack_examples = false") != std::string::npos);
  CHECK(steps_begun == 0);
  // [data] pack_documents is for windows of a prepared corpus; sft's rows are its own.
  const std::string documents = error_of([&] {
    train::train_model(
        setup.config(text, sft_overrides(folder, {"data.pack_documents=true",
                                                  "train.out_dir=\"" +
                                                      (folder / "documents").string() + "\""})),
        setup.registry, setup.lookup, quiet);
  });
  INFO(documents);
  CHECK(documents.find("pack_documents") != std::string::npos);
  CHECK(steps_begun == 0);
}
