// score_loglikelihood and generate_until on a tiny model built here (V = 11, T = 8), checked
// against log-softmax of a direct forward computed in the test.
#include <doctest/doctest.h>

#include <cmath>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "eval/request_scorer.hpp"
#include "tiny_model.hpp"
#include "toy_codec.hpp"

namespace ev = patchbay::eval;
namespace eng = patchbay::engine;
namespace pm = patchbay::model;
using V = std::vector<int32_t>;
using eval_test::direct_logprob;
using eval_test::tiny_model;

TEST_CASE("batched, sorted scoring equals a direct forward per request, at every batch size") {
  auto model = tiny_model();
  const std::vector<ev::TokenPair> requests = {{{8, 9}, {5, 3}, false},
                                               {{1}, {2}, false},
                                               {{8, 9, 10, 2, 3}, {4, 4, 6}, false},
                                               {{7}, {3, 2, 1}, false}};
  for (int64_t batch : {1, 2, 3, 8}) {
    ev::ScoringStats stats;
    const std::vector<ev::LoglikelihoodResult> r =
        ev::score_loglikelihood(*model, requests, batch, &stats);
    REQUIRE(r.size() == requests.size());
    for (size_t i = 0; i < requests.size(); ++i)
      CHECK(r[i].logprob ==
            doctest::Approx(direct_logprob(*model, requests[i].context, requests[i].continuation))
                .epsilon(1e-6));
    CHECK(stats.batches == (4 + batch - 1) / batch);
  }
}

TEST_CASE("is_greedy is true exactly when every continuation token is the argmax") {
  auto model = tiny_model();
  // Greedy continuation of [8, 9], found by argmax over direct forwards.
  V context = {8, 9}, greedy;
  for (int step = 0; step < 3; ++step) {
    V all = context;
    all.insert(all.end(), greedy.begin(), greedy.end());
    eng::NoGradGuard no_grad;
    const std::vector<float> logits =
        model
            ->forward(eng::Tensor::from_data(all.data(), {1, static_cast<int64_t>(all.size())},
                                             eng::DType::kI32),
                      false)
            .logits.to_vector();
    const float* last = logits.data() + (all.size() - 1) * 11;
    greedy.push_back(static_cast<int32_t>(std::max_element(last, last + 11) - last));
  }
  V other = greedy;
  other[1] = (other[1] + 1) % 11;
  const auto r =
      ev::score_loglikelihood(*model, {{context, greedy, false}, {context, other, false}}, 2);
  CHECK(r[0].is_greedy);
  CHECK_FALSE(r[1].is_greedy);
  CHECK(r[0].logprob > r[1].logprob);
}

TEST_CASE("one-token continuations of one context share a single row") {
  auto model = tiny_model();
  std::vector<ev::TokenPair> choices;
  for (int32_t t : {2, 3, 4, 5}) choices.push_back({{8, 9, 1}, {t}, false});
  ev::ScoringStats stats;
  const auto r = ev::score_loglikelihood(*model, choices, 8, &stats);
  CHECK(stats.rows == 1);
  CHECK(stats.requests == 4);
  for (size_t i = 0; i < choices.size(); ++i)
    CHECK(r[i].logprob ==
          doctest::Approx(direct_logprob(*model, choices[i].context, choices[i].continuation))
              .epsilon(1e-6));
}

TEST_CASE("a context longer than the model is cut from the left and counted") {
  auto model = tiny_model();  // context_length 8: at most 9 tokens of context + continuation
  const ev::TokenPair long_request{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {2, 3}, false};
  ev::ScoringStats stats;
  const auto r = ev::score_loglikelihood(*model, {long_request}, 1, &stats);
  CHECK(r[0].truncated_tokens == 3);  // 12 tokens, 9 kept
  CHECK(stats.truncated_requests == 1);
  CHECK(r[0].logprob ==
        doctest::Approx(direct_logprob(*model, {4, 5, 6, 7, 8, 9, 10}, {2, 3})).epsilon(1e-6));
  CHECK_THROWS_WITH_AS(ev::score_loglikelihood(*model, {{{1}, V(9, 2), false}}, 1),
                       doctest::Contains("longer than the model"), patchbay::Error);
}

TEST_CASE("generate_until decodes greedily and cuts at the first stop string") {
  auto model = tiny_model();
  const ev::TextCodec codec = eval_test::toy_codec();
  const auto free_run = ev::generate_until(*model, codec, {"x:"}, {}, 5);
  REQUIRE(free_run.size() == 1);
  // Greedy through the KV cache equals argmax over direct forwards.
  V all = codec.encode("x:");
  V expected;
  for (int step = 0; step < 5; ++step) {
    eng::NoGradGuard no_grad;
    const std::vector<float> logits =
        model
            ->forward(eng::Tensor::from_data(all.data(), {1, static_cast<int64_t>(all.size())},
                                             eng::DType::kI32),
                      false)
            .logits.to_vector();
    const float* last = logits.data() + (all.size() - 1) * 11;
    const int32_t t = static_cast<int32_t>(std::max_element(last, last + 11) - last);
    if (t == 0) break;  // the stop token
    expected.push_back(t);
    all.push_back(t);
  }
  CHECK(free_run[0].text == codec.decode(expected));
  if (free_run[0].text.size() >= 2) {
    const std::string stop = free_run[0].text.substr(1, 1);
    const auto cut = ev::generate_until(*model, codec, {"x:"}, {stop}, 5);
    CHECK(cut[0].text == free_run[0].text.substr(0, free_run[0].text.find(stop)));
  }
  CHECK_THROWS_WITH_AS(ev::generate_until(*model, codec, {"x"}, {}, 8),
                       doctest::Contains("max_gen_toks"), patchbay::Error);
}
