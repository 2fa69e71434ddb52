// BERT masking (core/train/mlm_masking.hpp): over 200,000 tokens the selected fraction and the
// 80/10/10 split fall within 5 binomial standard deviations of the configured rates; targets
// are ignore_index except at selected positions; cross_entropy with ignore_index then averages
// over the selected positions only (checked against a hand-computed mean); protected ids are
// never selected; deterministic in the seed; bad rates and ids are refused with a message.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/ops.hpp"
#include "engine/ops_indexing.hpp"
#include "train/mlm_masking.hpp"

namespace {

namespace tr = patchbay::train;
namespace eng = patchbay::engine;

std::vector<int32_t> corpus(size_t n, int32_t vocab, int32_t pad) {
  std::vector<int32_t> tokens(n);
  for (size_t i = 0; i < n; ++i)
    tokens[i] = (i % 50 == 49) ? pad : static_cast<int32_t>((i * 7919u) % 60u);  // pad: 2%
  (void)vocab;
  return tokens;
}

// |observed - n p| <= 5 sqrt(n p (1 - p)): fails by chance with probability < 1e-6.
void check_binomial(int64_t observed, int64_t n, double p, const char* what) {
  const double mean = static_cast<double>(n) * p;
  const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
  INFO(what << ": observed " << observed << " of " << n << ", expected " << mean << " +- 5 * "
            << sd);
  CHECK(std::fabs(static_cast<double>(observed) - mean) <= 5 * sd);
}

}  // namespace

TEST_CASE("MLM masking: selection and 80/10/10 rates within binomial bounds") {
  const int32_t vocab = 64, mask = 62, pad = 63;
  const std::vector<int32_t> tokens = corpus(200000, vocab, pad);
  for (const tr::MlmMaskingOptions& o :
       {tr::MlmMaskingOptions{}, tr::MlmMaskingOptions{0.3, 0.5, 0.25, -100}}) {
    const tr::MlmMaskedBatch b = tr::mask_tokens(tokens, vocab, mask, {pad}, o, 17);
    int64_t eligible = 0, masked = 0, random = 0, unchanged = 0, selected = 0;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] == pad) {
        CHECK(b.targets[i] == o.ignore_index);  // protected: never selected
        CHECK(b.inputs[i] == pad);
        continue;
      }
      ++eligible;
      if (b.targets[i] == o.ignore_index) {
        REQUIRE(b.inputs[i] == tokens[i]);  // unselected positions are untouched
        continue;
      }
      ++selected;
      REQUIRE(b.targets[i] == tokens[i]);
      if (b.inputs[i] == mask)
        ++masked;
      else if (b.inputs[i] == tokens[i])
        ++unchanged;  // includes the rare random draw of the same token
      else
        ++random;
      CHECK(b.inputs[i] != pad);
    }
    CHECK(selected == b.selected);
    check_binomial(selected, eligible, o.select_rate, "selected");
    check_binomial(masked, selected, o.mask_rate, "mask token");
    // A random draw equals the original with probability 1/61 (61 ordinary ids).
    const double p_random = o.random_rate * (1.0 - 1.0 / 61.0);
    check_binomial(random, selected, p_random, "random token");
    check_binomial(unchanged, selected, 1.0 - o.mask_rate - p_random, "unchanged");
  }
}

TEST_CASE("MLM masking: the loss is counted on masked positions only") {
  const int32_t vocab = 8, mask = 7;
  std::vector<int32_t> tokens(40);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i % 7);
  const tr::MlmMaskedBatch b = tr::mask_tokens(tokens, vocab, mask, {}, {}, 3);
  REQUIRE(b.selected > 0);
  eng::Generator gen(5);
  eng::Tensor logits = eng::uniform({40, vocab}, gen, -2.0, 2.0);
  std::vector<int64_t> targets64 = b.targets;
  eng::Tensor targets = eng::Tensor::from_data(targets64.data(), {40}, eng::DType::kI64);
  const double loss = eng::cross_entropy(logits, targets).item();  // ignore_index -100
  // By hand: mean over selected positions of -log softmax(logits)[target].
  const std::vector<float> l = logits.to_vector();
  double sum = 0;
  for (size_t i = 0; i < 40; ++i) {
    if (b.targets[i] == -100) continue;
    double z = 0;
    for (int32_t v = 0; v < vocab; ++v) z += std::exp(static_cast<double>(l[i * vocab + v]));
    sum += std::log(z) - l[i * vocab + static_cast<size_t>(b.targets[i])];
  }
  CHECK(loss == doctest::Approx(sum / static_cast<double>(b.selected)).epsilon(1e-5));
}

TEST_CASE("MLM masking: deterministic in the seed; refusals name the problem") {
  const std::vector<int32_t> tokens = corpus(1000, 64, 63);
  const auto a = tr::mask_tokens(tokens, 64, 62, {63}, {}, 9);
  CHECK(tr::mask_tokens(tokens, 64, 62, {63}, {}, 9).inputs == a.inputs);
  CHECK(tr::mask_tokens(tokens, 64, 62, {63}, {}, 10).inputs != a.inputs);
  CHECK_THROWS_WITH_AS(tr::mask_tokens(tokens, 64, 64, {}, {}, 1),
                       doctest::Contains("add the mask token to the tokenizer"), patchbay::Error);
  CHECK_THROWS_WITH_AS(tr::mask_tokens(tokens, 64, 62, {}, {0.15, 0.8, 0.3, -100}, 1),
                       doctest::Contains("mask_rate + random_rate"), patchbay::Error);
  CHECK_THROWS_WITH_AS(tr::mask_tokens({70}, 64, 62, {}, {}, 1),
                       doctest::Contains("outside the vocabulary"), patchbay::Error);
}
