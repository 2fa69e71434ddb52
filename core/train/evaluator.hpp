// Evaluation of a language model on a token cache (validation loss, perplexity, bits per
// byte) and the short text samples a training run prints.
#pragma once

#include <cstdint>
#include <string>

#include "data/token_cache.hpp"
#include "model/language_model.hpp"
#include "train/layer_stats.hpp"
#include "runtime/component_instance.hpp"

namespace patchbay::train {

struct EvalResult {
  double loss = 0;        // mean cross-entropy, nats per token, over every evaluated target
  double perplexity = 0;  // exp(loss)
  double bits_per_byte = 0;  // loss * tokens_per_byte / ln 2 (tokens/bytes of the whole split)
  int64_t tokens = 0;     // targets evaluated
  LayerStats layer_stats; // feed-forward statistics (MoE load, drops, ...), mean over batches
};

struct EvalSettings {
  int64_t batches = 20;
  int64_t batch_size = 8;
  int64_t seq_len = 128;
  double tokens_per_byte = 0;  // of the split: cache tokens / text bytes
};

// Runs `batches` fixed validation batches (batches.hpp: evenly spaced windows) without
// gradients and with dropout off. The loss is the token-weighted mean over all batches.
EvalResult evaluate(model::LanguageModel& model, const data::TokenCache& split, const EvalSettings& settings);

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
