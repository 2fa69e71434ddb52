// T5 span corruption (span_corruption.hpp): the noise mask by random segmentation, the
// sentinel replacement, and the length helper, each transcribed from T5's preprocessors.py.
#include "train/span_corruption.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "common/error.hpp"

namespace patchbay::train {
namespace {

[[noreturn]] void refuse(const std::string& why) { throw Error(ErrorKind::kInvalidArgument, why); }

// splitmix64 (Steele et al. 2014): a small generator fully specified here, so a seed gives the
// same masks with every compiler and standard library (std::shuffle and the std
// distributions are implementation-defined).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound), bound >= 1, without modulo bias (rejection of the short tail).
  uint64_t below(uint64_t bound) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t draw = next();
    while (draw >= limit) draw = next();
    return draw % bound;
  }

 private:
  uint64_t state_;
};

// round() of TensorFlow and NumPy: to nearest, ties to even (the default FP rounding mode).
int64_t round_half_even(float x) { return static_cast<int64_t>(std::nearbyint(x)); }
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

// T5's _random_segmentation: num_items cut into num_segments non-empty segments, all ways
// equally likely: a shuffled vector of num_segments - 1 "segment starts here" markers over
// the num_items - 1 positions after the first. Returns the segment lengths (sum num_items).
std::vector<int64_t> random_segmentation(int64_t num_items, int64_t num_segments,
                                         SplitMix64& random) {
  std::vector<uint8_t> starts(static_cast<size_t>(num_items - 1), 0);
  for (int64_t i = 0; i < num_segments - 1; ++i) starts[static_cast<size_t>(i)] = 1;
  for (size_t i = starts.size(); i > 1; --i) {  // Fisher–Yates
    const size_t j = static_cast<size_t>(random.below(i));
    std::swap(starts[i - 1], starts[j]);
  }
  std::vector<int64_t> lengths(1, 1);  // item 0 opens segment 0
  for (uint8_t start : starts) {
    if (start != 0)
      lengths.push_back(1);
    else
      ++lengths.back();
  }
  return lengths;
}

// T5's noise_span_to_unique_sentinel: each run of masked tokens becomes one sentinel, the k-th
// run (0-based) sentinel_top_id - k; unmasked tokens are kept. Returns the number of runs.
int64_t replace_spans(const std::vector<int32_t>& tokens, const std::vector<uint8_t>& mask,
                      int32_t sentinel_top_id, std::vector<int32_t>& out) {
  int64_t runs = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (mask[i] == 0) {
      out.push_back(tokens[i]);
    } else if (i == 0 || mask[i - 1] == 0) {
      out.push_back(static_cast<int32_t>(sentinel_top_id - runs));
      ++runs;
    }
  }
  return runs;
}

}  // namespace

std::vector<uint8_t> random_spans_noise_mask(int64_t length, double noise_density,
                                             double mean_noise_span_length, uint64_t seed) {
  if (!(noise_density >= 0.0 && noise_density < 1.0))
    refuse("span corruption: noise_density must lie in [0, 1), found " +
           std::to_string(noise_density));
  if (!(mean_noise_span_length >= 1.0))
    refuse("span corruption: mean_noise_span_length must be >= 1, found " +
           std::to_string(mean_noise_span_length));
  if (length < 0) refuse("span corruption: negative length " + std::to_string(length));
  const int64_t original_length = length;
  if (noise_density == 0.0 || length == 0)
    return std::vector<uint8_t>(static_cast<size_t>(length), 0);
  length = std::max<int64_t>(length, 2);  // T5: "increase length to avoid degeneracy"
  // float32 like T5's to_float(...) * noise_density and to_float(...) / mean_noise_span_length.
  int64_t noise_tokens =
      round_half_even(static_cast<float>(length) * static_cast<float>(noise_density));
  noise_tokens = std::min(std::max<int64_t>(noise_tokens, 1), length - 1);
  const int64_t noise_spans =
      std::max<int64_t>(round_half_even(static_cast<float>(noise_tokens) /
                                        static_cast<float>(mean_noise_span_length)),
                        1);
  const int64_t nonnoise_tokens = length - noise_tokens;
  if (nonnoise_tokens < noise_spans)
    refuse("span corruption: " + std::to_string(nonnoise_tokens) +
           " non-noise tokens cannot separate " + std::to_string(noise_spans) +
           " noise spans in a sequence of " + std::to_string(length) + " (noise_density " +
           std::to_string(noise_density) + " is too high for mean_noise_span_length " +
           std::to_string(mean_noise_span_length) + "); lower the density or lengthen the spans");
  // T5 draws the two segmentations from two seeds; two independent streams here.
  SplitMix64 noise_random(seed), nonnoise_random(seed ^ 0xd1b54a32d192ed03ull);
  noise_random.next();  // decorrelate nearby seeds' first draws
  nonnoise_random.next();
  const std::vector<int64_t> noise_lengths =
      random_segmentation(noise_tokens, noise_spans, noise_random);
  const std::vector<int64_t> nonnoise_lengths =
      random_segmentation(nonnoise_tokens, noise_spans, nonnoise_random);
  std::vector<uint8_t> mask;
  mask.reserve(static_cast<size_t>(length));
  for (int64_t s = 0; s < noise_spans; ++s) {  // non-noise first, then noise, alternating
    mask.insert(mask.end(), static_cast<size_t>(nonnoise_lengths[static_cast<size_t>(s)]), 0);
    mask.insert(mask.end(), static_cast<size_t>(noise_lengths[static_cast<size_t>(s)]), 1);
  }
  mask.resize(static_cast<size_t>(original_length));  // T5: is_noise[:orig_length]
  return mask;
}

SpanCorruptedExample span_corrupt(const std::vector<int32_t>& tokens,
                                  const SpanCorruptionOptions& options, uint64_t seed) {
  if (options.sentinel_top_id < 0 || options.sentinel_count < 1 ||
      options.sentinel_top_id - options.sentinel_count + 1 < 0)
    refuse(
        "span corruption needs sentinel ids: sentinel_top_id (the id of <extra_id_0>, T5: the "
        "last id of the vocabulary) and sentinel_count >= 1 ids below it, found top " +
        std::to_string(options.sentinel_top_id) + ", count " +
        std::to_string(options.sentinel_count) +
        "; add the sentinels to the tokenizer as special tokens");
  const int32_t lowest = options.sentinel_top_id - options.sentinel_count + 1;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] >= lowest && tokens[i] <= options.sentinel_top_id)
      refuse("span corruption: token " + std::to_string(tokens[i]) + " at position " +
             std::to_string(i) + " lies in the sentinel range [" + std::to_string(lowest) + ", " +
             std::to_string(options.sentinel_top_id) +
             "] and would be read as a sentinel; tokenize without sentinels");
  SpanCorruptedExample out;
  out.noise_mask =
      random_spans_noise_mask(static_cast<int64_t>(tokens.size()), options.noise_density,
                              options.mean_noise_span_length, seed);
  std::vector<uint8_t> kept(out.noise_mask.size());
  for (size_t i = 0; i < kept.size(); ++i) kept[i] = out.noise_mask[i] == 0 ? 1 : 0;
  out.noise_spans = replace_spans(tokens, out.noise_mask, options.sentinel_top_id, out.inputs);
  if (out.noise_spans > options.sentinel_count)
    refuse("span corruption: " + std::to_string(out.noise_spans) + " noise spans but only " +
           std::to_string(options.sentinel_count) +
           " sentinels; shorten the sequences or add sentinels");
  replace_spans(tokens, kept, options.sentinel_top_id, out.targets);
  if (options.eos_id >= 0) {
    out.inputs.push_back(options.eos_id);
    out.targets.push_back(options.eos_id);
  }
  return out;
}

SpanCorruptionLengths compute_input_and_target_lengths(int64_t inputs_length, double noise_density,
                                                       double mean_noise_span_length) {
  if (inputs_length < 2) refuse("span corruption: inputs_length must be >= 2");
  if (!(mean_noise_span_length > 0.0))
    refuse("span corruption: mean_noise_span_length must be > 0");
  // T5's _tokens_length_to_inputs_length_targets_length in Python floats (doubles).
  auto lengths = [&](int64_t tokens_length) {
    const int64_t noise_tokens =
        round_half_even(static_cast<double>(tokens_length) * noise_density);
    const int64_t nonnoise_tokens = tokens_length - noise_tokens;
    const int64_t noise_spans =
        round_half_even(static_cast<double>(noise_tokens) / mean_noise_span_length);
    // inputs: non-noise tokens, a sentinel per span, EOS; targets: noise, sentinels, EOS.
    return std::pair<int64_t, int64_t>{nonnoise_tokens + noise_spans + 1,
                                       noise_tokens + noise_spans + 1};
  };
  int64_t tokens_length = inputs_length - 1;
  while (lengths(tokens_length + 1).first <= inputs_length) ++tokens_length;
  auto [inputs, targets] = lengths(tokens_length);
  // T5's "minor hack to get the targets length to be equal to inputs length".
  if (noise_density == 0.5 && targets > inputs) {
    --tokens_length;
    --targets;
  }
  return SpanCorruptionLengths{tokens_length, targets};
}

}  // namespace patchbay::train
