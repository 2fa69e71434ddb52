// Test fixture for the attention kernels: owns q, k, v, out, lse, dout, dq, dk, dv for one
// shape and layout, fills the inputs with deterministic values, fills every element a view
// does not cover with a sentinel (NaN for inputs, so reading it poisons the result; a finite
// marker for outputs, so writing it is detected), and compares outputs between two fixtures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "patchbay/kernels/attention_flash.hpp"

namespace patchbay::kernels::testing {

struct AttentionShape {
  std::int64_t batch = 1, heads = 1, kv_heads = 1, q_len = 1, kv_len = 1, head_dim = 16;
  bool causal = false;
  // false: dense [B, H, T, D]. true: [B, T, H, D] with 3 unused floats after each row, so
  // the head and seq strides are not the dense ones and rows are not 64-byte aligned.
  bool interleaved_padded = false;
  std::string describe() const;
};

class AttentionTensors {
 public:
  AttentionTensors(const AttentionShape& shape, std::uint64_t seed);
  AttentionTensors(const AttentionTensors&) = delete;
  AttentionTensors& operator=(const AttentionTensors&) = delete;

  AttentionParams params;  // points into this object's buffers

  // Element (b, h, t, x) of an output / input tensor by name: "out", "dq", "dk", "dv", "q"...
  float at(const std::string& tensor, std::int64_t b, std::int64_t h, std::int64_t t,
           std::int64_t x) const;
  float lse_at(std::int64_t b, std::int64_t h, std::int64_t t) const;
  float& input_at(const std::string& tensor, std::int64_t b, std::int64_t h, std::int64_t t,
                  std::int64_t x);
  // Rounds the input `tensor` ("q", "k", "v", "dout") to bf16 in place (round to nearest
  // even, so the f32 values are then exactly bf16 values) and returns its bf16 bit patterns,
  // laid out like the f32 buffer (same strides; the NaN sentinels stay NaN).
  std::vector<std::uint16_t> round_input_to_bf16(const std::string& tensor);
  // True when every element outside the views of out/dq/dk/dv still holds the sentinel.
  bool output_padding_untouched() const;

 private:
  struct Buffer {
    std::vector<float> data;
    AttentionStrides strides;
    std::int64_t heads = 0, len = 0;
  };
  const Buffer& buffer(const std::string& name) const;
  Buffer q_, k_, v_, out_, dout_, dq_, dk_, dv_;
  std::vector<float> lse_;
  AttentionShape shape_;
};

// Largest |a - b| / max(max |b| over the tensor, 0.01) over a tensor's elements, with -inf lse
// required to match exactly (returns +inf otherwise). Used with a 1e-4 bound.
double max_relative_diff(const AttentionTensors& a, const AttentionTensors& b,
                         const std::string& tensor);
double max_lse_diff(const AttentionTensors& a, const AttentionTensors& b);

}  // namespace patchbay::kernels::testing
