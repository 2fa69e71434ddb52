// Evaluation of a language model on a token cache (validation loss, perplexity, bits per
// byte) and the short text samples a training run prints.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/token_cache.hpp"
#include "model/language_model.hpp"
#include "runtime/component_instance.hpp"
#include "train/batches.hpp"
#include "train/layer_stats.hpp"

namespace patchbay::train {

// The model's forward on a batch (defined in objective.cpp): encoder-decoder batches
// (batch.source defined) through the model's encoder_decoder(); packed rows (segment ids)
// through LanguageModel::forward_packed; the others through forward(inputs). Throws
// Error(kInvalidArgument) for a source given to a single-stack model, an encoder-decoder given
// no source or packed rows, naming train.objective and model.architecture.
model::ForwardResult forward_batch(model::LanguageModel& model, const Batch& batch,
                                   bool training);

struct EvalResult {
  double loss = 0;        // mean cross-entropy, nats per token, over every evaluated target
  double perplexity = 0;  // exp(loss)
  // Σ target losses / (ln 2 · Σ target bytes): the bytes of the very tokens evaluated
  // (TokenBytes), so it is exact for any tokenizer, not a split-wide average.
  double bits_per_byte = 0;
  int64_t tokens = 0;     // targets evaluated (special-token targets excluded)
  int64_t bytes = 0;      // bytes those targets decode to
  LayerStats layer_stats; // feed-forward statistics (MoE load, drops, ...), mean over batches
};

// Bytes each token id stands for: bytes[id] = length of decode({id}), 0 for special tokens.
// Special tokens stand for no text, so a target that is one is excluded from the evaluated
// loss (it has no bytes to spread its cost over); special[id] marks them.
struct TokenBytes {
  std::vector<int32_t> bytes;
  std::vector<uint8_t> special;  // 1 for a special token's id
};

// Decodes every id of the tokenizer alone (byte-level tokenizers decode a sequence to the
// concatenation of its tokens' bytes, so these lengths add up exactly).
TokenBytes token_bytes(const runtime::TokenizerHandle& tokenizer);

struct EvalSettings {
  int64_t batches = 20;
  int64_t batch_size = 8;
  int64_t seq_len = 128;
  const TokenBytes* token_bytes = nullptr;  // required: the split's tokenizer's table
};

// Runs `batches` fixed validation batches (batches.hpp: evenly spaced windows) without
// gradients and with dropout off. The loss is the token-weighted mean over all batches;
// targets that are special tokens are left out of loss, tokens and bytes.
EvalResult evaluate(model::LanguageModel& model, const data::TokenSource& split, const EvalSettings& settings);

// The same over any `settings.batches` batches, batch b from batch_at(b) (an objective's
// validation batches, objective.hpp); targets equal to -100 are left out too.
EvalResult evaluate_batches(model::LanguageModel& model,
                            const std::function<Batch(int64_t batch_index)>& batch_at,
                            const EvalSettings& settings);

struct SampleSettings {
  std::string prompt;        // empty: starts from "\n"
  int64_t tokens = 200;      // new tokens (past the context: a sliding window, re-prefilled)
  double temperature = 0.8;  // 0: greedy
  uint64_t seed = 0;
};

// Continues the prompt with incremental decoding; returns prompt + continuation, decoded.
std::string sample_text(model::LanguageModel& model, const runtime::TokenizerHandle& tokenizer,
                        const SampleSettings& settings);

}  // namespace patchbay::train
