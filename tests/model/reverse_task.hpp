// The reverse task shared by the encoder-decoder tests (tests/model
// encoder_decoder_training_test.cpp, tests/generate seq2seq_generate_test.cpp): sources of
// 3..6 symbols padded to kLength, targets the reversed sources; a tiny encoder-decoder (2 + 2
// blocks, C 32, T5 relative bias, RMS norm, dense cross-attention, MLP) trained on it with
// AdamW (lr 1e-2, batches of 32). Include after doctest and with model_fixture.hpp's registry.
#pragma once

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "engine/ops.hpp"
#include "engine/ops_indexing.hpp"
#include "engine/ops_optimizer.hpp"
#include "model/encoder_decoder.hpp"
#include "model_fixture.hpp"

namespace reverse_task {

namespace eng = patchbay::engine;
namespace pm = patchbay::model;

constexpr int32_t kPad = 0, kStart = 1, kFirstSymbol = 2, kSymbols = 10;
constexpr int64_t kLength = 6;

struct ReverseBatch {
  pm::Seq2SeqInputs inputs;
  eng::Tensor targets;  // [B, kLength], -100 on padding
};

inline ReverseBatch reverse_batch(std::mt19937& rng, int64_t rows) {
  std::vector<int32_t> source, source_mask, decoder, decoder_mask, targets;
  std::uniform_int_distribution<int32_t> length(3, kLength), symbol(0, kSymbols - 1);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t n = length(rng);
    std::vector<int32_t> seq(static_cast<size_t>(n));
    for (int32_t& s : seq) s = kFirstSymbol + symbol(rng);
    for (int64_t i = 0; i < kLength; ++i) {
      const bool real = i < n;
      source.push_back(real ? seq[static_cast<size_t>(i)] : kPad);
      source_mask.push_back(real ? 1 : 0);
      const int32_t target = real ? seq[static_cast<size_t>(n - 1 - i)] : -100;
      targets.push_back(target);
      decoder.push_back(!real ? kPad : i == 0 ? kStart : seq[static_cast<size_t>(n - i)]);
      decoder_mask.push_back(real ? 1 : 0);
    }
  }
  auto tensor = [&](const std::vector<int32_t>& v) {
    return eng::Tensor::from_data(v.data(), {rows, kLength}, eng::DType::kI32);
  };
  return {{tensor(source), tensor(source_mask), tensor(decoder), tensor(decoder_mask)},
          tensor(targets)};
}

inline eng::Tensor loss_of(pm::EncoderDecoderModel& model, const ReverseBatch& batch,
                           bool training) {
  const eng::Tensor logits = model.forward(batch.inputs, training).logits;
  return eng::cross_entropy(eng::reshape(logits, {-1, model.options().base.vocab_size}),
                            eng::reshape(batch.targets, {-1}));
}

// The tiny model's options (vocabulary kFirstSymbol + kSymbols, contexts kLength).
inline pm::EncoderDecoderOptions tiny_options() {
  pm::EncoderDecoderOptions e;
  e.base.vocab_size = kFirstSymbol + kSymbols;
  e.base.context_length = kLength;
  e.base.d_model = 32;
  e.base.n_heads = 4;
  e.base.d_ff = 64;
  e.base.norm = pm::NormKind::kRmsNorm;
  e.base.init_std = 0.1;
  e.base.seed = 1;
  e.source_context_length = kLength;
  e.encoder_layers = 2;
  e.decoder_layers = 2;
  e.relative_buckets = 8;
  e.relative_max_distance = 16;
  return e;
}

inline std::unique_ptr<pm::EncoderDecoderModel> tiny_model() {
  return pm::EncoderDecoderModel::build(tiny_options(), {}, model_test::registry());
}

// `steps` AdamW steps (lr 1e-2, beta2 0.98) on batches of 32 drawn from seed 7.
inline void train(pm::EncoderDecoderModel& model, int64_t steps) {
  struct Slot {
    eng::Tensor param, exp_avg, exp_avg_sq;
  };
  std::vector<Slot> slots;
  for (const pm::NamedParameter& p : model.parameters())
    slots.push_back({p.tensor, eng::zeros(p.tensor.shape()), eng::zeros(p.tensor.shape())});
  std::mt19937 data_rng(7);
  for (int64_t step = 1; step <= steps; ++step) {
    for (Slot& s : slots) s.param.zero_grad();
    eng::backward(loss_of(model, reverse_batch(data_rng, 32), true));
    eng::OptimizerUpdate update;
    update.step = step;
    update.lr = 1e-2;
    update.beta2 = 0.98;
    eng::Tensor none;
    for (Slot& s : slots)
      if (s.param.grad().defined())
        eng::optimizer_update(update, s.param, s.param.grad(), s.exp_avg, s.exp_avg_sq, none);
  }
}

// 64 held-out examples (seed 12345).
inline ReverseBatch held_out() {
  std::mt19937 rng(12345);
  return reverse_batch(rng, 64);
}

}  // namespace reverse_task
