// The training objective as one seam: what a run learns to predict, separate from the loop
// that trains it. The trainer (trainer.cpp) holds a `TrainingObjective` made by
// make_objective() from the config's `train.objective` name and never branches on which one
// it is. Each objective lives in its own file (objective_clm.cpp: next-token prediction,
// objective_mlm.cpp: BERT masked-token prediction) and is listed once in objective.cpp's
// table (README.md in this folder: "Adding an objective").
//
// What an objective decides:
//   - how a batch is made from the data: the data reader cuts windows of seq_len + 1
//     consecutive ids (TokenWindows; which windows — random, epochs, documents, mixtures — is
//     the reader's business); the objective turns them into model inputs and targets;
//   - which positions carry loss: every target other than kIgnoreTarget. The trainer's loss
//     is the mean cross-entropy over those positions (engine::cross_entropy's ignore_index);
//   - what evaluation reports: loss / perplexity / bits per byte over the positions that carry
//     loss, plus its own fields for metrics.jsonl and a log line;
//   - whether samples make sense (a bidirectional model does not continue text);
//   - its config: options declared into the training schema, defaults added before
//     validation, and checks after it (objective and model kind agree, rates add up).
// Determinism: training_batch must be a pure function of (windows, seed, step, micro_step)
// and validation_batch of (windows, batch_index), so a resumed run, or one on another number
// of ranks, makes exactly the batches an uninterrupted one makes. The whole global batch is
// made on every rank; the trainer then keeps each rank's rows.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config_document.hpp"
#include "config/schema_registry.hpp"
#include "model/language_model.hpp"
#include "runtime/component_instance.hpp"
#include "train/batches.hpp"
#include "train/evaluator.hpp"
#include "train/train_config.hpp"

namespace patchbay::train {

// A target that carries no loss (engine::CrossEntropyOptions' default ignore_index).
inline constexpr int32_t kIgnoreTarget = -100;

// Validation windows by batch index (the data reader's fixed windows, batches.hpp).
using ValidationWindows = std::function<TokenWindows(int64_t batch_index)>;

// What evaluation reports for one pass over the validation windows.
struct ObjectiveEvaluation {
  EvalResult eval;  // over the positions that carry loss (special-token targets excluded)
  nlohmann::json extra = nlohmann::json::object();  // its own metrics.jsonl fields
  std::string summary;                              // a log line of those fields ("" for none)
  std::string target_unit = "token";  // what eval.tokens counts ("masked token"), for messages
};

// What an objective is made from: the validated config, its typed [train] options and the
// run's tokenizer (special-token ids, vocabulary size).
struct ObjectiveContext {
  const config::ResolvedConfig& config;
  const TrainOptions& options;
  const runtime::TokenizerHandle& tokenizer;
};

class TrainingObjective {
 public:
  virtual ~TrainingObjective() = default;

  // The config's name for it ("clm", "mlm"); metrics and checkpoints record it.
  virtual const std::string& name() const = 0;

  // Training micro-batch (step, micro_step) from its windows [rows, T + 1]: inputs and targets
  // [rows, T] i32, targets kIgnoreTarget where no loss is taken. `seed` is the run seed.
  virtual Batch training_batch(const TokenWindows& windows, uint64_t seed, int64_t step,
                               int64_t micro_step) const = 0;

  // Validation batch `batch_index` from its windows; independent of the run seed, so every
  // checkpoint of every run is scored on the same batches.
  virtual Batch validation_batch(const TokenWindows& windows, int64_t batch_index) const = 0;

  // Scores `settings.batches` validation batches without gradients, dropout off.
  virtual ObjectiveEvaluation evaluate(model::LanguageModel& model,
                                       const ValidationWindows& windows,
                                       const EvalSettings& settings) const = 0;

  // Whether a text sample continuing a prompt means anything for a model trained so (and so
  // whether left-to-right log-likelihoods do: patchbay generate and eval --tasks ask this).
  virtual bool makes_samples() const = 0;

  // One line for checkpoints' RNG metadata: how batches are made from the windows.
  virtual std::string batch_rule() const = 0;

  // Whether its batches carry the windows' segment ids (TokenWindows::segment_ids into
  // Batch::segment_ids), so that [data] pack_documents keeps documents apart. An objective
  // that packs several examples per row itself sets Batch::segment_ids whatever this says.
  virtual bool packs_segments() const { return false; }

  // Whether its training batches pack several examples per row themselves (Batch::segment_ids
  // set by the objective: sft with [train.sft] pack_examples). The trainer then asks the model
  // up front to honour segments (LanguageModel::require_packing), refusing a layer that cannot
  // before the first step rather than at it.
  virtual bool packs_examples() const { return false; }
};

// One objective as the table in objective.cpp lists it.
struct ObjectiveEntry {
  std::string name;     // train.objective value
  std::string summary;  // one line, for messages and docs
  // Adds the objective's own config sections to the training schema ([train.mlm]); may be
  // empty. Called for every listed objective (their sections are valid whichever is chosen).
  std::function<void(config::SchemaRegistry&)> declare_options;
  // Before validation, when this objective is chosen: adds empty tables so apply_defaults
  // writes its defaults into the resolved config; may be empty.
  std::function<void(config::ResolvedConfig&)> add_defaults;
  // After validation (defaults applied), when chosen: throws Error(kInvalidArgument) naming
  // the keys when the config does not suit it (model kind, rates); may be empty.
  std::function<void(const config::ResolvedConfig&)> check;
  std::function<std::unique_ptr<TrainingObjective>(const ObjectiveContext&)> make;
};

// Every objective, in table order.
const std::vector<ObjectiveEntry>& objective_entries();

// The entry named `name`; throws Error(kInvalidArgument) listing the names on offer.
const ObjectiveEntry& find_objective(const std::string& name);

// train.objective of a config ("clm" when the key is absent).
std::string objective_name(const config::ResolvedConfig& config);

// The chosen objective for a validated config and the run's tokenizer.
std::unique_ptr<TrainingObjective> make_objective(const config::ResolvedConfig& config,
                                                  const TrainOptions& options,
                                                  const runtime::TokenizerHandle& tokenizer);

// Evaluation over the target tokens of `objective`'s validation batches, with its name in
// metrics.jsonl's "objective" field (the encoder-decoder objectives' evaluate()).
ObjectiveEvaluation evaluate_target_tokens(const TrainingObjective& objective,
                                           model::LanguageModel& model,
                                           const ValidationWindows& windows,
                                           const EvalSettings& settings);

// model.architecture = "encoder_decoder" refused by an objective without a source (clm, mlm).
void refuse_encoder_decoder(const config::ResolvedConfig& config, const std::string& objective);

// For an objective's add_defaults: appends `texts` (those not listed yet) to [tokenizer]
// special_tokens, starting from the built-in tokenizers' default ["<|endoftext|>"] when the
// key is absent. Malformed tables are left for validation to report.
void add_tokenizer_special_tokens(config::ResolvedConfig& config,
                                  const std::vector<std::string>& texts);

// The table's entries (each defined in its objective's file).
ObjectiveEntry causal_lm_objective_entry();
ObjectiveEntry masked_lm_objective_entry();
ObjectiveEntry instruction_objective_entry();
ObjectiveEntry span_corruption_objective_entry();
ObjectiveEntry seq2seq_objective_entry();

}  // namespace patchbay::train
