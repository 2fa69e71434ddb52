// Fixture implementation: see attention_test_tensors.hpp.
#include "attention_test_tensors.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace patchbay::kernels::testing {
namespace {

constexpr float kOutputSentinel = 12345.0f;
constexpr std::int64_t kRowPadding = 3;

float pseudo_random(std::uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return float(double(state >> 40) / double(1ull << 24) * 2.0 - 1.0);
}

}  // namespace

std::string AttentionShape::describe() const {
  return "B=" + std::to_string(batch) + " H=" + std::to_string(heads) + " Hkv=" +
         std::to_string(kv_heads) + " Tq=" + std::to_string(q_len) + " Tk=" +
         std::to_string(kv_len) + " D=" + std::to_string(head_dim) +
         (causal ? " causal" : " full") + (interleaved_padded ? " strided" : " dense");
}

AttentionTensors::AttentionTensors(const AttentionShape& shape, std::uint64_t seed)
    : shape_(shape) {
  const std::int64_t d = shape.head_dim;
  auto setup = [&](Buffer& buf, std::int64_t heads, std::int64_t len, bool input) {
    buf.heads = heads;
    buf.len = len;
    if (shape.interleaved_padded) {
      const std::int64_t row = d + kRowPadding;
      buf.strides = AttentionStrides{len * heads * row, row, heads * row};
    } else {
      buf.strides = contiguous_attention_strides(heads, len, d);
    }
    const float fill = input ? std::numeric_limits<float>::quiet_NaN() : kOutputSentinel;
    buf.data.assign(std::size_t(shape.batch * buf.strides.batch), fill);
    if (!input) return;
    for (std::int64_t b = 0; b < shape.batch; ++b)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t t = 0; t < len; ++t)
          for (std::int64_t x = 0; x < d; ++x)
            buf.data[std::size_t(b * buf.strides.batch + h * buf.strides.head +
                                 t * buf.strides.seq + x)] = pseudo_random(seed);
  };
  seed = seed * 7919 + 17;
  setup(q_, shape.heads, shape.q_len, true);
  setup(k_, shape.kv_heads, shape.kv_len, true);
  setup(v_, shape.kv_heads, shape.kv_len, true);
  setup(dout_, shape.heads, shape.q_len, true);
  setup(out_, shape.heads, shape.q_len, false);
  setup(dq_, shape.heads, shape.q_len, false);
  setup(dk_, shape.kv_heads, shape.kv_len, false);
  setup(dv_, shape.kv_heads, shape.kv_len, false);
  lse_.assign(std::size_t(shape.batch * shape.heads * shape.q_len), kOutputSentinel);

  AttentionParams& p = params;
  p.batch = shape.batch;
  p.heads = shape.heads;
  p.kv_heads = shape.kv_heads;
  p.q_len = shape.q_len;
  p.kv_len = shape.kv_len;
  p.head_dim = d;
  p.q = q_.data.data(), p.q_strides = q_.strides;
  p.k = k_.data.data(), p.k_strides = k_.strides;
  p.v = v_.data.data(), p.v_strides = v_.strides;
  p.out = out_.data.data(), p.out_strides = out_.strides;
  p.lse = lse_.data();
  p.dout = dout_.data.data(), p.dout_strides = dout_.strides;
  p.dq = dq_.data.data(), p.dq_strides = dq_.strides;
  p.dk = dk_.data.data(), p.dk_strides = dk_.strides;
  p.dv = dv_.data.data(), p.dv_strides = dv_.strides;
  p.scale = float(1.0 / std::sqrt(double(d)));
  p.causal = shape.causal;
}

const AttentionTensors::Buffer& AttentionTensors::buffer(const std::string& name) const {
  if (name == "q") return q_;
  if (name == "k") return k_;
  if (name == "v") return v_;
  if (name == "out") return out_;
  if (name == "dout") return dout_;
  if (name == "dq") return dq_;
  if (name == "dk") return dk_;
  if (name == "dv") return dv_;
  throw std::invalid_argument("no tensor named " + name);
}

float AttentionTensors::at(const std::string& tensor, std::int64_t b, std::int64_t h,
                           std::int64_t t, std::int64_t x) const {
  const Buffer& buf = buffer(tensor);
  return buf.data[std::size_t(b * buf.strides.batch + h * buf.strides.head + t * buf.strides.seq + x)];
}

float& AttentionTensors::input_at(const std::string& tensor, std::int64_t b, std::int64_t h,
                                  std::int64_t t, std::int64_t x) {
  const Buffer& buf = buffer(tensor);
  return const_cast<float&>(
      buf.data[std::size_t(b * buf.strides.batch + h * buf.strides.head + t * buf.strides.seq + x)]);
}

std::vector<std::uint16_t> AttentionTensors::round_input_to_bf16(const std::string& tensor) {
  Buffer& buf = const_cast<Buffer&>(buffer(tensor));
  std::vector<std::uint16_t> bits(buf.data.size());
  for (std::size_t i = 0; i < buf.data.size(); ++i) {
    std::uint32_t x;
    std::memcpy(&x, &buf.data[i], sizeof x);
    if (std::isnan(buf.data[i])) {
      bits[i] = 0x7fc0;
      continue;
    }
    x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even (finite inputs only)
    bits[i] = std::uint16_t(x >> 16);
    const std::uint32_t rounded = std::uint32_t(bits[i]) << 16;
    std::memcpy(&buf.data[i], &rounded, sizeof rounded);
  }
  return bits;
}

float AttentionTensors::lse_at(std::int64_t b, std::int64_t h, std::int64_t t) const {
  return lse_[std::size_t((b * shape_.heads + h) * shape_.q_len + t)];
}

bool AttentionTensors::output_padding_untouched() const {
  for (const Buffer* buf : {&out_, &dq_, &dk_, &dv_}) {
    std::vector<bool> covered(buf->data.size(), false);
    for (std::int64_t b = 0; b < shape_.batch; ++b)
      for (std::int64_t h = 0; h < buf->heads; ++h)
        for (std::int64_t t = 0; t < buf->len; ++t)
          for (std::int64_t x = 0; x < shape_.head_dim; ++x)
            covered[std::size_t(b * buf->strides.batch + h * buf->strides.head +
                                t * buf->strides.seq + x)] = true;
    for (std::size_t i = 0; i < covered.size(); ++i) {
      if (!covered[i] && buf->data[i] != kOutputSentinel) return false;
    }
  }
  return true;
}

double max_relative_diff(const AttentionTensors& a, const AttentionTensors& b,
                         const std::string& tensor) {
  const AttentionParams& p = b.params;
  const bool kv = tensor == "dk" || tensor == "dv";
  const std::int64_t heads = kv ? p.kv_heads : p.heads, len = kv ? p.kv_len : p.q_len;
  // The floor keeps an exactly-zero reference (dq, dk when Tk = 1) from turning rounding
  // noise of 1e-8 into a huge relative error: below it the bound is absolute (1e-6).
  double max_ref = 1e-2, max_diff = 0;
  for (std::int64_t bb = 0; bb < p.batch; ++bb)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t t = 0; t < len; ++t)
        for (std::int64_t x = 0; x < p.head_dim; ++x) {
          const double ref = b.at(tensor, bb, h, t, x), got = a.at(tensor, bb, h, t, x);
          if (!std::isfinite(got)) return std::numeric_limits<double>::infinity();
          max_ref = std::max(max_ref, std::fabs(ref));
          max_diff = std::max(max_diff, std::fabs(got - ref));
        }
  return max_diff / max_ref;
}

double max_lse_diff(const AttentionTensors& a, const AttentionTensors& b) {
  const AttentionParams& p = b.params;
  double max_diff = 0;
  for (std::int64_t bb = 0; bb < p.batch; ++bb)
    for (std::int64_t h = 0; h < p.heads; ++h)
      for (std::int64_t t = 0; t < p.q_len; ++t) {
        const float ref = b.lse_at(bb, h, t), got = a.lse_at(bb, h, t);
        if (std::isinf(ref) || std::isinf(got)) {
          if (ref != got) return std::numeric_limits<double>::infinity();
          continue;
        }
        max_diff = std::max(max_diff, double(std::fabs(got - ref)) / std::max(1.0, double(std::fabs(ref))));
      }
  return max_diff;
}

}  // namespace patchbay::kernels::testing
