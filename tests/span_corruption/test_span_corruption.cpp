// T5 span corruption (core/train/span_corruption.hpp) against T5's reference preprocessing:
// known answers for the deterministic parts (random_spans_helper's lengths, the noise token and
// span counts of random_spans_noise_mask, both from scripts/t5_span_corruption_lengths.py), the
// shape of every mask (alternating spans starting with non-noise), the sentinels, the
// reconstruction of the original from (inputs, targets), determinism, refusals, and the
// statistics over many examples: noise density 0.15, mean noise span length 3, and the
// distribution of span lengths of a uniformly random segmentation.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "train/span_corruption.hpp"

namespace {

namespace tr = patchbay::train;

struct LengthsRow {
  int64_t inputs_length;
  double noise_density, mean_span;
  int64_t tokens_length, targets_length;
};
// scripts/t5_span_corruption_lengths.py (T5's random_spans_helper, transcribed).
constexpr LengthsRow kLengths[] = {
    {64, 0.15, 3.0, 70, 14},      {64, 0.5, 3.0, 94, 64},       {64, 0.3, 8.0, 86, 30},
    {114, 0.15, 3.0, 126, 26},    {114, 0.5, 3.0, 170, 114},    {114, 0.3, 8.0, 153, 53},
    {128, 0.15, 3.0, 141, 29},    {128, 0.5, 3.0, 190, 128},    {128, 0.3, 8.0, 173, 59},
    {256, 0.15, 3.0, 284, 58},    {256, 0.5, 3.0, 382, 256},    {256, 0.3, 8.0, 346, 118},
    {512, 0.15, 3.0, 568, 114},   {512, 0.5, 3.0, 766, 512},    {512, 0.3, 8.0, 693, 235},
    {568, 0.15, 3.0, 630, 126},   {568, 0.5, 3.0, 850, 568},    {568, 0.3, 8.0, 769, 261},
    {1024, 0.15, 3.0, 1137, 229}, {1024, 0.5, 3.0, 1534, 1024}, {1024, 0.3, 8.0, 1387, 469},
};

struct CountsRow {
  int64_t length;
  double noise_density, mean_span;
  int64_t noise_tokens, noise_spans;  // of the mask before T5 cuts it back to `length`
};
// The same script: float32 products, rounding half to even (tf.round), e.g. 10 * 0.5 / 2 =
// 2.5 spans -> 2, 114 * 0.5 / 2 = 28.5 -> 28.
constexpr CountsRow kCounts[] = {
    {2, 0.15, 3.0, 1, 1},     {2, 0.5, 2.0, 1, 1},       {3, 0.15, 3.0, 1, 1},
    {3, 0.5, 2.0, 2, 1},      {7, 0.15, 3.0, 1, 1},      {7, 0.5, 2.0, 4, 2},
    {10, 0.15, 3.0, 2, 1},    {10, 0.5, 2.0, 5, 2},      {20, 0.15, 3.0, 3, 1},
    {20, 0.5, 2.0, 10, 5},    {50, 0.15, 3.0, 8, 3},     {50, 0.5, 2.0, 25, 12},
    {100, 0.15, 3.0, 15, 5},  {100, 0.5, 2.0, 50, 25},   {114, 0.15, 3.0, 17, 6},
    {114, 0.5, 2.0, 57, 28},  {512, 0.15, 3.0, 77, 26},  {512, 0.5, 2.0, 256, 128},
    {568, 0.15, 3.0, 85, 28}, {568, 0.5, 2.0, 284, 142},
};

// Noise tokens and maximal noise runs of a mask.
std::pair<int64_t, int64_t> noise_and_spans(const std::vector<uint8_t>& mask) {
  int64_t noise = 0, spans = 0;
  for (size_t i = 0; i < mask.size(); ++i) {
    noise += mask[i];
    if (mask[i] != 0 && (i == 0 || mask[i - 1] == 0)) ++spans;
  }
  return {noise, spans};
}

std::vector<int32_t> iota_tokens(int64_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>(10 + i);
  return t;
}

TEST_CASE("compute_input_and_target_lengths equals T5's random_spans_helper") {
  for (const LengthsRow& row : kLengths) {
    CAPTURE(row.inputs_length);
    CAPTURE(row.noise_density);
    const tr::SpanCorruptionLengths got =
        tr::compute_input_and_target_lengths(row.inputs_length, row.noise_density, row.mean_span);
    CHECK(got.tokens_length == row.tokens_length);
    CHECK(got.targets_length == row.targets_length);
  }
}

TEST_CASE("noise token and span counts equal T5's, every mask alternates from non-noise") {
  for (const CountsRow& row : kCounts) {
    CAPTURE(row.length);
    CAPTURE(row.noise_density);
    for (uint64_t seed = 0; seed < 20; ++seed) {
      const std::vector<uint8_t> mask =
          tr::random_spans_noise_mask(row.length, row.noise_density, row.mean_span, seed);
      REQUIRE(static_cast<int64_t>(mask.size()) == row.length);
      const auto [noise, spans] = noise_and_spans(mask);
      CHECK(noise == row.noise_tokens);
      CHECK(spans == row.noise_spans);
      CHECK(mask.front() == 0);  // spans start with non-noise
      CHECK(mask.back() == 1);   // and end with noise (no random roll)
    }
  }
  // Length 1: T5 builds the mask for length 2 ([0, 1]) and keeps the first token: no noise.
  CHECK(tr::random_spans_noise_mask(1, 0.15, 3.0, 7) == std::vector<uint8_t>{0});
  CHECK(tr::random_spans_noise_mask(0, 0.15, 3.0, 7).empty());
  CHECK(tr::random_spans_noise_mask(40, 0.0, 3.0, 7) == std::vector<uint8_t>(40, 0));
}

TEST_CASE("span_corrupt: sentinels descend from the top, inputs and targets rebuild the text") {
  tr::SpanCorruptionOptions options;
  options.sentinel_top_id = 32099;  // T5: vocabulary 32100, <extra_id_0> = 32099
  options.eos_id = 1;
  const std::vector<int32_t> tokens = iota_tokens(512);
  const tr::SpanCorruptedExample ex = tr::span_corrupt(tokens, options, 42);
  CHECK(ex.noise_spans == 26);
  // T5's lengths: non-noise + a sentinel per span + EOS; noise + sentinels + EOS.
  CHECK(ex.inputs.size() == 512 - 77 + 26 + 1);
  CHECK(ex.targets.size() == 77 + 26 + 1);
  CHECK(ex.inputs.back() == 1);
  CHECK(ex.targets.back() == 1);
  CHECK(ex.targets.front() == 32099);  // <extra_id_0> opens the targets
  // Sentinels in order of appearance: 32099, 32098, ... in both sequences.
  auto sentinels = [&](const std::vector<int32_t>& seq) {
    std::vector<int32_t> s;
    for (int32_t id : seq)
      if (id >= 32099 - 99) s.push_back(id);
    return s;
  };
  std::vector<int32_t> expected;
  for (int32_t k = 0; k < 26; ++k) expected.push_back(32099 - k);
  CHECK(sentinels(ex.inputs) == expected);
  CHECK(sentinels(ex.targets) == expected);
  // Each input sentinel stands for the target tokens after the same sentinel.
  std::map<int32_t, std::vector<int32_t>> span_of;
  int32_t current = -1;
  for (size_t i = 0; i + 1 < ex.targets.size(); ++i) {
    if (ex.targets[i] >= 32000) {
      current = ex.targets[i];
      continue;
    }
    span_of[current].push_back(ex.targets[i]);
  }
  std::vector<int32_t> rebuilt;
  for (size_t i = 0; i + 1 < ex.inputs.size(); ++i) {
    if (ex.inputs[i] >= 32000)
      rebuilt.insert(rebuilt.end(), span_of[ex.inputs[i]].begin(), span_of[ex.inputs[i]].end());
    else
      rebuilt.push_back(ex.inputs[i]);
  }
  CHECK(rebuilt == tokens);
  // The mask says which tokens went to the targets.
  std::vector<int32_t> noise_tokens;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (ex.noise_mask[i] != 0) noise_tokens.push_back(tokens[i]);
  std::vector<int32_t> target_tokens;
  for (size_t i = 0; i + 1 < ex.targets.size(); ++i)
    if (ex.targets[i] < 32000) target_tokens.push_back(ex.targets[i]);
  CHECK(noise_tokens == target_tokens);
}

TEST_CASE("span_corrupt is a pure function of (tokens, options, seed)") {
  tr::SpanCorruptionOptions options;
  options.sentinel_top_id = 999;
  const std::vector<int32_t> tokens = iota_tokens(200);
  const tr::SpanCorruptedExample a = tr::span_corrupt(tokens, options, 5);
  const tr::SpanCorruptedExample b = tr::span_corrupt(tokens, options, 5);
  const tr::SpanCorruptedExample c = tr::span_corrupt(tokens, options, 6);
  CHECK(a.inputs == b.inputs);
  CHECK(a.targets == b.targets);
  CHECK(a.noise_mask != c.noise_mask);
  CHECK(a.inputs.size() == c.inputs.size());  // the counts are deterministic, the spans are not
}

TEST_CASE("noise density 0.15 and mean span length 3 over many examples; span lengths random") {
  // Length 100: 15 noise tokens in 5 spans, 85 non-noise tokens in 5 spans, every example.
  const int64_t length = 100, examples = 4000;
  int64_t noise = 0, spans = 0;
  std::map<int64_t, int64_t> noise_span_lengths, first_nonnoise_lengths;
  std::vector<int64_t> noise_at(static_cast<size_t>(length), 0);
  for (int64_t e = 0; e < examples; ++e) {
    const std::vector<uint8_t> mask =
        tr::random_spans_noise_mask(length, 0.15, 3.0, 1000 + static_cast<uint64_t>(e));
    const auto [n, s] = noise_and_spans(mask);
    noise += n;
    spans += s;
    int64_t run = 0, first = 0;
    while (mask[static_cast<size_t>(first)] == 0) ++first;
    ++first_nonnoise_lengths[first];
    for (int64_t i = 0; i < length; ++i) {
      noise_at[static_cast<size_t>(i)] += mask[static_cast<size_t>(i)];
      if (mask[static_cast<size_t>(i)] != 0) ++run;
      if (run > 0 && (i + 1 == length || mask[static_cast<size_t>(i + 1)] == 0)) {
        ++noise_span_lengths[run];
        run = 0;
      }
    }
  }
  const double density = static_cast<double>(noise) / static_cast<double>(examples * length);
  const double mean_span = static_cast<double>(noise) / static_cast<double>(spans);
  CHECK(density == doctest::Approx(0.15).epsilon(1e-12));
  CHECK(mean_span == doctest::Approx(3.0).epsilon(1e-12));
  // A uniformly random segmentation of n = 15 items into k = 5 non-empty segments gives a
  // segment length l with probability C(n - l - 1, k - 2) / C(n - 1, k - 1). 20000 spans:
  // each frequency within 4.5 standard deviations of its expectation.
  auto choose = [](int64_t n, int64_t k) {
    double r = 1;
    for (int64_t i = 1; i <= k; ++i)
      r = r * static_cast<double>(n - k + i) / static_cast<double>(i);
    return r;
  };
  const double total = static_cast<double>(spans);
  for (int64_t l = 1; l <= 11; ++l) {
    CAPTURE(l);
    const double p = choose(15 - l - 1, 3) / choose(14, 4);
    const double expected = p * total, sd = std::sqrt(total * p * (1 - p));
    CHECK(std::fabs(static_cast<double>(noise_span_lengths[l]) - expected) <= 4.5 * sd + 1);
  }
  // The first non-noise span (85 items in 5 segments): P(l) = C(85 - l - 1, 3) / C(84, 4).
  for (int64_t l : {1, 2, 5, 10, 20}) {
    CAPTURE(l);
    const double p = choose(85 - l - 1, 3) / choose(84, 4);
    const double expected = p * static_cast<double>(examples);
    const double sd = std::sqrt(static_cast<double>(examples) * p * (1 - p));
    CHECK(std::fabs(static_cast<double>(first_nonnoise_lengths[l]) - expected) <= 4.5 * sd + 1);
  }
  // Every position past the first can be noise; the first never is, the last always is.
  CHECK(noise_at.front() == 0);
  CHECK(noise_at.back() == examples);
  for (int64_t i = 1; i < length - 1; ++i) CHECK(noise_at[static_cast<size_t>(i)] > 0);
}

TEST_CASE("span corruption refuses what T5 would get wrong silently") {
  tr::SpanCorruptionOptions options;
  const std::vector<int32_t> tokens = iota_tokens(50);
  CHECK_THROWS_AS(tr::span_corrupt(tokens, options, 1), patchbay::Error);  // no sentinels
  options.sentinel_top_id = 40;  // sentinels 31..40, which tokens 10..59 include
  options.sentinel_count = 10;
  CHECK_THROWS_AS(tr::span_corrupt(tokens, options, 1), patchbay::Error);
  options.sentinel_top_id = 999;
  options.sentinel_count = 2;  // 50 tokens -> 3 noise spans
  CHECK_THROWS_AS(tr::span_corrupt(tokens, options, 1), patchbay::Error);
  CHECK_THROWS_AS(tr::random_spans_noise_mask(10, 1.0, 3.0, 1), patchbay::Error);
  CHECK_THROWS_AS(tr::random_spans_noise_mask(10, 0.15, 0.5, 1), patchbay::Error);
  CHECK_THROWS_AS(tr::random_spans_noise_mask(10, 0.9, 1.0, 1), patchbay::Error);  // 9 spans, 1 gap
}

}  // namespace
