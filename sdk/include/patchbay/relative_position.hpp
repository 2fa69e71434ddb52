// Patchbay SDK, header-only C++ helper: T5's bucketed relative positions (Raffel et al. 2020,
// §2.1), the function `_relative_position_bucket` of T5's reference code (Mesh TensorFlow's
// transformer_layers.py, transcribed in transformers' modeling_t5.py), bit for bit.
//
// T5 adds to each attention score a learned scalar per (head, bucket), where the bucket is
// that of the relative position key_position - query_position. Half of the buckets hold the
// exact small distances, the other half logarithmically wider bins up to max_distance; every
// distance >= max_distance shares the last bucket. Bidirectional (the encoder): positive and
// negative offsets get separate halves of the buckets. Unidirectional (the decoder's causal
// self-attention): positive offsets (the future, masked anyway) all fall in bucket 0 with
// offset 0. One table of biases is shared by all layers of a stack (T5's first layer owns
// it). It lives in the SDK's C++ layer so that both the host (which shares one bias across a
// stack) and an attention plugin can compute the same buckets; nothing here crosses the ABI.
//
// Exactness: the reference computes the large-distance bucket in float32 —
//   max_exact + trunc(log(float(d) / max_exact) / log(max_distance / max_exact)
//                     * (num_buckets - max_exact))
// with log(max_distance / max_exact) a double rounded to float — so this does the same in
// float; at d = 16, 32, 64 the quotient is an exact integer in float32 and a double
// computation would agree only by luck. tests/positions checks every offset in -300..300
// against the reference function's output (scripts/t5_relative_position_buckets.py).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace patchbay {

struct T5RelativePositionOptions {
  bool bidirectional = true;   // true: encoder; false: decoder (causal) self-attention
  int32_t num_buckets = 32;    // T5's default (relative_attention_num_buckets)
  int32_t max_distance = 128;  // T5's default (relative_attention_max_distance)
};

// The bucket, in [0, num_buckets), of relative_position = key_position - query_position.
// Throws std::invalid_argument for num_buckets < 2 (bidirectional: < 4) or max_distance not
// above the exact range (the reference's log would be of a ratio <= 1).
inline int32_t t5_relative_position_bucket(int64_t relative_position,
                                           const T5RelativePositionOptions& options = {}) {
  int64_t buckets = options.num_buckets;
  int64_t offset = 0;  // added for positive positions in the bidirectional case
  int64_t distance = 0;
  if (options.bidirectional) {
    buckets /= 2;
    if (relative_position > 0) offset = buckets;
    distance = relative_position < 0 ? -relative_position : relative_position;
  } else {
    distance = relative_position < 0 ? -relative_position : 0;  // -min(relative_position, 0)
  }
  const int64_t max_exact = buckets / 2;
  if (max_exact < 1 || options.max_distance <= max_exact)
    throw std::invalid_argument("T5 relative positions need num_buckets >= " +
                                std::string(options.bidirectional ? "4 (bidirectional)" : "2") +
                                " and max_distance above the exact range (num_buckets / " +
                                (options.bidirectional ? "4" : "2") + "), found num_buckets " +
                                std::to_string(options.num_buckets) + ", max_distance " +
                                std::to_string(options.max_distance));
  if (distance < max_exact) return static_cast<int32_t>(offset + distance);
  // float32 throughout, as torch.log(relative_position.float() / max_exact) / math.log(...)
  const float ratio = static_cast<float>(distance) / static_cast<float>(max_exact);
  const float log_range = static_cast<float>(
      std::log(static_cast<double>(options.max_distance) / static_cast<double>(max_exact)));
  const float scaled = std::log(ratio) / log_range * static_cast<float>(buckets - max_exact);
  const int64_t large = std::min<int64_t>(max_exact + static_cast<int64_t>(scaled), buckets - 1);
  return static_cast<int32_t>(offset + large);
}

// buckets[i * key_len + j] = bucket of (key_offset + j) - (query_offset + i), the [Tq, Tk]
// table T5's compute_bias looks up (query_offset: positions already decoded, as in
// past_key_values decoding; key_offset 0 for self-attention over the whole sequence).
inline std::vector<int32_t> t5_relative_position_buckets(
    int64_t query_len, int64_t key_len, const T5RelativePositionOptions& options = {},
    int64_t query_offset = 0, int64_t key_offset = 0) {
  std::vector<int32_t> out(static_cast<size_t>(query_len * key_len));
  for (int64_t i = 0; i < query_len; ++i)
    for (int64_t j = 0; j < key_len; ++j)
      out[static_cast<size_t>(i * key_len + j)] =
          t5_relative_position_bucket((key_offset + j) - (query_offset + i), options);
  return out;
}

}  // namespace patchbay
