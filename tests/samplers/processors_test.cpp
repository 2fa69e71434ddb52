// Known answers for the sampler_basic logits processors, worked by hand on small vectors
// (the numbers in the comments), including the edges the references disagree on or got
// wrong: top-k ties, top-p cumulative mass exactly p and p = 1, typical's boundary, penalty
// signs and counts, n-gram bans with and without the prompt.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "frequency_penalty.hpp"
#include "logits_math.hpp"
#include "min_p.hpp"
#include "no_repeat_ngram.hpp"
#include "presence_penalty.hpp"
#include "repetition_penalty.hpp"
#include "sampler_test_util.hpp"
#include "temperature.hpp"
#include "top_k.hpp"
#include "top_p.hpp"
#include "typical.hpp"

using namespace sampler_basic;
using sampler_test::applied;
using sampler_test::kept;
using sampler_test::logits_of;
using sampler_test::thrown_code;
using Ids = std::vector<int32_t>;

TEST_CASE("temperature divides finite logits, keeps -inf, refuses T <= 0 naming greedy") {
  Temperature t(2.0);
  const std::vector<float> out = applied(t, {2.0f, -4.0f, -INFINITY, 0.0f});
  CHECK(out == std::vector<float>{1.0f, -2.0f, -INFINITY, 0.0f});
  std::string message;
  CHECK(thrown_code([] { Temperature zero(0.0); }, &message) == PB_STATUS_INVALID_ARGUMENT);
  CHECK(message.find("greedy") != std::string::npos);
  CHECK(thrown_code([] { Temperature negative(-0.5); }) == PB_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("temperature keeps -inf where T overflows to +inf in f32") {
  Temperature huge(1e39);  // finite as a double, +inf as the f32 the plugin divides by
  const std::vector<float> out = applied(huge, {2.0f, -INFINITY, -3.0f});
  CHECK(out[0] == 0.0f);
  CHECK(out[1] == -INFINITY);
  CHECK(out[2] == 0.0f);
}

// k <= V / 16 takes the heap selection, larger k nth_element: both against sorting a copy, on
// a vocabulary with many ties (values drawn from 40 levels) and some -inf.
TEST_CASE("top_k's heap and nth_element paths agree with a sorted reference") {
  std::vector<float> z(1000);
  for (size_t i = 0; i < z.size(); ++i)
    z[i] = i % 97 == 0 ? -INFINITY : static_cast<float>((i * 7919) % 40) * 0.25f;
  for (int64_t k : {1, 10, 40, 62, 63, 64, 200, 999}) {
    CAPTURE(k);
    std::vector<float> sorted = z;
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    const float kth = sorted[static_cast<size_t>(k - 1)];
    Ids expected;
    for (size_t i = 0; i < z.size(); ++i)
      if (std::isfinite(z[i]) && z[i] >= kth) expected.push_back(static_cast<int32_t>(i));
    TopK top(k, 1);
    CHECK(kept(applied(top, z)) == expected);
  }
}

TEST_CASE("top_k keeps every token tied with the k-th value (HF)") {
  const std::vector<float> z = {1.0f, 3.0f, 3.0f, 2.0f, 0.0f};
  TopK k1(1, 1);
  CHECK(kept(applied(k1, z)) == Ids{1, 2});  // 1st value 3 is tied: both kept
  TopK k2(2, 1);
  CHECK(kept(applied(k2, z)) == Ids{1, 2});
  TopK k3(3, 1);
  CHECK(kept(applied(k3, z)) == Ids{1, 2, 3});
  TopK k9(9, 1);
  CHECK(applied(k9, z) == z);
  TopK with_min_keep(1, 4);  // k = max(k, min_tokens_to_keep)
  CHECK(kept(applied(with_min_keep, z)) == Ids{0, 1, 2, 3});
  // Fewer finite logits than k: the k-th value is -inf, nothing changes.
  TopK k3_sparse(3, 1);
  const std::vector<float> sparse = {-INFINITY, 1.0f, -INFINITY, 0.5f};
  CHECK(applied(k3_sparse, sparse) == sparse);
}

TEST_CASE("top_p keeps the smallest most-probable set whose mass reaches p") {
  // p = [0.5, 0.3, 0.15, 0.05], shuffled to check the sort: ids 1, 3, 0, 2.
  const std::vector<float> z = logits_of({0.15, 0.5, 0.05, 0.3});
  TopP exact(0.8, 1);  // 0.5 + 0.3 == 0.8 exactly: reached, token 0.15 is removed
  CHECK(kept(applied(exact, z)) == Ids{1, 3});
  TopP just_above(0.8001, 1);
  CHECK(kept(applied(just_above, z)) == Ids{0, 1, 3});
  TopP below(0.79, 1);
  CHECK(kept(applied(below, z)) == Ids{1, 3});
  TopP half(0.5, 1);  // the top token alone has mass 0.5
  CHECK(kept(applied(half, z)) == Ids{1});
  TopP zero(0.0, 1);  // HF #19839: no NaN, min_tokens_to_keep survive
  CHECK(kept(applied(zero, z)) == Ids{1});
  TopP min_keep(0.1, 3);
  CHECK(kept(applied(min_keep, z)) == Ids{0, 1, 3});
}

TEST_CASE("top_p with p = 1 changes nothing, even a negligible tail") {
  const std::vector<float> z = {0.0f, -60.0f, -INFINITY, 3.0f};
  TopP one(1.0, 1);
  CHECK(applied(one, z) == z);
}

TEST_CASE("min_p keeps p >= min_p * p_max, in logit space") {
  const std::vector<float> z = logits_of({0.5, 0.3, 0.15, 0.05});
  MinP quarter(0.25, 1);  // threshold 0.125
  CHECK(kept(applied(quarter, z)) == Ids{0, 1, 2});
  MinP half(0.5, 1);  // threshold 0.25
  CHECK(kept(applied(half, z)) == Ids{0, 1});
  MinP off(0.0, 1);
  CHECK(applied(off, z) == z);
  MinP keep3(0.9, 3);
  CHECK(kept(applied(keep3, z)) == Ids{0, 1, 2});
}

TEST_CASE("typical keeps the tokens closest to the entropy until the mass is reached") {
  // H = 1.14212; |-ln p - H| = 0.449, 0.062, 0.755, 1.854, so the order is 1, 0, 2, 3 with
  // cumulative mass 0.3, 0.8, 0.95, 1.0.
  const std::vector<float> z = logits_of({0.5, 0.3, 0.15, 0.05});
  Typical ninety(0.9, 1);
  CHECK(kept(applied(ninety, z)) == Ids{0, 1, 2});
  Typical half(0.5, 1);
  CHECK(kept(applied(half, z)) == Ids{0, 1});
  Typical fifth(0.2, 1);  // the most probable token is not the most typical one
  CHECK(kept(applied(fifth, z)) == Ids{1});
  Typical eight(0.8, 1);  // cumulative 0.8 exactly reaches 0.8 (HF #27165: not one more)
  CHECK(kept(applied(eight, z)) == Ids{0, 1});
  Typical off(1.0, 1);
  CHECK(applied(off, z) == z);
  Typical ties(0.1, 1);  // equal logits score equally: the boundary tie is kept
  CHECK(kept(applied(ties, {1.0f, 1.0f, -2.0f})) == Ids{0, 1});
}

TEST_CASE("repetition_penalty divides positive, multiplies negative logits, once per token") {
  const std::vector<float> z = {2.0f, -2.0f, 0.0f, 1.0f, -INFINITY};
  const std::vector<int32_t> history = {0, 1, 0, 2, 4};  // prompt = {0, 1}
  RepetitionPenalty all(2.0, 0, true);
  CHECK(applied(all, z, history, 2) == std::vector<float>{1.0f, -4.0f, 0.0f, 1.0f, -INFINITY});
  RepetitionPenalty generated_only(2.0, 0, false);  // window {0, 2, 4}
  CHECK(applied(generated_only, z, history, 2) ==
        std::vector<float>{1.0f, -2.0f, 0.0f, 1.0f, -INFINITY});
  RepetitionPenalty last_two(2.0, 2, true);  // window {2, 4}
  CHECK(applied(last_two, z, history, 2) == std::vector<float>{2.0f, -2.0f, 0.0f, 1.0f, -INFINITY});
  // Not shift-invariant: adding 3 to every logit changes which way token 1 moves.
  const std::vector<float> shifted = applied(all, {5.0f, 1.0f, 3.0f, 4.0f, -INFINITY}, history, 2);
  CHECK(shifted[1] == doctest::Approx(0.5));
  CHECK(thrown_code([] { RepetitionPenalty bad(0.0, 0, true); }) == PB_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("frequency and presence penalties follow OpenAI's formula") {
  const std::vector<float> z = {2.0f, -2.0f, 0.0f, 1.0f, -INFINITY};
  const std::vector<int32_t> history = {3, 0, 1, 0, 4};  // prompt = {3}
  FrequencyPenalty frequency(0.5, 0, false);             // counts: 0 -> 2, 1 -> 1, 4 -> 1
  CHECK(applied(frequency, z, history, 1) ==
        std::vector<float>{1.0f, -2.5f, 0.0f, 1.0f, -INFINITY});
  FrequencyPenalty with_prompt(0.5, 0, true);
  CHECK(applied(with_prompt, z, history, 1) ==
        std::vector<float>{1.0f, -2.5f, 0.0f, 0.5f, -INFINITY});
  FrequencyPenalty encourage(-1.0, 0, false);
  CHECK(applied(encourage, z, history, 1) ==
        std::vector<float>{4.0f, -1.0f, 0.0f, 1.0f, -INFINITY});
  PresencePenalty presence(0.5, 0, false);
  CHECK(applied(presence, z, history, 1) == std::vector<float>{1.5f, -2.5f, 0.0f, 1.0f, -INFINITY});
  PresencePenalty presence_last1(0.5, 1, false);  // window {4}: only a removed token
  CHECK(applied(presence_last1, z, history, 1) == z);
}

TEST_CASE("penalties refuse history ids outside the vocabulary") {
  RepetitionPenalty r(1.5, 0, true);
  std::string message;
  CHECK(thrown_code(
            [&] {
              applied(r, {0.0f, 1.0f}, {0, 7}, 0);
            },
            &message) == PB_STATUS_INVALID_ARGUMENT);
  CHECK(message.find("history[1] = 7") != std::string::npos);
}

TEST_CASE("no_repeat_ngram bans the tokens that would complete a seen n-gram (HF)") {
  const std::vector<float> z(6, 0.0f);
  NoRepeatNgram bigram(2, true);
  CHECK(kept(applied(bigram, z, {1, 2, 3, 1}, 0)) == Ids{0, 1, 3, 4, 5});  // 1 -> 2 seen
  NoRepeatNgram trigram(3, true);
  CHECK(kept(applied(trigram, z, {1, 2, 3, 1, 2}, 0)) == Ids{0, 1, 2, 4, 5});
  CHECK(kept(applied(trigram, z, {1, 2, 5, 1, 2}, 0)) == Ids{0, 1, 2, 3, 4});
  CHECK(applied(trigram, z, {1, 2}, 0) == z);  // no complete 3-gram yet
  NoRepeatNgram unigram(1, true);
  CHECK(kept(applied(unigram, z, {4, 0, 4}, 0)) == Ids{1, 2, 3, 5});
  NoRepeatNgram generated_only(2, false);  // the bigram 1 -> 2 lies in the prompt only
  CHECK(applied(generated_only, z, {1, 2, 0, 1}, 2) == z);
  CHECK(kept(applied(bigram, z, {1, 2, 0, 1}, 2)) == Ids{0, 1, 3, 4, 5});
  // Banning every remaining token is refused instead of leaving only -inf.
  std::string message;
  CHECK(thrown_code(
            [&] {
              applied(bigram, {-INFINITY, 0.0f}, {0, 1, 0}, 0);
            },
            &message) == PB_STATUS_INVALID_ARGUMENT);
  CHECK(message.find("no token is left") != std::string::npos);
}

TEST_CASE("processors refuse NaN and +inf logits") {
  TopP top_p(0.9, 1);
  CHECK(thrown_code([&] { applied(top_p, {0.0f, NAN}); }) == PB_STATUS_INVALID_ARGUMENT);
  MinP min_p(0.1, 1);
  CHECK(thrown_code([&] { applied(min_p, {INFINITY, 0.0f}); }) == PB_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("the order of a chain changes the result (why the config fixes it)") {
  const std::vector<float> z = logits_of({0.5, 0.3, 0.15, 0.05});
  Temperature sharpen(0.5);  // p^2 renormalised: 0.685, 0.247, 0.062, 0.007
  TopP nucleus(0.9, 1);
  const std::vector<float> temperature_first = applied(nucleus, applied(sharpen, z));
  const std::vector<float> top_p_first = applied(sharpen, applied(nucleus, z));
  CHECK(kept(temperature_first) == Ids{0, 1});
  CHECK(kept(top_p_first) == Ids{0, 1, 2});
}

TEST_CASE("LazySorted yields the full sort's order, block by block") {
  SplitMix64 rng(3);
  std::vector<float> z(5000);
  for (float& x : z) x = static_cast<float>(std::floor(rng.uniform() * 300.0));  // many ties
  std::vector<int32_t> ids(z.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::vector<int32_t> full = ids;
  std::sort(full.begin(), full.end(), ByLogitDescending{z});
  LazySorted lazy(ids, ByLogitDescending{z});
  for (size_t rank = 0; rank < full.size(); ++rank) REQUIRE(lazy.at(rank) == full[rank]);
}

TEST_CASE("top_p on a large vocabulary equals a full-sort reference") {
  // Reference: sort everything (descending, lower id first on ties), keep while the mass
  // before a token is below p (with the same tolerance).
  SplitMix64 rng(4);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> z(4000);
    for (float& x : z) x = static_cast<float>((rng.uniform() * 2.0 - 1.0) * (1.0 + trial));
    const double p = 0.05 + 0.9 * rng.uniform();
    std::vector<int32_t> order(z.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::sort(order.begin(), order.end(), ByLogitDescending{z});
    double max_logit = z[order[0]], total = 0.0;
    for (float x : z) total += std::exp(x - max_logit);
    std::vector<int32_t> expected;
    double before = 0.0;
    for (int32_t id : order) {
      if (!expected.empty() && before >= p - kMassTolerance) break;
      expected.push_back(id);
      before += std::exp(z[id] - max_logit) / total;
    }
    std::sort(expected.begin(), expected.end());
    TopP top_p(p, 1);
    CHECK(kept(applied(top_p, z)) == expected);
  }
}

TEST_CASE("typical on a large vocabulary equals a full-sort reference (HF rule)") {
  SplitMix64 rng(5);
  for (int trial = 0; trial < 10; ++trial) {
    std::vector<float> z(3000);
    for (float& x : z) x = static_cast<float>((rng.uniform() * 2.0 - 1.0) * (1.0 + trial));
    const double mass = 0.05 + 0.9 * rng.uniform();
    double max_logit = -INFINITY, total = 0.0, entropy = 0.0;
    for (float x : z) max_logit = std::max(max_logit, static_cast<double>(x));
    for (float x : z) total += std::exp(x - max_logit);
    std::vector<double> p(z.size()), score(z.size());
    for (size_t i = 0; i < z.size(); ++i)
      entropy -= (p[i] = std::exp(z[i] - max_logit) / total) * std::log(p[i]);
    for (size_t i = 0; i < z.size(); ++i) score[i] = std::fabs(-std::log(p[i]) - entropy);
    std::vector<int32_t> order(z.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return score[a] < score[b] || (score[a] == score[b] && a < b);
    });
    size_t last = order.size() - 1;
    double cumulative = 0.0;
    for (size_t r = 0; r < order.size(); ++r) {
      if ((cumulative += p[order[r]]) >= mass - kMassTolerance) {
        last = r;
        break;
      }
    }
    std::vector<int32_t> expected;
    for (size_t i = 0; i < z.size(); ++i) {
      if (score[i] <= score[order[last]]) expected.push_back(static_cast<int32_t>(i));
    }
    Typical typical(mass, 1);
    CHECK(kept(applied(typical, z)) == expected);
  }
}
