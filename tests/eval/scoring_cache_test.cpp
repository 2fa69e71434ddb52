// Shared-context scoring (request_scorer.hpp): the context prefilled once in a decoding state
// forked into one sequence per continuation (attention interface 1.4) gives the same
// log-likelihoods as forwarding every request whole, within 1e-5, and the is-greedy flags;
// the model's fork_decoding equals prefilling each copy separately; a group that would save
// too little goes to whole rows.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/autograd.hpp"
#include "eval/request_scorer.hpp"
#include "tiny_model.hpp"

namespace ev = patchbay::eval;
namespace eng = patchbay::engine;
namespace pm = patchbay::model;
using V = std::vector<int32_t>;
using eval_test::direct_logprob;
using eval_test::tiny_model;

TEST_CASE("shared-context scoring equals whole-row scoring per request within 1e-5") {
  auto model = tiny_model();  // V = 11, context 8
  // Items with shared contexts and multi-token choices of different lengths, a repeated
  // choice, one-token choices, a lone request, and one cut from the left (whole rows).
  const std::vector<ev::TokenPair> requests = {{{8, 9, 1}, {2, 3}, false},
                                               {{8, 9, 1}, {4}, false},
                                               {{8, 9, 1}, {5, 6, 7, 1}, false},
                                               {{8, 9, 1}, {2, 3}, false},
                                               {{3}, {1, 2, 3}, false},
                                               {{3}, {10, 10}, false},
                                               {{3}, {0}, false},
                                               {{6, 5, 4, 3}, {2, 1}, false},
                                               {{1, 2, 3, 4, 5, 6, 7}, {8, 9, 10}, false},
                                               {{1, 2, 3, 4, 5, 6, 7}, {8}, false}};
  for (int64_t batch : {1, 3, 32}) {
    ev::ScoringStats cached_stats, whole_stats;
    const auto cached = ev::score_loglikelihood(*model, requests, batch, &cached_stats, true);
    const auto whole = ev::score_loglikelihood(*model, requests, batch, &whole_stats, false);
    CHECK(cached_stats.shared_contexts == 2);  // {8, 9, 1} and {3}; the long one is cut
    CHECK(whole_stats.shared_contexts == 0);
    CHECK(cached_stats.tokens < whole_stats.tokens);
    for (size_t i = 0; i < requests.size(); ++i) {
      CAPTURE(i);
      CHECK(std::fabs(cached[i].logprob - whole[i].logprob) < 1e-5);
      CHECK(cached[i].is_greedy == whole[i].is_greedy);
      CHECK(cached[i].truncated_tokens == whole[i].truncated_tokens);
      CHECK(std::fabs(cached[i].logprob - direct_logprob(*model, requests[i].context,
                                                         requests[i].continuation)) < 1e-5);
    }
  }
}

TEST_CASE("fork_decoding copies sequences: decoding the copies equals prefilling each alone") {
  auto model = tiny_model();
  eng::NoGradGuard no_grad;
  const V a = {8, 9, 1}, b = {2, 2, 7};
  pm::DecodeState state = model->start_decoding(2, 6);
  V both = a;
  both.insert(both.end(), b.begin(), b.end());
  (void)model->decode_step(state, eng::Tensor::from_data(both.data(), {2, 3}, eng::DType::kI32));
  const std::vector<int64_t> source = {1, 0, 1};
  std::optional<pm::DecodeState> forked = model->fork_decoding(state, source);
  REQUIRE(forked.has_value());
  CHECK(forked->batch() == 3);
  CHECK(forked->length() == 3);
  const V next = {4, 5, 6};
  const std::vector<float> got =
      model->decode_step(*forked, eng::Tensor::from_data(next.data(), {3, 1}, eng::DType::kI32))
          .to_vector();
  for (int64_t row = 0; row < 3; ++row) {
    V prompt = source[static_cast<size_t>(row)] == 0 ? a : b;
    prompt.push_back(next[static_cast<size_t>(row)]);
    pm::DecodeState alone = model->start_decoding(1, 6);
    const std::vector<float> want =
        model->decode_step(alone, eng::Tensor::from_data(prompt.data(), {1, 4}, eng::DType::kI32))
            .to_vector();
    for (int64_t v = 0; v < 11; ++v)
      CHECK(got[static_cast<size_t>(row * 11 + v)] ==
            doctest::Approx(want[static_cast<size_t>(3 * 11 + v)]).epsilon(1e-5));
  }
  // The source state is unchanged: it still continues from length 3.
  CHECK(state.length() == 3);
  CHECK_THROWS(model->fork_decoding(state, std::vector<int64_t>{2}));
  CHECK_THROWS(model->fork_decoding(state, std::vector<int64_t>{}));
}

TEST_CASE("a short context with long choices is not worth a shared prefill: whole rows") {
  auto model = tiny_model();
  const std::vector<ev::TokenPair> requests = {{{5}, {1, 2, 3, 4, 5, 6}, false},
                                               {{5}, {6, 5, 4, 3, 2, 1}, false}};
  ev::ScoringStats stats;
  const auto r = ev::score_loglikelihood(*model, requests, 8, &stats, true);
  CHECK(stats.shared_contexts == 0);  // 11 tokens shared vs 12 as rows: not <= 3/4
  CHECK(stats.rows == 2);
  for (size_t i = 0; i < requests.size(); ++i)
    CHECK(std::fabs(r[i].logprob -
                    direct_logprob(*model, requests[i].context, requests[i].continuation)) < 1e-5);
}
