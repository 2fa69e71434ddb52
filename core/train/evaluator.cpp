// Validation loss / perplexity / bits per byte, and samples; see evaluator.hpp.
#include "train/evaluator.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.hpp"
#include "data/split.hpp"
#include "engine/ops.hpp"
#include "train/batches.hpp"
#include "train/objective.hpp"
#include "train/training_data.hpp"

namespace patchbay::train {

TokenBytes token_bytes(const runtime::TokenizerHandle& tokenizer) {
  const int64_t vocab = tokenizer.vocab_size();
  TokenBytes table;
  table.bytes.resize(static_cast<size_t>(vocab));
  table.special.assign(static_cast<size_t>(vocab), 0);
  for (const runtime::SpecialTokenInfo& s : tokenizer.special_tokens())
    if (s.id >= 0 && s.id < vocab) table.special[static_cast<size_t>(s.id)] = 1;
  for (int32_t id = 0; id < vocab; ++id)
    if (table.special[static_cast<size_t>(id)] == 0)
      table.bytes[static_cast<size_t>(id)] = static_cast<int32_t>(tokenizer.decode(std::span<const int32_t>(&id, 1)).size());
  return table;
}

EvalResult evaluate(model::LanguageModel& model, const data::TokenSource& split, const EvalSettings& settings) {
  return evaluate_batches(
      model,
      [&](int64_t b) {
        return validation_batch(split, b, settings.batches, settings.batch_size, settings.seq_len);
      },
      settings);
}

EvalResult evaluate_batches(model::LanguageModel& model,
                            const std::function<Batch(int64_t batch_index)>& batch_at,
                            const EvalSettings& settings) {
  if (settings.token_bytes == nullptr)
    throw Error(ErrorKind::kInternal, "evaluate: EvalSettings::token_bytes is required (train::token_bytes)");
  const TokenBytes& table = *settings.token_bytes;
  engine::NoGradGuard no_grad;
  engine::CrossEntropyOptions sum;
  sum.reduction = engine::LossReduction::kSum;
  double loss_sum = 0;
  int64_t tokens = 0;
  int64_t bytes = 0;
  LayerStats stats;
  for (int64_t b = 0; b < settings.batches; ++b) {
    const Batch batch = batch_at(b);
    const model::ForwardResult out = forward_batch(model, batch, /*training=*/false);
    const int64_t vocab = out.logits.size(-1);
    // Special-token targets become ignore_index; the others add their bytes.
    std::vector<int32_t> targets(static_cast<size_t>(batch.targets.numel()));
    const engine::Tensor contiguous = batch.targets.contiguous();
    std::copy_n(contiguous.data<int32_t>(), targets.size(), targets.begin());
    for (int32_t& t : targets) {
      if (t == sum.ignore_index) continue;  // no loss here (objective.hpp)
      if (t < 0 || t >= static_cast<int64_t>(table.bytes.size()))
        throw Error(ErrorKind::kInvalidArgument, "evaluate: token id " + std::to_string(t) +
                                                     " is outside the tokenizer's vocabulary of " +
                                                     std::to_string(table.bytes.size()) +
                                                     "; the token cache was encoded with another tokenizer");
      if (table.special[static_cast<size_t>(t)] != 0) {
        t = static_cast<int32_t>(sum.ignore_index);
      } else {
        bytes += table.bytes[static_cast<size_t>(t)];
      }
    }
    const engine::Tensor kept =
        engine::Tensor::from_data(targets.data(), {static_cast<int64_t>(targets.size())}, engine::DType::kI32);
    loss_sum +=
        engine::cross_entropy(out.logits.reshape({-1, vocab}), kept.to(out.logits.device()), sum)
            .item();
    tokens += engine::count_targets(kept, sum.ignore_index);
    stats.add(out.stats);
  }
  EvalResult result;
  result.layer_stats = std::move(stats);
  result.tokens = tokens;
  result.bytes = bytes;
  result.loss = tokens > 0 ? loss_sum / static_cast<double>(tokens) : std::nan("");
  result.perplexity = std::exp(result.loss);
  result.bits_per_byte = bits_per_byte(result.loss, static_cast<uint64_t>(tokens), static_cast<uint64_t>(bytes));
  return result;
}

namespace {

// Index drawn from softmax(logits / temperature); argmax when temperature is 0.
int32_t choose_token(const std::vector<float>& logits, double temperature, uint64_t random_bits) {
  const auto best = std::max_element(logits.begin(), logits.end());
  if (temperature <= 0) return static_cast<int32_t>(best - logits.begin());
  std::vector<double> weights(logits.size());
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    weights[i] = std::exp((static_cast<double>(logits[i]) - *best) / temperature);
    total += weights[i];
  }
  double u = static_cast<double>(random_bits >> 11) * 0x1.0p-53 * total;
  for (size_t i = 0; i < weights.size(); ++i) {
    u -= weights[i];
    if (u < 0) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(weights.size() - 1);
}

}  // namespace

std::string sample_text(model::LanguageModel& model, const runtime::TokenizerHandle& tokenizer,
                        const SampleSettings& settings) {
  engine::NoGradGuard no_grad;
  std::vector<int32_t> ids = tokenizer.encode(settings.prompt.empty() ? std::string("\n") : settings.prompt);
  if (ids.empty()) ids.push_back(0);
  const int64_t context = model.options().context_length;
  if (static_cast<int64_t>(ids.size()) > context) ids.erase(ids.begin(), ids.end() - context);
  const size_t prompt_length = ids.size();
  const size_t total = prompt_length + static_cast<size_t>(std::max<int64_t>(0, settings.tokens));
  // Sliding window: when the decode state is full, decoding restarts from the last
  // context/2 tokens (one prefill), so samples can be longer than the context.
  auto prefill = [&](model::DecodeState& state, size_t keep) {
    const size_t first = ids.size() - std::min(ids.size(), keep);
    return model.decode_step(state, engine::Tensor::from_data(ids.data() + first,
                                                              {1, static_cast<int64_t>(ids.size() - first)},
                                                              engine::DType::kI32),
                             1);  // only the last position's logits are sampled from
  };
  model::DecodeState state = model.start_decoding(1, context);
  engine::Tensor logits = prefill(state, ids.size());
  uint64_t random = data::splitmix64(settings.seed ^ 0x73616d706c65ull);  // "sample"
  while (ids.size() < total) {
    const int64_t last = logits.size(1) - 1;
    const std::vector<float> row = logits.narrow(1, last, 1).to_vector();
    random = data::splitmix64(random);
    const int32_t next = choose_token(row, settings.temperature, random);
    ids.push_back(next);
    if (ids.size() >= total) break;
    if (state.length() >= context) {
      state = model.start_decoding(1, context);
      logits = prefill(state, static_cast<size_t>(std::max<int64_t>(1, context / 2)));
    } else {
      logits = model.decode_step(state, engine::Tensor::from_data(&next, {1, 1}, engine::DType::kI32));
    }
  }
  const std::string prompt_text = settings.prompt.empty() ? "" : settings.prompt;
  return prompt_text + tokenizer.decode(std::span<const int32_t>(ids).subspan(prompt_length));
}

}  // namespace patchbay::train
