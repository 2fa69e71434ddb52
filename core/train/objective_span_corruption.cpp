// "span_corruption": T5's pretraining objective (span_corruption.hpp) for an encoder-decoder
// (model.architecture = "encoder_decoder"). Each row of a micro-batch takes the T tokens
// window[0, T) and is corrupted with its own seed: the encoder reads the tokens with each
// noise span replaced by one sentinel, the decoder predicts the spans after their sentinels.
//
//   Batch.source          [rows, S] the corrupted inputs, S = the longest in the batch
//   Batch.source_padding  [rows, S] 1 on tokens, 0 on padding (the pad token's id)
//   Batch.inputs          [rows, L] decoder inputs: <pad> (T5's decoder start), targets[0, L-1)
//   Batch.targets         [rows, L] the corrupted targets, kIgnoreTarget on padding
//   Batch.target_padding  [rows, L]
//
// Sentinels are special tokens: before validation the objective appends "<pad>" and
// "<extra_id_{n-1}>" .. "<extra_id_0>" (n = train.span_corruption.sentinels) to [tokenizer]
// special_tokens (starting from the built-in tokenizers' default ["<|endoftext|>"] when the
// key is absent), so <extra_id_0> has the highest id and <extra_id_k> = <extra_id_0> - k, as
// T5 numbers them from the top of its vocabulary. Seeds: row r of training micro-batch
// (step, micro) uses mix(seed, step, micro, r); validation batch b mix(b, r): pure functions,
// so a resume draws the same spans. Evaluation is the mean cross-entropy over the target
// tokens that stand for text (sentinels, like every special token, are left out of the loss
// and the bytes: evaluator.hpp).
#include <algorithm>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "data/split.hpp"
#include "model/encoder_decoder.hpp"
#include "patchbay/component.hpp"
#include "train/objective.hpp"
#include "train/seq2seq_batch.hpp"
#include "train/span_corruption.hpp"
#include "train/train_config.hpp"

namespace patchbay::train {

namespace {

constexpr const char* kPadToken = "<pad>";
constexpr int64_t kDefaultSentinels = 100;

std::string sentinel_text(int64_t k) { return "<extra_id_" + std::to_string(k) + ">"; }

uint64_t span_mix(std::initializer_list<uint64_t> words) {
  return data::splitmix64_words(0x7370616e5f636f72ull, words);  // "span_cor"
}

void declare_span_corruption_section(config::SchemaRegistry& schema) {
  using Field = patchbay::Field;
  config::HostSection section;
  section.path = "train.span_corruption";
  section.summary = "T5 span corruption: noise density, mean span length, sentinel tokens";
  section.fields = {
      Field::real("noise_density", "0.15", "fraction of each window's tokens dropped (T5: 0.15)")
          .range(0.01, 0.9),
      Field::real("mean_noise_span_length", "3.0", "mean length of a dropped span (T5: 3)")
          .range(1.0, 1000.0),
      Field::integer("sentinels", "100",
                     "sentinel special tokens <extra_id_0> .. added to the tokenizer (T5: 100); "
                     "a window with more noise spans than this is refused")
          .range(1, 10000),
  };
  schema.add_section(std::move(section));
}

// Before validation: [train.span_corruption] (defaults written into the resolved config) and
// the pad and sentinel tokens appended to [tokenizer] special_tokens.
void add_span_corruption_defaults(config::ResolvedConfig& config) {
  toml::table& root = config.table();
  if (!root.contains("train")) root.insert("train", toml::table{});
  toml::table* train = root["train"].as_table();
  if (train == nullptr) return;  // validation reports the malformed table
  if (!train->contains("span_corruption")) train->insert("span_corruption", toml::table{});
  int64_t sentinels = kDefaultSentinels;
  if (const auto given = (*train)["span_corruption"]["sentinels"].value<int64_t>())
    sentinels = *given;
  if (sentinels < 1 || sentinels > 10000) return;  // validation reports the range
  std::vector<std::string> added = {kPadToken};
  for (int64_t k = sentinels - 1; k >= 0; --k) added.push_back(sentinel_text(k));
  add_tokenizer_special_tokens(config, added);
}

void check_span_corruption(const config::ResolvedConfig& config) {
  if (model::model_architecture(config) != "encoder_decoder") {
    const std::string location = config.locate("train.objective").to_string();
    throw Error(ErrorKind::kInvalidArgument,
                "train.objective = \"span_corruption\"" +
                    (location.empty() ? std::string() : " (" + location + ")") +
                    " gives the model a source (the corrupted text) and a target (the dropped "
                    "spans), but model.architecture is \"single_stack\", which has no encoder "
                    "to read a source; set model.architecture = \"encoder_decoder\" (with "
                    "positional = \"t5_relative\"), or train.objective = \"clm\"");
  }
}

struct SpanCorruptionSetup {
  SpanCorruptionOptions corruption;
  int32_t pad_id = -1;
};

SpanCorruptionSetup setup_from_config(const ObjectiveContext& context) {
  SpanCorruptionSetup s;
  s.corruption.noise_density = config_real(context.config, "train.span_corruption.noise_density");
  s.corruption.mean_noise_span_length =
      config_real(context.config, "train.span_corruption.mean_noise_span_length");
  const int64_t sentinels = config_int(context.config, "train.span_corruption.sentinels");
  s.corruption.sentinel_count = static_cast<int32_t>(sentinels);
  std::vector<int32_t> sentinel_ids(static_cast<size_t>(sentinels), -1);
  for (const runtime::SpecialTokenInfo& t : context.tokenizer.special_tokens()) {
    if (t.text == kPadToken) s.pad_id = t.id;
    for (int64_t k = 0; k < sentinels; ++k)
      if (t.text == sentinel_text(k)) sentinel_ids[static_cast<size_t>(k)] = t.id;
  }
  const std::string kind = config_string(context.config, "tokenizer.kind");
  if (s.pad_id < 0)
    throw Error(ErrorKind::kInvalidArgument,
                "train.objective = \"span_corruption\": the tokenizer '" + kind +
                    "' has no special token \"<pad>\" (the decoder's start and padding token); "
                    "it is added to [tokenizer] special_tokens before validation, so this "
                    "tokenizer dropped it");
  for (int64_t k = 0; k < sentinels; ++k)
    if (sentinel_ids[static_cast<size_t>(k)] != sentinel_ids[0] - static_cast<int32_t>(k))
      throw Error(ErrorKind::kInvalidArgument,
                  "train.objective = \"span_corruption\": the tokenizer '" + kind + "' gave " +
                      sentinel_text(k) + " the id " +
                      std::to_string(sentinel_ids[static_cast<size_t>(k)]) + ", expected " +
                      std::to_string(sentinel_ids[0] - k) +
                      " (sentinels descend from <extra_id_0> in consecutive ids, as T5's); "
                      "list them in that order in [tokenizer] special_tokens");
  s.corruption.sentinel_top_id = sentinel_ids[0];
  return s;
}

class SpanCorruptionObjective final : public TrainingObjective {
 public:
  explicit SpanCorruptionObjective(SpanCorruptionSetup setup) : setup_(setup) {}

  const std::string& name() const override { return name_; }

  Batch training_batch(const TokenWindows& windows, uint64_t seed, int64_t step,
                       int64_t micro_step) const override {
    return corrupt(windows, [&](int64_t row) {
      return span_mix({seed, 0x747261696eull, static_cast<uint64_t>(step),
                       static_cast<uint64_t>(micro_step), static_cast<uint64_t>(row)});
    });
  }

  Batch validation_batch(const TokenWindows& windows, int64_t batch_index) const override {
    return corrupt(windows, [&](int64_t row) {
      return span_mix(
          {0x76616cull, static_cast<uint64_t>(batch_index), static_cast<uint64_t>(row)});
    });
  }

  ObjectiveEvaluation evaluate(model::LanguageModel& model, const ValidationWindows& windows,
                               const EvalSettings& settings) const override {
    return evaluate_target_tokens(*this, model, windows, settings);
  }

  // The trainer's samples continue a prompt; an encoder-decoder needs a source instead
  // (`patchbay generate RUN --source`, `eval RUN --test` print its samples).
  bool makes_samples() const override { return false; }

  std::string batch_rule() const override {
    return "T5 span corruption of window[0, T), row seeds mix(seed, step, micro_step, row)";
  }

 private:
  template <typename SeedOf>
  Batch corrupt(const TokenWindows& windows, SeedOf seed_of) const {
    const engine::Tensor ids = windows.ids.contiguous().to(engine::DType::kI32);
    const int64_t rows = ids.size(0), t = ids.size(1) - 1;
    const int32_t* data = ids.data<int32_t>();
    std::vector<Seq2SeqExample> examples;
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<int32_t> tokens(data + r * (t + 1), data + r * (t + 1) + t);
      SpanCorruptedExample e = span_corrupt(tokens, setup_.corruption, seed_of(r));
      examples.push_back({std::move(e.inputs), std::move(e.targets)});
    }
    return seq2seq_batch(examples, setup_.pad_id);
  }

  SpanCorruptionSetup setup_;
  std::string name_ = "span_corruption";
};

}  // namespace

ObjectiveEntry span_corruption_objective_entry() {
  ObjectiveEntry entry;
  entry.name = "span_corruption";
  entry.summary =
      "T5 span corruption of an encoder-decoder (model.architecture = \"encoder_decoder\")";
  entry.declare_options = declare_span_corruption_section;
  entry.add_defaults = add_span_corruption_defaults;
  entry.check = check_span_corruption;
  entry.make = [](const ObjectiveContext& context) -> std::unique_ptr<TrainingObjective> {
    return std::make_unique<SpanCorruptionObjective>(setup_from_config(context));
  };
  return entry;
}

}  // namespace patchbay::train
