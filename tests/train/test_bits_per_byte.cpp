// Bits per byte with a byte-level BPE tokenizer: the bytes of the evaluated targets, not the
// split's average bytes per token. Known answer: a model with every parameter zero predicts
// the uniform distribution, so each target costs exactly ln V nats and
//   bits per byte = log2(V) · (targets evaluated) / (bytes those targets decode to).
// The validation text mixes a stretch of merged words (several bytes per token) with a long
// run of letters the tokenizer never merged (one byte per token), and the evaluated window
// lies in the first stretch, so the split-wide ratio gives a very different (wrong) answer.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "data/token_cache.hpp"
#include "train/evaluator.hpp"
#include "train/trainer.hpp"
#include "train/training_data.hpp"
#include "train_fixture.hpp"

namespace fs = std::filesystem;
using namespace patchbay;

namespace {

// The folder lives (and is removed, also when a check fails) with this object.
struct ScratchFolder {
  patchbay::testing::TempDir dir = train::testing::fresh_folder("bits_per_byte");
  fs::path path = dir.path();
};

}  // namespace

TEST_CASE(
    "bits per byte counts the bytes of the evaluated BPE targets; special tokens are left out") {
  ScratchFolder scratch;
  train::testing::write_tiny_corpus(scratch.path);
  train::testing::TinySetup setup;
  const config::ResolvedConfig config =
      setup.config(train::testing::tiny_config_text(scratch.path),
                   {"tokenizer.kind=\"bpe\"", "tokenizer.vocab_size=400"});
  train::TrainingData data = train::prepare_training_data(config, setup.registry, setup.lookup);
  const int64_t vocab = data.tokenizer.vocab_size();
  REQUIRE(!data.tokenizer.special_tokens().empty());
  const int32_t end_of_text = data.tokenizer.special_tokens().front().id;

  std::string val_text =
      " the cat sat on<|endoftext|> the mat.\nthe bird looked at the door.\na dog ran to the "
      "river.\n";
  for (int i = 0; i < 500; ++i) val_text += "QZXW";  // never merged: one byte per token
  const std::vector<int32_t> ids = data.tokenizer.encode(val_text, /*allow_special=*/true);
  data::TokenCacheInfo info;
  info.vocab_size = static_cast<uint64_t>(vocab);
  info.tokenizer_kind = "bpe";
  data::write_token_cache(scratch.path / "val.tokens", ids, info);
  const data::TokenCache val = data::TokenCache::open(scratch.path / "val.tokens");

  train::TrainableModel trainable =
      train::build_trainable_model(config, setup.registry, setup.lookup, vocab);
  for (const model::NamedParameter& p : trainable.parameters) {
    REQUIRE(p.tensor.dtype() == engine::DType::kF32);
    std::fill_n(p.tensor.data<float>(), p.tensor.numel(), 0.0f);
  }

  const train::TokenBytes table = train::token_bytes(data.tokenizer);
  CHECK(table.special[static_cast<size_t>(end_of_text)] == 1);
  CHECK(table.bytes[static_cast<size_t>(end_of_text)] == 0);
  CHECK(table.bytes['Q'] == 1);
  const int64_t seq_len = 16;
  const train::EvalResult r = train::evaluate(*trainable.model, val, {1, 1, seq_len, &table});

  // The one window of one batch is ids[0 .. 16], its targets ids[1 .. 16].
  std::vector<int32_t> targets(ids.begin() + 1, ids.begin() + 1 + seq_len);
  REQUIRE(std::count(targets.begin(), targets.end(), end_of_text) == 1);
  std::erase(targets, end_of_text);
  const auto expected_bytes = static_cast<int64_t>(data.tokenizer.decode(targets).size());
  CHECK(expected_bytes >
        2 * static_cast<int64_t>(targets.size()));  // merged words: several bytes each
  CHECK(r.tokens == seq_len - 1);
  CHECK(r.bytes == expected_bytes);
  CHECK(r.loss == doctest::Approx(std::log(static_cast<double>(vocab))).epsilon(1e-5));
  const double expected_bpb = std::log2(static_cast<double>(vocab)) *
                              static_cast<double>(seq_len - 1) /
                              static_cast<double>(expected_bytes);
  CHECK(r.bits_per_byte == doctest::Approx(expected_bpb).epsilon(1e-5));

  // The old split-wide ratio (tokens of the split / its bytes) is near 1 token per byte here,
  // so it would report several times the exact value.
  const double ratio_bpb = train::bits_per_byte(r.loss, ids.size(), val_text.size());
  CHECK(ratio_bpb > 2.5 * r.bits_per_byte);
}
