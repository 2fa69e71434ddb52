// Known answers for the sampler_basic selectors: greedy ties, the splitmix64 reference
// output, the categorical draw's frequencies and its zero-probability entries, mirostat's
// Zipf fit, truncation and mu update (llama.cpp semantics, μ0 = 2τ), and the accept() rules.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "greedy.hpp"
#include "logits_math.hpp"
#include "mirostat_v1.hpp"
#include "mirostat_v2.hpp"
#include "sample.hpp"
#include "sampler_test_util.hpp"

using namespace sampler_basic;
using sampler_test::logits_of;
using sampler_test::thrown_code;

TEST_CASE("greedy picks the argmax, the lowest id among ties, never a -inf token") {
  Greedy greedy;
  CHECK(greedy.select(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f}) == 1);
  CHECK(greedy.select(std::vector<float>{-INFINITY, -INFINITY, -7.0f}) == 2);
  CHECK(thrown_code([&] { greedy.select(std::vector<float>(3, -INFINITY)); }) ==
        PB_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("splitmix64 matches the reference generator") {
  SplitMix64 rng(0);  // Vigna's splitmix64.c from state 0
  CHECK(rng.next() == 0xe220a8397b1dcdafULL);
  CHECK(rng.next() == 0x6e789e6aa1b965f4ULL);
  SplitMix64 u(7);
  for (int i = 0; i < 1000; ++i) {
    const double x = u.uniform();
    REQUIRE(x >= 0.0);
    REQUIRE(x < 1.0);
  }
}

TEST_CASE("sample draws with the softmax frequencies and never a -inf token") {
  const std::array<double, 4> p = {0.5, 0.3, 0.15, 0.05};
  std::vector<float> z = logits_of({0.5, 0.3, 0.15, 0.05});
  z.push_back(-INFINITY);
  Sample sample(42);
  const int draws = 20000;
  std::array<int, 5> counts{};
  for (int i = 0; i < draws; ++i) ++counts[static_cast<size_t>(sample.select(z))];
  CHECK(counts[4] == 0);
  for (size_t i = 0; i < p.size(); ++i) {
    const double sigma = std::sqrt(draws * p[i] * (1 - p[i]));
    CHECK(std::fabs(counts[i] - draws * p[i]) < 5 * sigma);
  }
}

TEST_CASE("sample is reproducible under a seed and reset() repeats it") {
  const std::vector<float> z = {0.1f, 0.0f, -0.2f, 0.3f, 0.05f, -INFINITY};
  Sample a(9), b(9), other(10);
  std::vector<int32_t> first, second, third;
  for (int i = 0; i < 64; ++i) {
    first.push_back(a.select(z));
    second.push_back(b.select(z));
    third.push_back(other.select(z));
  }
  CHECK(first == second);
  CHECK(first != third);
  a.reset();
  for (int i = 0; i < 64; ++i) REQUIRE(a.select(z) == first[static_cast<size_t>(i)]);
}

// The draw as select() made it before it skipped the -inf entries: a weight for every id (0
// for -inf) in double, then draw_index over the whole vector.
int32_t draw_over_whole_vocabulary(const std::vector<float>& z, SplitMix64& rng) {
  float max_z = -INFINITY;
  for (const float x : z) max_z = std::max(max_z, x);
  std::vector<double> w(z.size());
  for (size_t i = 0; i < z.size(); ++i)
    w[i] = std::isfinite(z[i]) ? std::exp(double(z[i]) - double(max_z)) : 0.0;
  return static_cast<int32_t>(draw_index(w, rng));
}

TEST_CASE("sample draws the same ids as a draw over the whole vocabulary, finite ids anywhere") {
  // Finite logits scattered over 16-wide blocks (first, middle, last of a block, two in one,
  // the tail past the last whole block) among -inf, as top_k leaves them; and a dense case.
  std::vector<float> sparse(103, -INFINITY);
  for (const int id : {0, 15, 16, 40, 41, 77, 96, 102})
    sparse[static_cast<size_t>(id)] = 0.1f * float(id % 7) - 0.2f;
  std::vector<float> dense(37);
  for (size_t i = 0; i < dense.size(); ++i) dense[i] = std::sin(float(i));
  for (const std::vector<float>* z : {&sparse, &dense}) {
    Sample sample(5);
    SplitMix64 reference(5);
    for (int i = 0; i < 2000; ++i) {
      const int32_t id = sample.select(*z);
      REQUIRE(id == draw_over_whole_vocabulary(*z, reference));
      REQUIRE(std::isfinite((*z)[static_cast<size_t>(id)]));
    }
  }
}

TEST_CASE("max_logit is the largest logit at any length and position") {
  for (const size_t n : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{50}}) {
    for (size_t at = 0; at < n; ++at) {
      std::vector<float> z(n, -3.0f);
      z[at] = 2.5f;
      REQUIRE(max_logit(z) == 2.5f);
    }
  }
  CHECK(max_logit(std::vector<float>(20, -INFINITY)) == -INFINITY);
  CHECK(max_logit(std::vector<float>{-INFINITY, -7.0f, -INFINITY}) == -7.0f);
}

TEST_CASE("mirostat_v1 fits the Zipf exponent and computes k as llama.cpp does") {
  // p_i ∝ (i+1)^-1.2 over N = 1000: b_i = 1.2 t_i exactly, so s = 1.2, eps = 0.2 and
  // k = (0.2 * 2^mu / (1 - 1000^-0.2))^(1/1.2): 107.35 (mu 10), 10.65 (6), 3.35 (4), 1.06 (2).
  std::vector<double> p(1000);
  double total = 0.0;
  for (size_t i = 0; i < p.size(); ++i) total += (p[i] = std::pow(i + 1.0, -1.2));
  for (double& x : p) x /= total;
  CHECK(MirostatV1::truncation_k(p, p.size(), 100, 10.0, 1000) == 107);
  CHECK(MirostatV1::truncation_k(p, p.size(), 100, 6.0, 1000) == 10);
  CHECK(MirostatV1::truncation_k(p, p.size(), 100, 4.0, 1000) == 3);
  CHECK(MirostatV1::truncation_k(p, p.size(), 100, 2.0, 1000) == 1);
  CHECK(MirostatV1::truncation_k(p, p.size(), 100, 60.0, 1000) == 1000);  // k beyond n: all
  // Guards: one candidate; a flat distribution (s = 0) does not crash.
  CHECK(MirostatV1::truncation_k(std::vector<double>{1.0}, 1, 100, 10.0, 1000) == 1);
  const size_t flat = MirostatV1::truncation_k(std::vector<double>(8, 0.125), 8, 100, 10.0, 8);
  CHECK(flat >= 1);
  CHECK(flat <= 8);
}

TEST_CASE("mirostat_v1 keeps truncation_k tokens and updates mu from the kept probability") {
  std::vector<float> z(1000);
  for (size_t i = 0; i < z.size(); ++i) z[i] = static_cast<float>(-1.2 * std::log(i + 1.0));
  MirostatV1 m(3.0, 0.1, 100, 5);  // mu0 = 6 -> k = 10 (s ~ 1.2)
  CHECK(m.mu() == doctest::Approx(6.0));
  const int32_t token = m.select(z);
  CHECK(m.pending_ids().size() == 10);
  CHECK(token < 10);
  const double p_kept = m.pending_probs()[static_cast<size_t>(token)];
  m.accept(token);
  CHECK(m.mu() == doctest::Approx(6.0 - 0.1 * (-std::log2(p_kept) - 3.0)));
}

TEST_CASE("mirostat_v2 truncates at surprise mu and updates mu (μ0 = 2τ)") {
  // p = [0.5, 0.25, 0.125, 0.125]: surprises 1, 2, 3, 3 bits; tau = 1.1 -> mu0 = 2.2 keeps
  // tokens 0 and 1, renormalised to [2/3, 1/3].
  const std::vector<float> z = logits_of({0.5, 0.25, 0.125, 0.125});
  MirostatV2 m(1.1, 0.1, 3);
  CHECK(m.mu() == doctest::Approx(2.2));
  const int32_t token = m.select(z);
  REQUIRE(m.pending_ids() == std::vector<int32_t>{0, 1});
  CHECK(m.pending_probs()[0] == doctest::Approx(2.0 / 3.0));
  const double p = token == 0 ? 2.0 / 3.0 : 1.0 / 3.0;
  m.accept(token);
  CHECK(m.mu() == doctest::Approx(2.2 - 0.1 * (-std::log2(p) - 1.1)));
  // mu below every surprise: the top token alone.
  MirostatV2 tight(0.2, 0.1, 3);  // mu0 = 0.4 < 1 bit
  CHECK(tight.select(z) == 0);
  CHECK(tight.pending_ids().size() == 1);
  tight.accept(0);  // p~ = 1: surprise 0, mu += 0.1 * 0.2
  CHECK(tight.mu() == doctest::Approx(0.42));
}

TEST_CASE("mirostat accept() needs a select() and a token of its truncated set") {
  const std::vector<float> z = logits_of({0.5, 0.25, 0.125, 0.125});
  MirostatV2 m(1.1, 0.1, 3);
  std::string message;
  CHECK(thrown_code([&] { m.accept(0); }, &message) == PB_STATUS_INVALID_ARGUMENT);
  CHECK(message.find("without a select()") != std::string::npos);
  m.select(z);
  CHECK(thrown_code([&] { m.accept(3); }) == PB_STATUS_INVALID_ARGUMENT);  // cut by mu
  m.accept(1);
  CHECK(thrown_code([&] { m.accept(1); }) == PB_STATUS_INVALID_ARGUMENT);  // consumed
}

TEST_CASE("mirostat reset() restores mu = 2 tau and the first draws; a copy is independent") {
  std::vector<float> z(50);
  for (size_t i = 0; i < z.size(); ++i) z[i] = static_cast<float>(-0.3 * std::log(i + 1.0));
  MirostatV1 m(4.0, 0.2, 100, 11);
  std::vector<int32_t> first;
  for (int i = 0; i < 20; ++i) {
    first.push_back(m.select(z));
    m.accept(first.back());
  }
  const double mu_after = m.mu();
  CHECK(mu_after != doctest::Approx(8.0));
  MirostatV1 copy = m;  // what clone() does
  std::vector<int32_t> from_copy;
  for (int i = 0; i < 10; ++i) {
    from_copy.push_back(copy.select(z));
    copy.accept(from_copy.back());
  }
  CHECK(m.mu() == mu_after);  // advancing the copy left the original alone
  for (int i = 0; i < 10; ++i) {
    const int32_t t = m.select(z);
    REQUIRE(t == from_copy[static_cast<size_t>(i)]);
    m.accept(t);
  }
  m.reset();
  CHECK(m.mu() == doctest::Approx(8.0));
  for (int i = 0; i < 20; ++i) {
    const int32_t t = m.select(z);
    REQUIRE(t == first[static_cast<size_t>(i)]);
    m.accept(t);
  }
}

TEST_CASE("mirostat_v2 keeps the same set as a full-sort reference on a large vocabulary") {
  SplitMix64 rng(6);
  std::vector<float> z(5000);
  for (float& x : z) x = static_cast<float>(-1.1 * std::log(1.0 + rng.uniform() * 5000.0));
  for (double tau : {1.0, 2.5, 4.0}) {
    MirostatV2 m(tau, 0.1, 1);
    m.select(z);
    std::vector<int32_t> order(z.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::sort(order.begin(), order.end(), ByLogitDescending{z});
    double max_logit = z[order[0]], total = 0.0;
    for (float x : z) total += std::exp(x - max_logit);
    std::vector<int32_t> expected;
    for (int32_t id : order) {
      if (-std::log2(std::exp(z[id] - max_logit) / total) > 2.0 * tau) break;
      expected.push_back(id);
    }
    if (expected.empty()) expected.push_back(order[0]);
    CAPTURE(tau);
    CHECK(m.pending_ids() == expected);
  }
}
