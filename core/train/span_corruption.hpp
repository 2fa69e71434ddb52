// T5 span corruption (Raffel et al. 2020, §3.1.4; the reference preprocessors.py of
// google-research/text-to-text-transfer-transformer): the pretraining objective of an
// encoder–decoder. A fraction `noise_density` (0.15) of a token sequence, in spans of mean
// length `mean_noise_span_length` (3), is dropped from the encoder's input and replaced by one
// sentinel id per span; the decoder's target lists each dropped span after its sentinel:
//
//   tokens   a b c d e f g h i j        noise mask  . . X X . . . X . X   (X = noise)
//   inputs   a b S0 e f g S1 i S2       (S0 = sentinel_top_id, S1 = S0 - 1, ...)
//   targets  S0 c d S1 h S2 j           (+ eos on both when eos_id >= 0)
//
// random_spans_noise_mask is T5's `random_spans_noise_mask` (random_roll off, its default):
// num_noise_tokens = round(length * noise_density) clamped to [1, length - 1] and
// num_noise_spans = max(round(num_noise_tokens / mean_noise_span_length), 1), computed in
// float32 with rounding half to even as TensorFlow does; the noise and the non-noise tokens
// are each cut into num_noise_spans non-empty segments by T5's `_random_segmentation` (a
// random permutation of the segment-start markers, i.e. all segmentations equally likely);
// spans alternate non-noise, noise, ..., starting with non-noise, so the first token is never
// noise and the last always is. Sequences shorter than 2 are handled as length 2 and cut back
// (T5's degeneracy guard: a 1-token sequence has no noise). Only the random source differs
// from T5's (seqio's stateless shuffle): a seeded permutation of our own, the same on every
// platform. Sentinels are assigned as T5's noise_span_to_unique_sentinel /
// nonnoise_span_to_unique_sentinel do: span k gets sentinel_top_id - k (T5: <extra_id_0> is
// the last id of the vocabulary, <extra_id_1> the one below, ...).
//
// compute_input_and_target_lengths is T5's `random_spans_helper` (with one sentinel per span
// on each side and one EOS): the raw token length whose corrupted input fits inputs_length,
// and the resulting target length (512 -> 568 tokens, 114 targets).
//
// The `[train] objective = "span_corruption"` objective (objective_span_corruption.cpp) uses
// these with an encoder–decoder model (docs/encoder_decoder.md).
#pragma once

#include <cstdint>
#include <vector>

namespace patchbay::train {

struct SpanCorruptionOptions {
  double noise_density = 0.15;          // fraction of tokens dropped, in (0, 1); 0 = none
  double mean_noise_span_length = 3.0;  // >= 1
  int32_t sentinel_top_id = -1;         // id of the first sentinel (<extra_id_0>); required
  int32_t sentinel_count = 100;         // sentinels sentinel_top_id - sentinel_count + 1 .. top
  int32_t eos_id = -1;                  // appended to inputs and targets when >= 0
};

struct SpanCorruptedExample {
  std::vector<int32_t> inputs;      // non-noise tokens, one sentinel per noise span (+ eos)
  std::vector<int32_t> targets;     // one sentinel per noise span, then its tokens (+ eos)
  std::vector<uint8_t> noise_mask;  // [length], 1 where the token was dropped from the input
  int64_t noise_spans = 0;
};

// T5's random_spans_noise_mask (see above): [length] of 0 / 1, deterministic from the seed.
// Throws Error(kInvalidArgument) for a density outside [0, 1), a mean span length below 1,
// or a length whose non-noise tokens cannot fill as many spans as the noise (a density near 1).
std::vector<uint8_t> random_spans_noise_mask(int64_t length, double noise_density,
                                             double mean_noise_span_length, uint64_t seed);

// The corrupted (inputs, targets) of `tokens` (ids without EOS). Throws Error(kInvalidArgument)
// when options.sentinel_top_id is unset, a token lies in the sentinel range (it would be read
// as a sentinel), or the sequence has more noise spans than sentinels.
SpanCorruptedExample span_corrupt(const std::vector<int32_t>& tokens,
                                  const SpanCorruptionOptions& options, uint64_t seed);

struct SpanCorruptionLengths {
  int64_t tokens_length = 0;   // raw tokens to take per example
  int64_t targets_length = 0;  // length of the targets they give (with EOS)
};

// T5's random_spans_helper(inputs_length, noise_density, mean_noise_span_length, 1, 1).
SpanCorruptionLengths compute_input_and_target_lengths(int64_t inputs_length, double noise_density,
                                                       double mean_noise_span_length);

}  // namespace patchbay::train
