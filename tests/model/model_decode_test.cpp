// KV-cache decoding gives the logits of a full forward: prefill, then one token at a time,
// then chunks, for learned, rotary and sinusoidal positions (max abs diff < 1e-4); and, with
// dense attention and PATCHBAY_BATCH_INVARIANT_DECODE=1, bit for bit (issue 39); keep_last returns
// the last positions' logits alone, equal to the full step's.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/ops.hpp"
#include "model_fixture.hpp"

namespace eng = patchbay::engine;
namespace pm = patchbay::model;

namespace {

// [B, T] i64 ids in [0, V) from a fixed pattern (deterministic, every id used).
eng::Tensor make_tokens(int64_t batch, int64_t length, int64_t vocab) {
  std::vector<int64_t> ids;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < length; ++t) ids.push_back((7 * t + 3 * b + (t * t) % 5) % vocab);
  }
  return eng::Tensor::from_data(ids.data(), {batch, length}, eng::DType::kI64);
}

float max_abs_diff(const eng::Tensor& a, const eng::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<float> x = a.to_vector(), y = b.to_vector();
  float worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

// Logits of decoding `tokens` in steps of the given sizes (summing to T), concatenated.
eng::Tensor decode_in_steps(pm::LanguageModel& model, const eng::Tensor& tokens,
                            const std::vector<int64_t>& steps) {
  pm::DecodeState state = model.start_decoding(tokens.size(0), model.options().context_length);
  std::vector<eng::Tensor> pieces;
  int64_t at = 0;
  for (int64_t n : steps) {
    pieces.push_back(model.decode_step(state, eng::narrow(tokens, 1, at, n).contiguous()));
    at += n;
    CHECK(state.length() == at);
  }
  return eng::concat(pieces, 1);
}

void check_decoding_matches(pm::PositionalKind positional) {
  pm::ModelOptions o = model_test::tiny_options();
  o.positional = positional;
  auto model = pm::LanguageModel::build(o, {}, model_test::registry());
  const eng::Tensor tokens = make_tokens(2, o.context_length, o.vocab_size);
  eng::Tensor full;
  {
    eng::NoGradGuard no_grad;
    full = model->forward(tokens, /*training=*/false).logits;
  }
  CHECK(full.shape() == eng::Shape{2, 8, 11});
  // prefill 3, then one by one, then a chunk
  CHECK(max_abs_diff(decode_in_steps(*model, tokens, {3, 1, 1, 3}), full) < 1e-4f);
  // one by one from the first token
  CHECK(max_abs_diff(decode_in_steps(*model, tokens, {1, 1, 1, 1, 1, 1, 1, 1}), full) < 1e-4f);
  // the whole sequence as one prefill
  CHECK(max_abs_diff(decode_in_steps(*model, tokens, {8}), full) < 1e-4f);
}

}  // namespace

TEST_CASE("KV-cache decoding equals the full forward: learned positions") {
  check_decoding_matches(pm::PositionalKind::kLearned);
}

TEST_CASE("KV-cache decoding equals the full forward: rotary positions") {
  check_decoding_matches(pm::PositionalKind::kRotary);
}

TEST_CASE("KV-cache decoding equals the full forward: sinusoidal positions") {
  check_decoding_matches(pm::PositionalKind::kSinusoidal);
}

// PATCHBAY_BATCH_INVARIANT_DECODE=1 for the guard's lifetime (read at every attention call).
struct InvariantDecodeGuard {
  InvariantDecodeGuard() { setenv("PATCHBAY_BATCH_INVARIANT_DECODE", "1", 1); }
  ~InvariantDecodeGuard() { unsetenv("PATCHBAY_BATCH_INVARIANT_DECODE"); }
  InvariantDecodeGuard(const InvariantDecodeGuard&) = delete;
  InvariantDecodeGuard& operator=(const InvariantDecodeGuard&) = delete;
};

// Batch invariance: with dense attention and PATCHBAY_BATCH_INVARIANT_DECODE=1 (one-query
// attention through the query tiles; the linear layers are row-invariant always) every
// position's logits from KV-cache decoding (one token at a time after a prefill, or chunks)
// equal the full forward's bit for bit, at widths where every linear layer is a real GEMM
// (d_model 64, d_ff 256, vocab 300), at batch 1 (decoding's shape) and 3, and a context (96)
// whose full forward at batch 3 puts 18k elements through layer norm (above the engine's 16k
// threshold between its loop and oneDNN: where invariance is wanted, oneDNN at every size).
TEST_CASE("KV-cache decoding equals the full forward bit for bit (dense attention)") {
  const InvariantDecodeGuard invariant_decode;
  for (pm::PositionalKind positional :
       {pm::PositionalKind::kLearned, pm::PositionalKind::kRotary}) {
    pm::ModelOptions o = model_test::tiny_options();
    o.positional = positional;
    o.vocab_size = 300;
    o.context_length = 96;
    o.d_model = 64;
    o.n_heads = 4;
    o.d_ff = 256;
    auto model = pm::LanguageModel::build(o, {}, model_test::registry());
    for (int64_t batch : {1, 3}) {
      CAPTURE(batch);
      const eng::Tensor tokens = make_tokens(batch, o.context_length, o.vocab_size);
      eng::Tensor full;
      {
        eng::NoGradGuard no_grad;
        full = model->forward(tokens, /*training=*/false).logits;
      }
      const std::vector<float> want = full.to_vector();
      std::vector<int64_t> prefill_then_ones = {80};
      prefill_then_ones.resize(17, 1);
      for (const std::vector<int64_t>& steps :
           {prefill_then_ones, std::vector<int64_t>(96, 1), std::vector<int64_t>{95, 1},
            std::vector<int64_t>{4, 8, 84}}) {
        const std::vector<float> got = decode_in_steps(*model, tokens, steps).to_vector();
        REQUIRE(got.size() == want.size());
        size_t differ = 0;
        for (size_t i = 0; i < got.size(); ++i)
          differ += std::memcmp(&got[i], &want[i], sizeof(float)) != 0 ? 1 : 0;
        CHECK_MESSAGE(differ == 0,
                      differ << " of " << got.size() << " logits differ, max "
                             << max_abs_diff(decode_in_steps(*model, tokens, steps), full));
      }
    }
  }
}

TEST_CASE("decoding refuses more positions than the capacity and foreign states") {
  auto model = pm::LanguageModel::build(model_test::tiny_options(), {}, model_test::registry());
  pm::DecodeState state = model->start_decoding(1, 4);
  model->decode_step(state, make_tokens(1, 3, 11));
  CHECK_THROWS_WITH_AS(model->decode_step(state, make_tokens(1, 2, 11)),
                       doctest::Contains("exceed the state's capacity 4"), patchbay::Error);
  auto other = pm::LanguageModel::build(model_test::tiny_options(), {}, model_test::registry());
  CHECK_THROWS_WITH_AS(other->decode_step(state, make_tokens(1, 1, 11)),
                       doctest::Contains("not made by this model"), patchbay::Error);
  CHECK_THROWS_AS(model->start_decoding(1, 9), patchbay::Error);  // capacity above context_length 8
}

TEST_CASE("forward refuses sequences longer than the context and non-integer tokens") {
  auto model = pm::LanguageModel::build(model_test::tiny_options(), {}, model_test::registry());
  CHECK_THROWS_WITH_AS(model->forward(make_tokens(1, 9, 11), false),
                       doctest::Contains("exceed the context length 8"), patchbay::Error);
  CHECK_THROWS_WITH_AS(model->forward(eng::zeros({1, 4}), false), doctest::Contains("i32 or i64"),
                       patchbay::Error);
}

TEST_CASE("decode_step keep_last: the last positions' logits alone, equal to the full step's") {
  pm::ModelOptions o = model_test::tiny_options();
  o.positional = pm::PositionalKind::kRotary;
  auto model = pm::LanguageModel::build(o, {}, model_test::registry());
  const eng::Tensor tokens = make_tokens(2, 6, o.vocab_size);
  pm::DecodeState every = model->start_decoding(2, o.context_length);
  const eng::Tensor all = model->decode_step(every, tokens);  // [2, 6, V]
  pm::DecodeState kept = model->start_decoding(2, o.context_length);
  const eng::Tensor last_two = model->decode_step(kept, tokens, 2);
  CHECK(last_two.shape() == eng::Shape{2, 2, o.vocab_size});
  CHECK(max_abs_diff(last_two, eng::narrow(all, 1, 4, 2).contiguous()) == 0.0f);
  CHECK(kept.length() == 6);  // every position entered the cache
  // The state continues as the one that returned every position's logits.
  const eng::Tensor next = make_tokens(2, 1, o.vocab_size);
  CHECK(max_abs_diff(model->decode_step(kept, next), model->decode_step(every, next)) == 0.0f);
  // keep_last = T is every position; outside [0, T] is refused.
  pm::DecodeState whole = model->start_decoding(2, o.context_length);
  CHECK(max_abs_diff(model->decode_step(whole, tokens, 6), all) == 0.0f);
  pm::DecodeState bad = model->start_decoding(2, o.context_length);
  CHECK_THROWS_WITH_AS(model->decode_step(bad, tokens, 7),
                       doctest::Contains("keep_last must lie in [0, 6]"), patchbay::Error);
  CHECK_THROWS_AS(model->decode_step(bad, tokens, -1), patchbay::Error);
}
