// The masked-language-model objective, train.objective = "mlm" (objective.hpp is the seam;
// objective_clm.cpp the default next-token one):
//   "mlm":           BERT's masked-token prediction (Devlin et al. 2019, §3.1, A.1) for a
//                    bidirectional model (model.causal = false). The batch's window of T ids is
//                    corrupted by mask_tokens (mlm_masking.hpp, rates in [train.mlm]); the
//                    targets are the original ids at the selected positions and ignore_index
//                    (-100) elsewhere, so the mean cross-entropy the trainer computes is the
//                    loss over the selected positions only. The mask token is one of the
//                    tokenizer's special tokens ([train.mlm] mask_token, listed in
//                    [tokenizer] special_tokens); no special token is ever selected or used as a
//                    random replacement.
// Each objective requires its model kind: mlm with a causal model is refused by this entry's
// check (clm with a bidirectional one by objective_clm.cpp's), with what to change.
//
// Masking is counter-based like the batches: training micro-batch (step, micro) is masked
// with mlm_training_seed(run seed, step, micro), so a resumed run masks exactly as an
// uninterrupted one; validation batch i is masked with mlm_validation_seed(i) whatever the run
// seed, so every checkpoint of every run is scored on the same masked positions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "config/config_document.hpp"
#include "data/token_cache.hpp"
#include "engine/tensor.hpp"
#include "model/language_model.hpp"
#include "runtime/component_instance.hpp"
#include "train/batches.hpp"
#include "train/evaluator.hpp"
#include "train/mlm_masking.hpp"
#include "train/objective.hpp"

namespace patchbay::train {

struct MlmObjective {
  MlmMaskingOptions masking;           // select / mask / random rates, ignore_index -100
  std::string mask_token;              // its text ("<|mask|>")
  int32_t mask_id = -1;                // its id in the tokenizer
  std::vector<int32_t> protected_ids;  // every special token's id (never selected or drawn)
  int64_t vocab_size = 0;
};

// [train.mlm] of a validated config with the tokenizer's ids. Throws Error(kInvalidArgument)
// when the mask token is not one of the tokenizer's special tokens, saying how to add it.
MlmObjective mlm_objective_from_config(const config::ResolvedConfig& config,
                                       const runtime::TokenizerHandle& tokenizer);

// Masking seeds (see the top of the file); splitmix64 chains, distinct streams.
uint64_t mlm_training_seed(uint64_t run_seed, int64_t step, int64_t micro_step);
uint64_t mlm_validation_seed(int64_t batch_index);

// The masked-LM batch of a causal batch: its inputs [rows, T] are the window (its targets are
// not used). Returns inputs [rows, T] i32 (corrupted) and targets [rows, T] i32 (original id at
// the selected positions, ignore_index elsewhere). A draw that selects no position (possible
// for tiny batches) is redrawn from the next seed, so the mean loss is always defined; a batch
// of special tokens only is Error(kInvalidArgument).
Batch mask_batch(const Batch& batch, const MlmObjective& objective, uint64_t seed);

// Sum of the target losses, number of counted (non-ignored) targets, and how many of them
// the logits' argmax predicts (ties: the lowest id). logits [N, V] float, targets [N] integer.
struct MaskedScore {
  double loss_sum = 0;
  int64_t counted = 0;
  int64_t correct = 0;
};
MaskedScore score_masked(const engine::Tensor& logits, const engine::Tensor& targets,
                         int64_t ignore_index = -100);

struct MlmEvalResult {
  EvalResult eval;      // loss / perplexity / bits per byte over the masked targets only
  int64_t correct = 0;  // masked targets whose argmax prediction is the original token
  double accuracy = 0;  // correct / eval.tokens
};

// Masked-token loss and accuracy on `settings.batches` fixed validation windows (as
// evaluate(): no gradients, dropout off), each masked with mlm_validation_seed(its index).
// Every selected position counts (mask token, random and unchanged inputs alike, as BERT's
// masked-LM accuracy); bits per byte divide by the bytes of those targets.
MlmEvalResult evaluate_mlm(model::LanguageModel& model, const data::TokenSource& split,
                           const EvalSettings& settings, const MlmObjective& objective);

// The same over any `settings.batches` masked batches, batch b from batch_at(b).
MlmEvalResult evaluate_masked_batches(model::LanguageModel& model,
                                      const std::function<Batch(int64_t batch_index)>& batch_at,
                                      const EvalSettings& settings, int64_t ignore_index);

}  // namespace patchbay::train
