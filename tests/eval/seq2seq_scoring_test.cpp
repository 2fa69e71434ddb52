// Task scoring on an encoder-decoder (seq2seq_request_scorer.hpp), as lm-evaluation-harness's
// seq2seq backend scores one, on a tiny encoder-decoder built here (V = 11, C = 16, 2 + 2
// blocks, sources up to 6 tokens, targets up to 5): every log-likelihood against the plain
// reference of one direct forward (the context to the encoder, [start] + continuation[:-1] to
// the decoder, log-softmax in double summed over the continuation), at every batch size, with
// contexts shared between choices and cut from the left; is_greedy; the separate tokenisation
// of context and continuation; a multiple-choice, a rolling and a generation task end to end
// (the generation against greedy recomputation from direct forwards); the refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <patchbay/testing/temp_dir.hpp>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "eval/answer_metrics.hpp"
#include "eval/seq2seq_request_scorer.hpp"
#include "eval/task_evaluation.hpp"
#include "model/encoder_decoder.hpp"
#include "model_fixture.hpp"
#include "toy_codec.hpp"

namespace ev = patchbay::eval;
namespace eng = patchbay::engine;
namespace pm = patchbay::model;
namespace fs = std::filesystem;
using V = std::vector<int32_t>;
using nlohmann::json;

namespace {

constexpr int32_t kStart = 1;  // the decoder start token of these tests (" " in the toy codec)

std::unique_ptr<pm::LanguageModel> tiny_seq2seq() {
  pm::EncoderDecoderOptions e;
  e.base = model_test::tiny_options();  // V 11, C 16, H 2, d_ff 64
  e.base.init_std = 0.5;                // peaked, varied distributions
  e.base.norm = pm::NormKind::kRmsNorm;
  e.base.context_length = 5;  // decoder positions
  e.source_context_length = 6;
  e.relative_buckets = 8;
  e.relative_max_distance = 16;
  return pm::LanguageModel::build_encoder_decoder(e, {}, model_test::registry());
}

eng::Tensor row(const V& ids) {
  return eng::Tensor::from_data(ids.data(), {1, static_cast<int64_t>(ids.size())},
                                eng::DType::kI32);
}

// Logits [T, V] of one direct forward: source -> encoder, decoder_inputs -> decoder.
std::vector<float> direct_logits(pm::EncoderDecoderModel& model, const V& source,
                                 const V& decoder_inputs) {
  eng::NoGradGuard no_grad;
  return model.forward({row(source), eng::Tensor(), row(decoder_inputs), eng::Tensor()}, false)
      .logits.to_vector();
}

// The plain reference: Σ_k log p(continuation[k] | context[-S:], [start] + continuation[:k]).
double direct_logprob(pm::EncoderDecoderModel& model, V context, const V& continuation) {
  const auto limit = static_cast<size_t>(model.options().source_context_length);
  if (context.size() > limit) context.erase(context.begin(), context.end() - limit);
  V decoder_inputs = {kStart};
  decoder_inputs.insert(decoder_inputs.end(), continuation.begin(), continuation.end() - 1);
  const std::vector<float> logits = direct_logits(model, context, decoder_inputs);
  const size_t vocab = 11;
  double total = 0;
  for (size_t k = 0; k < continuation.size(); ++k) {
    double z = 0;
    for (size_t v = 0; v < vocab; ++v) z += std::exp(static_cast<double>(logits[k * vocab + v]));
    total += logits[k * vocab + static_cast<size_t>(continuation[k])] - std::log(z);
  }
  return total;
}

int32_t argmax_last(const std::vector<float>& logits) {
  const auto last = logits.end() - 11;
  return static_cast<int32_t>(std::max_element(last, logits.end()) - last);
}

ev::TextCodec seq2seq_codec() {
  ev::TextCodec codec = eval_test::toy_codec();
  codec.decoder_start_token = kStart;
  return codec;
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

}  // namespace

TEST_CASE("seq2seq scoring equals a direct forward per request, at every batch size") {
  auto lm = tiny_seq2seq();
  pm::EncoderDecoderModel& model = *lm->encoder_decoder();
  // Three choices of one context, a context longer than S = 6 (cut from the left), a repeated
  // pair, and a one-token context.
  const std::vector<ev::TokenPair> requests = {
      {{8, 9, 2}, {5, 3}, false},       {{8, 9, 2}, {4}, false},
      {{8, 9, 2}, {6, 6, 7, 2}, false}, {{2, 3, 4, 5, 6, 7, 8, 9}, {4, 4, 6}, false},
      {{7}, {3, 2, 1, 10, 9}, false},   {{8, 9, 2}, {5, 3}, false}};
  for (int64_t batch : {1, 2, 3, 8}) {
    CAPTURE(batch);
    ev::ScoringStats stats;
    const std::vector<ev::LoglikelihoodResult> r =
        ev::score_loglikelihood_seq2seq(model, kStart, requests, batch, &stats);
    REQUIRE(r.size() == requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      CAPTURE(i);
      CHECK(r[i].logprob ==
            doctest::Approx(direct_logprob(model, requests[i].context, requests[i].continuation))
                .epsilon(1e-6));
    }
    CHECK(r[0].logprob == r[5].logprob);  // one row for the repeated pair
    CHECK(stats.requests == 6);
    CHECK(stats.rows == 5);
    CHECK(stats.batches == (5 + batch - 1) / batch);
    CHECK(stats.truncated_requests == 1);
    CHECK(r[3].truncated_tokens == 2);
    if (batch >= 3) CHECK(stats.shared_contexts >= 1);  // [8, 9, 2]: one encoder pass
  }
  // A continuation longer than the decoder's context is refused.
  CHECK_THROWS_WITH_AS(ev::score_loglikelihood_seq2seq(model, kStart, {{{2}, V(6, 3), false}}, 4),
                       doctest::Contains("model.context_length = 5"), patchbay::Error);
}

TEST_CASE("seq2seq is_greedy is true exactly when every continuation token is the argmax") {
  auto lm = tiny_seq2seq();
  pm::EncoderDecoderModel& model = *lm->encoder_decoder();
  const V context = {8, 9, 3};
  V decoder_inputs = {kStart}, greedy;
  for (int step = 0; step < 3; ++step) {
    greedy.push_back(argmax_last(direct_logits(model, context, decoder_inputs)));
    decoder_inputs.push_back(greedy.back());
  }
  V other = greedy;
  other[2] = (other[2] + 1) % 11;
  const auto r = ev::score_loglikelihood_seq2seq(
      model, kStart, {{context, greedy, false}, {context, other, false}}, 2);
  CHECK(r[0].is_greedy);
  CHECK_FALSE(r[1].is_greedy);
  CHECK(r[0].logprob > r[1].logprob);
}

TEST_CASE("encode_pair_separately: whitespace moves, the two sides are tokenised apart") {
  const ev::TextCodec codec = eval_test::toy_codec();
  // "x: " + "ab": the space moves; the continuation " ab" is encoded alone (" a", "b"), where
  // the causal split would take the whole string's tokens past the context.
  const ev::TokenPair p = ev::encode_pair_separately(codec, "x: ", "ab", "t");
  CHECK(p.context == V{8, 9});
  CHECK(p.continuation == V{5, 3});
  CHECK_FALSE(p.boundary_mismatch);
  // "a" + "b": separately ["a"], ["b"]; the causal split gives "ab" as one token, no room.
  const ev::TokenPair q = ev::encode_pair_separately(codec, "a", "b", "t");
  CHECK(q.context == V{2});
  CHECK(q.continuation == V{3});
  // An empty context conditions on the prefix token, as encode_pair does.
  CHECK(ev::encode_pair_separately(codec, "", "ab", "t").context == V{0});
  CHECK_THROWS_WITH_AS(ev::encode_pair_separately(codec, "  ", "ab", "t"),
                       doctest::Contains("only whitespace"), patchbay::Error);
}

TEST_CASE("multiple-choice, rolling and generation tasks run on an encoder-decoder") {
  patchbay::testing::TempDir dir("eval_seq2seq");
  auto lm = tiny_seq2seq();
  pm::EncoderDecoderModel& model = *lm->encoder_decoder();
  const ev::TextCodec codec = seq2seq_codec();
  std::string test_docs;
  for (int i = 0; i < 4; ++i) {
    std::string q("x");  // appended piece by piece: GCC 12's -Wrestrict false positive (PR 105329)
    q.append(static_cast<size_t>(3 * i), 'a').append(":");
    test_docs += json({{"q", q}, {"choices", {"a", "b c", "cab"}}, {"label", i % 3}}).dump() + "\n";
  }
  write(dir.path() / "test.jsonl", test_docs);
  write(dir.path() / "mc.yaml", R"(task: toy_mc
dataset_path: json
dataset_kwargs: {data_files: {test: test.jsonl}}
test_split: test
output_type: multiple_choice
doc_to_text: "{{q}}"
doc_to_choice: "{{choices}}"
doc_to_target: label
)");
  ev::EvalOptions options;
  options.batch_size = 4;
  options.keep_samples = true;
  const ev::TaskSpec mc = ev::load_task_file(dir.path() / "mc.yaml");
  const ev::TaskResult result = ev::evaluate_task(*lm, codec, mc, options);
  const ev::TaskRequests requests = ev::build_task_requests(mc, 0, std::nullopt);
  REQUIRE(result.samples.size() == 4);
  std::vector<double> acc;
  int64_t truncated = 0;
  for (size_t i = 0; i < 4; ++i) {
    const ev::TaskItem& item = requests.items[i];
    std::vector<double> ll;
    for (const std::string& c : item.continuations) {
      const ev::TokenPair p = ev::encode_pair_separately(codec, item.prompt, c, "test");
      ll.push_back(direct_logprob(model, p.context, p.continuation));
      if (p.context.size() > 6) ++truncated;
    }
    for (size_t k = 0; k < ll.size(); ++k)
      CHECK(result.samples[i]["loglikelihoods"][k].get<double>() ==
            doctest::Approx(ll[k]).epsilon(1e-6));
    acc.push_back(ev::choose(ll, item.choices).pred == item.gold[0] ? 1 : 0);
  }
  REQUIRE(result.metrics.size() == 2);
  CHECK(result.metrics[0].value == doctest::Approx(ev::mean_with_stderr(acc).value));
  CHECK(result.scoring.shared_contexts > 0);  // each item's three choices: one encoder pass
  CHECK(truncated == 6);  // "xaaaaaa:" and "xaaaaaaaaa:" (8, 11 tokens): cut to S = 6
  CHECK(result.truncated_requests == truncated);

  // Rolling: each window's context to the encoder, its tokens scored by the decoder.
  write(dir.path() / "docs.jsonl", json({{"text", "ab c ab a b c"}}).dump() + "\n");
  write(dir.path() / "ppl.yaml", R"(task: toy_ppl
dataset_path: json
dataset_kwargs: {data_files: {test: docs.jsonl}}
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{text}}"
)");
  const ev::TaskResult ppl =
      ev::evaluate_task(*lm, codec, ev::load_task_file(dir.path() / "ppl.yaml"), options);
  double ll = 0;
  for (const ev::TokenPair& w : ev::rolling_windows(codec.encode("ab c ab a b c"), 0, 5))
    ll += direct_logprob(model, w.context, w.continuation);
  CHECK(ppl.samples[0]["loglikelihood"].get<double>() == doctest::Approx(ll).epsilon(1e-6));

  // Generation: greedy from the decoder start, the prompt to the encoder, cut at "\n".
  write(dir.path() / "gen.yaml", R"yaml(task: toy_gen
dataset_path: json
dataset_kwargs: {data_files: {test: docs.jsonl}}
test_split: test
output_type: generate_until
doc_to_text: "x:"
doc_to_target: "{{text}}"
generation_kwargs: {until: ["\n"], max_gen_toks: 9}
)yaml");
  const ev::TaskResult gen =
      ev::evaluate_task(*lm, codec, ev::load_task_file(dir.path() / "gen.yaml"), options);
  V decoder_inputs = {kStart}, generated;
  for (int step = 0; step < 4; ++step) {  // capped at context_length - 1 = 4 new tokens
    const int32_t token = argmax_last(direct_logits(model, codec.encode("x:"), decoder_inputs));
    if (token == 0) break;  // the stop token
    generated.push_back(token);
    if (codec.decode(generated).find('\n') != std::string::npos) break;
    decoder_inputs.push_back(token);
  }
  std::string expected = codec.decode(generated);
  expected.resize(std::min(expected.size(), expected.find('\n')));
  CHECK(gen.samples[0]["generation"].get<std::string>() == expected);
  CHECK(gen.scoring.tokens == static_cast<int64_t>(generated.size()));

  // Without a decoder start token the encoder-decoder is refused, naming what is missing.
  CHECK_THROWS_WITH_AS(ev::evaluate_task(*lm, eval_test::toy_codec(), mc, options),
                       doctest::Contains("no \"<pad>\" special token"), patchbay::Error);
}
