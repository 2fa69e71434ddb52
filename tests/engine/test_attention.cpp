// Fused scaled-dot-product attention against the naive double reference (causal and not,
// Tq != Tk with bottom-right alignment, grouped kv heads) and its backward against finite
// differences.
#include <doctest/doctest.h>

#include <cmath>

#include "test_util.hpp"

using namespace patchbay::engine;
using namespace patchbay::engine::testing;

TEST_CASE("attention forward matches the naive reference") {
  struct Case {
    int64_t b, h, tq, tk, d;
    bool causal;
  };
  const Case cases[] = {
      {1, 2, 5, 5, 4, false}, {2, 1, 7, 7, 8, true}, {1, 2, 3, 6, 4, true}, {1, 1, 6, 6, 16, true}};
  uint64_t seed = 1000;
  for (const Case& c : cases) {
    Tensor q = random_tensor({c.b, c.h, c.tq, c.d}, seed++),
           k = random_tensor({c.b, c.h, c.tk, c.d}, seed++),
           v = random_tensor({c.b, c.h, c.tk, c.d}, seed++);
    double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
    check_close(scaled_dot_product_attention(q, k, v, c.causal),
                ref::attention(to_array(q), to_array(k), to_array(v), c.causal, scale), 1e-4, 1e-5,
                "attention T=" + std::to_string(c.tq) + "x" + std::to_string(c.tk));
  }
  // Non-contiguous input ([B,T,H,D] transposed to [B,H,T,D]).
  Tensor q = random_tensor({1, 4, 2, 8}, 1100).transpose(1, 2),
         k = random_tensor({1, 4, 2, 8}, 1101).transpose(1, 2),
         v = random_tensor({1, 4, 2, 8}, 1102).transpose(1, 2);
  check_close(scaled_dot_product_attention(q, k, v, true, 0.5),
              ref::attention(to_array(q), to_array(k), to_array(v), true, 0.5), 1e-4, 1e-5,
              "attention strided");
}

TEST_CASE("attention backward matches finite differences") {
  for (bool causal : {false, true})
    check_gradients(
        [causal](const std::vector<Tensor>& in) {
          return scaled_dot_product_attention(in[0], in[1], in[2], causal);
        },
        {random_tensor({1, 2, 4, 4}, 1200, -1, 1, true),
         random_tensor({1, 2, 5, 4}, 1201, -1, 1, true),
         random_tensor({1, 2, 5, 4}, 1202, -1, 1, true)},
        causal ? "attention causal" : "attention");
}

TEST_CASE("attention never allocates a Tq x Tk matrix") {
  const int64_t t = 1024, d = 16;
  Tensor q = random_tensor({1, 1, t, d}, 1300, -1, 1, true),
         k = random_tensor({1, 1, t, d}, 1301, -1, 1, true),
         v = random_tensor({1, 1, t, d}, 1302, -1, 1, true);
  Tensor seed = ones({1, 1, t, d});
  const size_t before = memory_stats(cpu()).current_bytes;
  reset_peak(cpu());
  Tensor out = scaled_dot_product_attention(q, k, v, true);
  backward(out, seed);
  const size_t peak = memory_stats(cpu()).peak_bytes - before;
  CHECK(peak < static_cast<size_t>(t * t) * sizeof(float) / 4);  // T*T f32 would be 4 MiB
  CHECK(q.grad().shape() == Shape{1, 1, t, d});
}

TEST_CASE("attention in bf16 is within bf16 rounding of the f32 result") {
  Tensor q = random_tensor({1, 2, 8, 8}, 1400), k = random_tensor({1, 2, 8, 8}, 1401),
         v = random_tensor({1, 2, 8, 8}, 1402);
  Tensor qb = q.to(DType::kBF16), kb = k.to(DType::kBF16), vb = v.to(DType::kBF16);
  Tensor out = scaled_dot_product_attention(qb, kb, vb, false);
  CHECK(out.dtype() == DType::kBF16);
  // Reference on the rounded inputs; the output is a convex combination of v rows (|v| <= 1)
  // rounded once to bf16: |err| <= 2^-8 (relative) + f32 noise.
  ref::Array expect =
      ref::attention(to_array(qb), to_array(kb), to_array(vb), false, 1.0 / std::sqrt(8.0));
  check_close(out, expect, std::ldexp(1.0, -8), 1e-5, "attention bf16");
}
