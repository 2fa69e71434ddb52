// "seq2seq": supervised sequence-to-sequence training of an encoder-decoder from JSON Lines
// pairs {"source": "...", "target": "..."} ([train.seq2seq] train_file, validation_file).
// The encoder reads the source's ids, the decoder predicts the target's ids followed by "</s>"
// (T5's EOS); the loss falls on target tokens only (seq2seq_batch.hpp). "<pad>" (decoder start
// and padding) and "</s>" are added to [tokenizer] special_tokens before validation.
//
// The pairs are read and encoded once, when the objective is made. Row r of training
// micro-batch (step, micro) takes pair mix(seed, step, micro, r) mod N (with replacement, a
// pure function: resumes draw the same pairs). With [train.seq2seq] group_by_length, pairs are
// read in epochs instead: global row g = (step * accum + micro) * rows + r reads entry g mod N
// of epoch g / N's order, a shuffle seeded by (seed, epoch) cut into megabatches of 50 batches,
// each sorted by length (source + target tokens) longest first (epoch_order.hpp), so a batch
// pads little; still a pure function of (seed, g). Validation batch b takes validation pairs
// b·rows .. b·rows + rows - 1 (mod their count). The data reader's token windows are used only
// for their row count: [data] still names a corpus, which trains the tokenizer (point it at
// the pairs' text).
// Refused, with the file and line: a line that is not an object with string "source" and
// "target", an empty source, a source longer than model.source_context_length or a target
// (with its EOS) longer than model.context_length: long pairs are refused, never truncated.
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "data/split.hpp"
#include "model/encoder_decoder.hpp"
#include "patchbay/component.hpp"
#include "train/epoch_order.hpp"
#include "train/objective.hpp"
#include "train/seq2seq_batch.hpp"
#include "train/train_config.hpp"

namespace patchbay::train {

namespace {

constexpr const char* kPadToken = "<pad>";
constexpr const char* kEosToken = "</s>";

uint64_t pair_mix(std::initializer_list<uint64_t> words) {
  return data::splitmix64_words(0x7365713273657121ull, words);  // "seq2seq!"
}

void declare_seq2seq_section(config::SchemaRegistry& schema) {
  using Field = patchbay::Field;
  config::HostSection section;
  section.path = "train.seq2seq";
  section.summary = "sequence-to-sequence pairs for an encoder-decoder (JSON Lines)";
  section.fields = {
      Field::string("train_file", "\"\"",
                    "JSON Lines of {\"source\": ..., \"target\": ...} to train on (required)"),
      Field::string("validation_file", "\"\"", "JSON Lines pairs for validation (required)"),
      Field::boolean("group_by_length", "false",
                     "read the pairs epoch by epoch, each batch from pairs of similar length "
                     "(shuffled, then sorted within megabatches of 50 batches), so batches pad "
                     "little; false: each row draws a random pair (with replacement)"),
  };
  schema.add_section(std::move(section));
}

void add_seq2seq_defaults(config::ResolvedConfig& config) {
  toml::table& root = config.table();
  if (!root.contains("train")) root.insert("train", toml::table{});
  if (toml::table* train = root["train"].as_table();
      train != nullptr && !train->contains("seq2seq"))
    train->insert("seq2seq", toml::table{});
  add_tokenizer_special_tokens(config, {kPadToken, kEosToken});
}

void check_seq2seq(const config::ResolvedConfig& config) {
  if (model::model_architecture(config) != "encoder_decoder")
    throw Error(ErrorKind::kInvalidArgument,
                "train.objective = \"seq2seq\" gives the model a source (each pair's \"source\"), "
                "but model.architecture is \"single_stack\", which has no encoder to read it; set "
                "model.architecture = \"encoder_decoder\"");
  for (const char* key : {"train.seq2seq.train_file", "train.seq2seq.validation_file"})
    if (config_string(config, key).empty())
      throw Error(ErrorKind::kInvalidArgument,
                  std::string("train.objective = \"seq2seq\" needs ") + key +
                      ": a JSON Lines file of {\"source\": ..., \"target\": ...} pairs");
}

bool group_by_length(const config::ResolvedConfig& config) {
  const toml::node* value = config.find("train.seq2seq.group_by_length");
  return value != nullptr && value->value<bool>().value_or(false);
}

int32_t special_id(const runtime::TokenizerHandle& tokenizer, const std::string& text) {
  for (const runtime::SpecialTokenInfo& s : tokenizer.special_tokens())
    if (s.text == text) return s.id;
  throw Error(ErrorKind::kInvalidArgument,
              "train.objective = \"seq2seq\": the tokenizer has no special token \"" + text +
                  "\" (added to [tokenizer] special_tokens before validation; this tokenizer "
                  "dropped it)");
}

struct PairLimits {
  int64_t source_positions = 0;
  int64_t target_positions = 0;
};

std::vector<Seq2SeqExample> read_pairs(const std::string& path,
                                       const runtime::TokenizerHandle& tokenizer, int32_t eos,
                                       const PairLimits& limits) {
  std::ifstream in(path);
  if (!in)
    throw Error(ErrorKind::kNotFound,
                "train.seq2seq: cannot open " + path + " (a JSON Lines file of pairs)");
  std::vector<Seq2SeqExample> pairs;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string at = path + ":" + std::to_string(number);
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("source") || !j.contains("target") ||
        !j["source"].is_string() || !j["target"].is_string())
      throw Error(ErrorKind::kInvalidArgument,
                  at + ": expected a JSON object with string \"source\" and \"target\"");
    Seq2SeqExample e{tokenizer.encode(j["source"].get<std::string>()),
                     tokenizer.encode(j["target"].get<std::string>())};
    e.target.push_back(eos);
    if (e.source.empty()) throw Error(ErrorKind::kInvalidArgument, at + ": the source is empty");
    if (static_cast<int64_t>(e.source.size()) > limits.source_positions)
      throw Error(ErrorKind::kInvalidArgument,
                  at + ": the source is " + std::to_string(e.source.size()) +
                      " tokens, more than model.source_context_length = " +
                      std::to_string(limits.source_positions) +
                      "; long pairs are refused, not truncated: shorten it or raise the length");
    if (static_cast<int64_t>(e.target.size()) > limits.target_positions)
      throw Error(ErrorKind::kInvalidArgument,
                  at + ": the target is " + std::to_string(e.target.size()) +
                      " tokens with its </s>, more than model.context_length = " +
                      std::to_string(limits.target_positions) +
                      "; long pairs are refused, not truncated: shorten it or raise the length");
    pairs.push_back(std::move(e));
  }
  if (pairs.empty()) throw Error(ErrorKind::kInvalidArgument, path + " holds no pairs");
  return pairs;
}

// How training rows choose their pairs (see the file comment).
struct PairSampling {
  bool group_by_length = false;
  int64_t grad_accum_steps = 1;
};

class Seq2SeqObjective final : public TrainingObjective {
 public:
  Seq2SeqObjective(std::vector<Seq2SeqExample> train, std::vector<Seq2SeqExample> validation,
                   int32_t pad_id, PairSampling sampling)
      : train_(std::move(train)),
        validation_(std::move(validation)),
        pad_id_(pad_id),
        sampling_(sampling) {}

  const std::string& name() const override { return name_; }

  Batch training_batch(const TokenWindows& windows, uint64_t seed, int64_t step,
                       int64_t micro_step) const override {
    if (sampling_.group_by_length)
      return grouped_batch(windows.ids.size(0), seed, step, micro_step);
    std::vector<Seq2SeqExample> rows;
    for (int64_t r = 0; r < windows.ids.size(0); ++r)
      rows.push_back(
          train_[pair_mix({seed, static_cast<uint64_t>(step), static_cast<uint64_t>(micro_step),
                           static_cast<uint64_t>(r)}) %
                 train_.size()]);
    return seq2seq_batch(rows, pad_id_);
  }

  Batch validation_batch(const TokenWindows& windows, int64_t batch_index) const override {
    std::vector<Seq2SeqExample> rows;
    const int64_t n = windows.ids.size(0);
    for (int64_t r = 0; r < n; ++r)
      rows.push_back(validation_[static_cast<size_t>(batch_index * n + r) % validation_.size()]);
    return seq2seq_batch(rows, pad_id_);
  }

  ObjectiveEvaluation evaluate(model::LanguageModel& model, const ValidationWindows& windows,
                               const EvalSettings& settings) const override {
    return evaluate_target_tokens(*this, model, windows, settings);
  }

  // The trainer's samples continue a prompt; an encoder-decoder needs a source instead
  // (`patchbay generate RUN --source`, `eval RUN --test` print its samples).
  bool makes_samples() const override { return false; }

  std::string batch_rule() const override {
    if (sampling_.group_by_length)
      return "seq2seq pairs by length: global row g = (step * accum + micro) * rows + r reads "
             "entry g mod N of epoch g / N's order, a shuffle by (seed, epoch) sorted by length "
             "within megabatches of 50 * rows pairs";
    return "seq2seq pairs: row r takes pair mix(seed, step, micro_step, r) mod N";
  }

 private:
  static constexpr int64_t kBatchesPerMegabatch = 50;  // Hugging Face's LengthGroupedSampler

  Batch grouped_batch(int64_t rows, uint64_t seed, int64_t step, int64_t micro) const {
    const int64_t n = static_cast<int64_t>(train_.size());
    std::vector<Seq2SeqExample> chosen;
    std::lock_guard<std::mutex> lock(order_mutex_);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t g = (step * sampling_.grad_accum_steps + micro) * rows + r;
      const int64_t epoch = g / n;
      if (epoch != order_epoch_ || seed != order_seed_ || order_rows_ != rows) {
        order_ = length_grouped_order(
            shuffled_indices(n, pair_mix({seed, static_cast<uint64_t>(epoch), 0x67726f7570ull})),
            lengths(), kBatchesPerMegabatch * rows);
        order_epoch_ = epoch;
        order_seed_ = seed;
        order_rows_ = rows;
      }
      chosen.push_back(train_[static_cast<size_t>(order_[static_cast<size_t>(g % n)])]);
    }
    return seq2seq_batch(chosen, pad_id_);
  }

  std::vector<int64_t> lengths() const {
    std::vector<int64_t> out;
    out.reserve(train_.size());
    for (const Seq2SeqExample& e : train_)
      out.push_back(static_cast<int64_t>(e.source.size() + e.target.size()));
    return out;
  }

  std::vector<Seq2SeqExample> train_, validation_;
  int32_t pad_id_;
  PairSampling sampling_;
  std::string name_ = "seq2seq";
  // The order of the epoch last read (grouped sampling); training_batch is const and may be
  // called from the trainer's prefetch thread.
  mutable std::mutex order_mutex_;
  mutable std::vector<int64_t> order_;
  mutable int64_t order_epoch_ = -1, order_rows_ = -1;
  mutable uint64_t order_seed_ = 0;
};

}  // namespace

ObjectiveEntry seq2seq_objective_entry() {
  ObjectiveEntry entry;
  entry.name = "seq2seq";
  entry.summary =
      "supervised source -> target pairs from JSON Lines for an encoder-decoder (loss on "
      "target tokens only)";
  entry.declare_options = declare_seq2seq_section;
  entry.add_defaults = add_seq2seq_defaults;
  entry.check = check_seq2seq;
  entry.make = [](const ObjectiveContext& context) -> std::unique_ptr<TrainingObjective> {
    const model::EncoderDecoderOptions shape =
        model::encoder_decoder_options_from_config(context.config, 1);
    const PairLimits limits{shape.source_context_length, shape.base.context_length};
    const int32_t pad = special_id(context.tokenizer, kPadToken);
    const int32_t eos = special_id(context.tokenizer, kEosToken);
    return std::make_unique<Seq2SeqObjective>(
        read_pairs(config_string(context.config, "train.seq2seq.train_file"), context.tokenizer,
                   eos, limits),
        read_pairs(config_string(context.config, "train.seq2seq.validation_file"),
                   context.tokenizer, eos, limits),
        pad, PairSampling{group_by_length(context.config), context.options.grad_accum_steps});
  };
  return entry;
}

}  // namespace patchbay::train
