// The training objective and the masked-LM batches and evaluation; see objective_mlm.hpp.
#include "train/objective_mlm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "common/error.hpp"
#include "data/split.hpp"
#include "engine/ops.hpp"
#include "patchbay/component.hpp"
#include "train/train_config.hpp"
#include "train/training_data.hpp"

namespace patchbay::train {

namespace {

// " (set at configs/x.toml:12)", or "" when the key has no recorded source.
std::string where(const config::ResolvedConfig& config, const std::string& key) {
  const std::string location = config.locate(key).to_string();
  return location.empty() ? "" : " (" + key + " set at " + location + ")";
}

bool config_bool(const config::ResolvedConfig& config, const std::string& key, bool fallback) {
  const toml::node* node = config.find(key);
  return node != nullptr && node->is_boolean() ? node->as_boolean()->get() : fallback;
}

// A chain of splitmix64 rounds over the words (as batches.cpp mixes its counters).
uint64_t mix(std::initializer_list<uint64_t> words) {
  return data::splitmix64_words(0x6d6c6d5f6d61736bull, words);  // "mlm_mask"
}

}  // namespace

MlmObjective mlm_objective_from_config(const config::ResolvedConfig& config,
                                       const runtime::TokenizerHandle& tokenizer) {
  MlmObjective o;
  o.masking.select_rate = config_real(config, "train.mlm.select_rate");
  o.masking.mask_rate = config_real(config, "train.mlm.mask_rate");
  o.masking.random_rate = config_real(config, "train.mlm.random_rate");
  o.mask_token = config_string(config, "train.mlm.mask_token");
  o.vocab_size = tokenizer.vocab_size();
  std::string listed;
  for (const runtime::SpecialTokenInfo& s : tokenizer.special_tokens()) {
    o.protected_ids.push_back(s.id);
    listed += (listed.empty() ? "\"" : ", \"") + s.text + "\"";
    if (s.text == o.mask_token) o.mask_id = s.id;
  }
  if (o.mask_id < 0)
    throw Error(
        ErrorKind::kInvalidArgument,
        "train.mlm.mask_token \"" + o.mask_token + "\" is not a special token of the tokenizer '" +
            config_string(config, "tokenizer.kind") + "' (its special tokens: " +
            (listed.empty() ? "none" : listed) + "). Add it to [tokenizer] special_tokens, e.g. " +
            "special_tokens = [" + (listed.empty() ? "" : listed + ", ") + "\"" + o.mask_token +
            "\"] (the tokenizer is trained again with it), or name one of those in mask_token");
  return o;
}

uint64_t mlm_training_seed(uint64_t run_seed, int64_t step, int64_t micro_step) {
  return mix({run_seed, 0x747261696eull /* "train" */, static_cast<uint64_t>(step),
              static_cast<uint64_t>(micro_step)});
}

uint64_t mlm_validation_seed(int64_t batch_index) {
  return mix({0x76616cull /* "val" */, static_cast<uint64_t>(batch_index)});
}

Batch mask_batch(const Batch& batch, const MlmObjective& objective, uint64_t seed) {
  const engine::Tensor window = batch.inputs.contiguous().to(engine::DType::kI32);
  const int32_t* ids = window.data<int32_t>();
  const std::vector<int32_t> tokens(ids, ids + window.numel());
  MlmMaskedBatch masked;
  // A draw selects nothing with probability (1 - select_rate)^n: redraw from the next seed.
  for (uint64_t attempt = 0; attempt < 64; ++attempt) {
    masked = mask_tokens(tokens, objective.vocab_size, objective.mask_id, objective.protected_ids,
                         objective.masking, attempt == 0 ? seed : data::splitmix64(seed + attempt));
    if (masked.selected > 0) break;
  }
  if (masked.selected == 0)
    throw Error(
        ErrorKind::kInvalidArgument,
        "masked-LM batch of " + std::to_string(tokens.size()) +
            " ids has no position to predict (all special tokens, or train.mlm.select_rate too "
            "small for train.batch_size x train.seq_len)");
  std::vector<int32_t> targets(masked.targets.begin(),
                               masked.targets.end());  // ids and -100 fit i32
  return Batch{engine::Tensor::from_data(masked.inputs.data(), window.shape(), engine::DType::kI32),
               engine::Tensor::from_data(targets.data(), window.shape(), engine::DType::kI32),
               engine::Tensor()};
}

MaskedScore score_masked(const engine::Tensor& logits, const engine::Tensor& targets,
                         int64_t ignore_index) {
  if (logits.dim() != 2 || targets.numel() != logits.size(0))
    throw Error(ErrorKind::kInvalidArgument,
                "score_masked: expected logits [N, V] and targets [N], found " + logits.str() +
                    " and " + targets.str());
  engine::NoGradGuard no_grad;
  engine::CrossEntropyOptions sum;
  sum.reduction = engine::LossReduction::kSum;
  sum.ignore_index = ignore_index;
  const engine::Tensor flat_targets = targets.reshape({-1}).contiguous().to(engine::DType::kI32);
  MaskedScore score;
  score.loss_sum = engine::cross_entropy(logits, flat_targets.to(logits.device()), sum).item();
  // Accuracy on the host (one copy of a device's logits: an evaluation reads values anyway).
  const engine::Tensor values = logits.to(engine::DType::kF32).to(engine::cpu()).contiguous();
  const engine::Tensor host_targets = flat_targets.to(engine::cpu());
  const float* z = values.data<float>();
  const int32_t* t = host_targets.data<int32_t>();
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  for (int64_t r = 0; r < rows; ++r) {
    if (t[r] == ignore_index) continue;
    ++score.counted;
    const float* row = z + r * vocab;
    score.correct += (std::max_element(row, row + vocab) - row) == t[r];
  }
  return score;
}

MlmEvalResult evaluate_mlm(model::LanguageModel& model, const data::TokenSource& split,
                           const EvalSettings& settings, const MlmObjective& objective) {
  return evaluate_masked_batches(
      model,
      [&](int64_t b) {
        const Batch window =
            validation_batch(split, b, settings.batches, settings.batch_size, settings.seq_len);
        return mask_batch(window, objective, mlm_validation_seed(b));
      },
      settings, objective.masking.ignore_index);
}

MlmEvalResult evaluate_masked_batches(model::LanguageModel& model,
                                      const std::function<Batch(int64_t batch_index)>& batch_at,
                                      const EvalSettings& settings, int64_t ignore_index) {
  if (settings.token_bytes == nullptr)
    throw Error(ErrorKind::kInternal,
                "evaluate_mlm: EvalSettings::token_bytes is required (train::token_bytes)");
  const TokenBytes& table = *settings.token_bytes;
  engine::NoGradGuard no_grad;
  MaskedScore total;
  int64_t bytes = 0;
  LayerStats stats;
  for (int64_t b = 0; b < settings.batches; ++b) {
    const Batch batch = batch_at(b);
    const model::ForwardResult out = forward_batch(model, batch, /*training=*/false);
    const int64_t vocab = out.logits.size(-1);
    const MaskedScore score =
        score_masked(out.logits.reshape({-1, vocab}), batch.targets, ignore_index);
    total.loss_sum += score.loss_sum;
    total.counted += score.counted;
    total.correct += score.correct;
    const int32_t* t = batch.targets.data<int32_t>();
    for (int64_t i = 0; i < batch.targets.numel(); ++i)
      if (t[i] != ignore_index && t[i] < static_cast<int64_t>(table.bytes.size()))
        bytes += table.bytes[static_cast<size_t>(t[i])];
    stats.add(out.stats);
  }
  MlmEvalResult result;
  result.eval.layer_stats = std::move(stats);
  result.eval.tokens = total.counted;
  result.eval.bytes = bytes;
  result.eval.loss =
      total.counted > 0 ? total.loss_sum / static_cast<double>(total.counted) : std::nan("");
  result.eval.perplexity = std::exp(result.eval.loss);
  result.eval.bits_per_byte = bits_per_byte(result.eval.loss, static_cast<uint64_t>(total.counted),
                                            static_cast<uint64_t>(bytes));
  result.correct = total.correct;
  result.accuracy = total.counted > 0
                        ? static_cast<double>(total.correct) / static_cast<double>(total.counted)
                        : std::nan("");
  return result;
}

namespace {

// [train.mlm]: BERT masking (Devlin et al. 2019, A.1). Declared whichever objective is chosen
// (a config may keep the table while training "clm"); read only by "mlm".
void declare_mlm_section(config::SchemaRegistry& schema) {
  using Field = patchbay::Field;
  config::HostSection section;
  section.path = "train.mlm";
  section.summary =
      "masked-LM objective: which positions are predicted and how their inputs are corrupted";
  section.fields = {
      Field::real("select_rate", "0.15", "fraction of positions predicted (special tokens never)")
          .range(1e-6, 1.0),
      Field::real("mask_rate", "0.8",
                  "of the predicted positions: input replaced by the mask token")
          .range(0.0, 1.0),
      Field::real("random_rate", "0.1",
                  "of the predicted positions: input replaced by a random ordinary token "
                  "(the rest, 1 - mask_rate - random_rate, keep their token)")
          .range(0.0, 1.0),
      Field::string("mask_token", "\"<|mask|>\"",
                    "text of the mask token; must be one of the tokenizer's special tokens "
                    "([tokenizer] special_tokens)"),
  };
  schema.add_section(std::move(section));
}

// Before validation: an empty [train.mlm] table, so apply_defaults writes its defaults into
// the resolved config (what runs store).
void add_mlm_defaults(config::ResolvedConfig& config) {
  toml::table* train = config.table()["train"].as_table();
  if (train != nullptr && !train->contains("mlm")) train->insert("mlm", toml::table{});
}

// After validation: a bidirectional model, and rates that split the selected positions.
void check_mlm(const config::ResolvedConfig& config) {
  refuse_encoder_decoder(config, "mlm");
  if (config_bool(config, "model.causal", true))
    throw Error(
        ErrorKind::kInvalidArgument,
        "train.objective = \"mlm\" needs a bidirectional model, but model.causal is true: a causal "
        "model would predict each masked token from its left context only. Set model.causal = "
        "false (and causal = false in the attention's table, e.g. [model.attention.dense]), or "
        "train.objective = \"clm\" for a causal LM" +
            where(config, "train.objective"));
  const double mask_rate = config_real(config, "train.mlm.mask_rate");
  const double random_rate = config_real(config, "train.mlm.random_rate");
  if (mask_rate + random_rate > 1.0 + 1e-12)
    throw Error(ErrorKind::kInvalidArgument,
                "train.mlm.mask_rate + train.mlm.random_rate = " + std::to_string(mask_rate) +
                    " + " + std::to_string(random_rate) +
                    " exceeds 1: they split the selected positions (the rest keep their token); "
                    "lower one of them" +
                    where(config, "train.mlm.mask_rate"));
}

// The objective.hpp face of the functions above: training micro-batches masked with
// mlm_training_seed(seed, step, micro), validation batches with mlm_validation_seed(index);
// evaluation adds val_accuracy and "objective": "mlm"; no samples.
class MaskedLmObjective final : public TrainingObjective {
 public:
  explicit MaskedLmObjective(MlmObjective mlm) : mlm_(std::move(mlm)) {}

  const std::string& name() const override { return name_; }

  Batch training_batch(const TokenWindows& windows, uint64_t seed, int64_t step,
                       int64_t micro_step) const override {
    return mask_batch(causal_batch(windows), mlm_, mlm_training_seed(seed, step, micro_step));
  }

  Batch validation_batch(const TokenWindows& windows, int64_t batch_index) const override {
    return mask_batch(causal_batch(windows), mlm_, mlm_validation_seed(batch_index));
  }

  ObjectiveEvaluation evaluate(model::LanguageModel& model, const ValidationWindows& windows,
                               const EvalSettings& settings) const override {
    const MlmEvalResult masked = evaluate_masked_batches(
        model, [&](int64_t b) { return validation_batch(windows(b), b); }, settings,
        mlm_.masking.ignore_index);
    ObjectiveEvaluation result;
    result.eval = masked.eval;  // val_loss, val_tokens and val_bytes are the masked targets'
    result.extra = {{"val_accuracy", masked.accuracy}, {"objective", name_}};
    char summary[128];
    std::snprintf(summary, sizeof summary, "masked-token accuracy: %.4f (%lld of %lld)",
                  masked.accuracy, static_cast<long long>(masked.correct),
                  static_cast<long long>(masked.eval.tokens));
    result.summary = summary;
    result.target_unit = "masked token";
    return result;
  }

  bool makes_samples() const override { return false; }  // a bidirectional model

  std::string batch_rule() const override {
    return "BERT masks of window[0, T) from mlm_training_seed(seed, step, micro_step)";
  }

 private:
  MlmObjective mlm_;
  std::string name_ = "mlm";
};

}  // namespace

ObjectiveEntry masked_lm_objective_entry() {
  ObjectiveEntry entry;
  entry.name = "mlm";
  entry.summary = "BERT masked-token prediction of a bidirectional model (model.causal = false)";
  entry.declare_options = declare_mlm_section;
  entry.add_defaults = add_mlm_defaults;
  entry.check = check_mlm;
  entry.make = [](const ObjectiveContext& context) -> std::unique_ptr<TrainingObjective> {
    return std::make_unique<MaskedLmObjective>(
        mlm_objective_from_config(context.config, context.tokenizer));
  };
  return entry;
}

}  // namespace patchbay::train
