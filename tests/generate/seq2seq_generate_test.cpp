// Encoder-decoder decoding through the decoder-only seams (generate/seq2seq_generate.hpp):
// beam search over shared-source decoder rows with per-row self-attention caches gives the
// beams and scores of a full-forward reference (no caches); with enough beams it finds the
// best sequence of an exhaustive search (known answer); the state reorder of distinct sources
// equals fresh states; on the trained reverse task (tests/model/reverse_task.hpp) one beam is
// greedy decoding, a greedy sampler chain is greedy decoding, and four beams score at least
// what greedy scores.
#include "generate/seq2seq_generate.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "generate/beam_generate.hpp"
#include "generate/sampler_config.hpp"
#include "reverse_task.hpp"

namespace gen = patchbay::generate;
using namespace reverse_task;

namespace {

eng::Tensor rows_tensor(const std::vector<std::vector<int32_t>>& rows) {
  std::vector<int32_t> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return eng::Tensor::from_data(
      flat.data(), {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())},
      eng::DType::kI32);
}

// log-softmax of the decoder's last position after `prefix` (start token first), by forward().
std::vector<float> full_forward_log_probs(pm::EncoderDecoderModel& model,
                                          const std::vector<int32_t>& source,
                                          const std::vector<int32_t>& prefix) {
  eng::NoGradGuard no_grad;
  pm::Seq2SeqInputs in;
  in.source = rows_tensor({source});
  in.target_inputs = rows_tensor({prefix});
  const eng::Tensor logits = model.forward(in, false).logits;  // [1, T, V]
  return eng::log_softmax(eng::narrow(logits, 1, logits.size(1) - 1, 1)).to_vector();
}

// The reference decoder: every step runs forward() over each beam's whole prefix.
class FullForwardDecoder : public gen::BeamDecoder {
 public:
  FullForwardDecoder(pm::EncoderDecoderModel& m, std::vector<int32_t> source)
      : model_(m), source_(std::move(source)) {}
  std::vector<float> prefill(std::span<const int32_t> prompt, int64_t beams) override {
    history_.assign(static_cast<size_t>(beams), std::vector<int32_t>(prompt.begin(), prompt.end()));
    return full_forward_log_probs(model_, source_, history_.front());
  }
  void reorder(std::span<const int64_t> source) override {
    std::vector<std::vector<int32_t>> next;
    for (const int64_t s : source) next.push_back(history_.at(static_cast<size_t>(s)));
    history_ = next;
  }
  std::vector<std::vector<float>> step(std::span<const int32_t> tokens) override {
    std::vector<std::vector<float>> out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      history_[i].push_back(tokens[i]);
      out.push_back(full_forward_log_probs(model_, source_, history_[i]));
    }
    return out;
  }

 private:
  pm::EncoderDecoderModel& model_;
  std::vector<int32_t> source_;
  std::vector<std::vector<int32_t>> history_;
};

// The reverse task's shape, smaller, with peaked, varied distributions: beams diverge.
std::unique_ptr<pm::EncoderDecoderModel> peaked_model() {
  pm::EncoderDecoderOptions e = reverse_task::tiny_options();
  e.base.vocab_size = 7;
  e.base.context_length = e.source_context_length = 8;
  e.base.d_model = 16;
  e.base.n_heads = 2;
  e.base.d_ff = 32;
  e.base.init_std = 0.5;
  e.base.seed = 3;
  return pm::EncoderDecoderModel::build(e, {}, model_test::registry());
}

const gen::Seq2SeqTokens kNoStops{1, {}};  // start token 1, no end-of-sequence token

// The source of held-out row r (its unpadded ids).
std::vector<int32_t> held_out_source(const ReverseBatch& batch, int64_t r) {
  const std::vector<float> ids = batch.inputs.source.to(eng::DType::kF32).to_vector();
  const std::vector<float> mask = batch.inputs.source_padding.to(eng::DType::kF32).to_vector();
  std::vector<int32_t> out;
  for (int64_t i = 0; i < kLength; ++i)
    if (mask[static_cast<size_t>(r * kLength + i)] != 0)
      out.push_back(static_cast<int32_t>(ids[static_cast<size_t>(r * kLength + i)]));
  return out;
}

}  // namespace

TEST_CASE("seq2seq beam search with caches equals a full-forward reference") {
  auto model = peaked_model();
  const std::vector<int32_t> source{2, 5, 3, 6, 4};
  gen::BeamSearchOptions o;
  o.num_beams = 3;
  o.num_return_sequences = 3;
  o.max_new_tokens = 6;
  o.eos_tokens = {0};
  const std::vector<gen::Seq2SeqOutput> cached =
      gen::seq2seq_beam_search(*model, source, gen::Seq2SeqTokens{1, {0}}, o, nullptr);
  FullForwardDecoder reference(*model, source);
  const std::vector<int32_t> prompt{1};
  const gen::BeamSearchResult expected = gen::beam_search(reference, prompt, o, nullptr);
  REQUIRE(cached.size() == expected.sequences.size());
  for (size_t i = 0; i < cached.size(); ++i) {
    CHECK(cached[i].tokens == expected.sequences[i].tokens);
    CHECK(cached[i].score == doctest::Approx(expected.sequences[i].score).epsilon(1e-4));
  }
}

TEST_CASE("seq2seq beam search finds the exhaustive search's best sequence (known answer)") {
  auto model = peaked_model();
  const std::vector<int32_t> source{3, 4, 2};
  constexpr int32_t kVocab = 7;
  constexpr int64_t kNew = 3;
  // Exhaustive: every sequence of kNew tokens scored by full forwards; keep the best.
  double best_score = -1e30;
  std::vector<int32_t> best;
  for (int32_t a = 0; a < kVocab; ++a) {
    const double la = full_forward_log_probs(*model, source, {1})[static_cast<size_t>(a)];
    for (int32_t b = 0; b < kVocab; ++b) {
      const double lb = full_forward_log_probs(*model, source, {1, a})[static_cast<size_t>(b)];
      const std::vector<float> lc = full_forward_log_probs(*model, source, {1, a, b});
      for (int32_t c = 0; c < kVocab; ++c)
        if (la + lb + lc[static_cast<size_t>(c)] > best_score) {
          best_score = la + lb + lc[static_cast<size_t>(c)];
          best = {a, b, c};
        }
    }
  }
  // kVocab^2 beams keep every prefix of two tokens, so the search is exhaustive.
  gen::BeamSearchOptions o;
  o.num_beams = kVocab * kVocab;
  o.max_new_tokens = kNew;
  o.length_penalty = 0;  // score = sum of log-probabilities
  const std::vector<gen::Seq2SeqOutput> found =
      gen::seq2seq_beam_search(*model, source, kNoStops, o, nullptr);
  CHECK(found.front().tokens == best);
  CHECK(found.front().score == doctest::Approx(best_score).epsilon(1e-4));
  // Two beams on the same model cannot beat it.
  o.num_beams = 2;
  CHECK(gen::seq2seq_beam_search(*model, source, kNoStops, o, nullptr).front().score <=
        best_score + 1e-4);
}

TEST_CASE("reorder_decoding of distinct sources equals fresh states; refusals") {
  auto model = peaked_model();
  const eng::Tensor sources = rows_tensor({{2, 3, 4}, {5, 6, 2}});
  pm::Seq2SeqDecodeState state = model->start_decoding(sources, eng::Tensor(), 4);
  (void)model->decode_step(state, rows_tensor({{1}, {1}}));
  (void)model->decode_step(state, rows_tensor({{3}, {4}}));
  const std::vector<int64_t> swap{1, 0};
  model->reorder_decoding(state, swap);
  const std::vector<float> reordered =
      model->decode_step(state, rows_tensor({{5}, {6}})).to_vector();

  pm::Seq2SeqDecodeState fresh =
      model->start_decoding(rows_tensor({{5, 6, 2}, {2, 3, 4}}), eng::Tensor(), 4);
  (void)model->decode_step(fresh, rows_tensor({{1, 4}, {1, 3}}));
  const std::vector<float> expected =
      model->decode_step(fresh, rows_tensor({{5}, {6}})).to_vector();
  REQUIRE(reordered.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    CHECK(reordered[i] == doctest::Approx(expected[i]).epsilon(1e-4));

  const std::vector<int64_t> bad{0, 2};
  CHECK_THROWS_WITH(model->reorder_decoding(state, bad),
                    doctest::Contains("source row 2 outside [0, 2)"));
  CHECK_THROWS_WITH(model->start_decoding_shared(sources, eng::Tensor(), 4, 3),
                    doctest::Contains("a shared source is one sequence [1, S]"));
  CHECK_THROWS_WITH(
      gen::seq2seq_beam_search(
          *model, std::vector<int32_t>{2, 3}, kNoStops,
          gen::BeamSearchOptions{2, 1.0, gen::EarlyStopping::kHeuristic, 1, 8, {}}, nullptr),
      doctest::Contains("max_new_tokens 8 outside [1, 7]"));
}

TEST_CASE("on the trained reverse task: one beam is greedy, four beams score at least greedy") {
  auto model = tiny_model();
  reverse_task::train(*model, 300);
  const ReverseBatch held_out = reverse_task::held_out();
  const std::vector<std::vector<int32_t>> greedy = model->greedy_decode(
      held_out.inputs.source, held_out.inputs.source_padding, kStart, -1, kLength);
  toml::array entries;
  entries.push_back(toml::table{{"name", "greedy"}});
  patchbay::runtime::SamplerChain chain = gen::build_sampler_chain(entries, model_test::registry());
  const gen::Seq2SeqTokens tokens{kStart, {}};
  int64_t beam_better = 0, beam_equal = 0;
  double greedy_total = 0, beam_total = 0;
  for (int64_t r = 0; r < 64; ++r) {
    const std::vector<int32_t> source = held_out_source(held_out, r);
    gen::BeamSearchOptions o;
    o.max_new_tokens = kLength - 1;
    o.length_penalty = 0;  // scores are sums of log-probabilities, comparable with greedy's
    o.num_beams = 1;
    const gen::Seq2SeqOutput one =
        gen::seq2seq_beam_search(*model, source, tokens, o, nullptr).front();
    const std::vector<int32_t> greedy_prefix(
        greedy[static_cast<size_t>(r)].begin(),
        greedy[static_cast<size_t>(r)].begin() + (kLength - 1));
    CHECK(one.tokens == greedy_prefix);
    const gen::Seq2SeqOutput sampled =
        gen::seq2seq_sample(*model, source, tokens, kLength - 1, chain);
    CHECK(sampled.tokens == greedy_prefix);
    CHECK(sampled.score == doctest::Approx(one.score).epsilon(1e-4));
    o.num_beams = 4;
    const gen::Seq2SeqOutput four =
        gen::seq2seq_beam_search(*model, source, tokens, o, nullptr).front();
    CHECK(four.score >= one.score - 1e-4);
    beam_better += four.score > one.score + 1e-4 ? 1 : 0;
    beam_equal += std::abs(four.score - one.score) <= 1e-4 ? 1 : 0;
    greedy_total += one.score;
    beam_total += four.score;
  }
  MESSAGE("64 held-out sources: 4 beams beat greedy on ", beam_better, ", equal on ", beam_equal,
          "; total log p ", beam_total, " vs greedy ", greedy_total);
  CHECK(beam_total >= greedy_total);
}
