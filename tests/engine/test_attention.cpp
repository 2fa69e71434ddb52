// Fused scaled-dot-product attention against the naive double reference (causal and not,
// Tq != Tk with bottom-right alignment, grouped kv heads) and its backward against finite
// differences.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "patchbay/kernels/attention_flash.hpp"
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

// Heads split out of [B, T, H, D] buffers by a permute (as attention plugins do with a
// [B, T, C] projection): the output and dq/dk/dv come back token-major, so merging the heads
// back (permute + reshape) and reaching the [B, T, H, D] leaves are views, not copies; values
// and gradients equal those of contiguous operands. Includes grouped kv heads and T = 1.
TEST_CASE("token-major operands give token-major output and gradients, same values") {
  struct Case {
    int64_t b, h, hkv, tq, tk, d;
  };
  const Case cases[] = {{2, 4, 4, 6, 6, 8}, {1, 4, 2, 5, 7, 4}, {2, 2, 2, 1, 3, 4}};
  uint64_t seed = 1500;
  for (const Case& c : cases) {
    const std::string what = "token-major h=" + std::to_string(c.h) +
                             " hkv=" + std::to_string(c.hkv) + " tq=" + std::to_string(c.tq);
    // Leaves in token-major memory, and contiguous [B, H, T, D] copies of the same values.
    Tensor aq = random_tensor({c.b, c.tq, c.h, c.d}, seed++, -1, 1, true),
           ak = random_tensor({c.b, c.tk, c.hkv, c.d}, seed++, -1, 1, true),
           av = random_tensor({c.b, c.tk, c.hkv, c.d}, seed++, -1, 1, true);
    auto contiguous_leaf = [](const Tensor& a) {
      Tensor t = a.detach().permute({0, 2, 1, 3}).contiguous();
      t.set_requires_grad(true);
      return t;
    };
    Tensor cq = contiguous_leaf(aq), ck = contiguous_leaf(ak), cv = contiguous_leaf(av);
    Tensor out = scaled_dot_product_attention(aq.permute({0, 2, 1, 3}), ak.permute({0, 2, 1, 3}),
                                              av.permute({0, 2, 1, 3}), true);
    Tensor expected = scaled_dot_product_attention(cq, ck, cv, true);
    if (c.tq > 1) CHECK_MESSAGE(!out.is_contiguous(), what);
    Tensor merged = out.permute({0, 2, 1, 3});  // [B, Tq, H, D]
    CHECK_MESSAGE(merged.is_contiguous(), what << ": merging heads back needs a copy");
    check_close(out, to_array(expected), 1e-6, 1e-7, what + " forward");
    // Upstream gradient through the merge (a strided [B, H, Tq, D] view reaches the op).
    Tensor w = random_tensor({c.b, c.tq, c.h * c.d}, seed++);
    backward(sum(mul(merged.reshape({c.b, c.tq, c.h * c.d}), w)));
    backward(sum(mul(expected.permute({0, 2, 1, 3}).reshape({c.b, c.tq, c.h * c.d}), w)));
    for (auto [token_major, contiguous, name] :
         {std::tuple{aq, cq, "dq"}, std::tuple{ak, ck, "dk"}, std::tuple{av, cv, "dv"}}) {
      REQUIRE(token_major.grad().defined());
      check_close(token_major.grad().permute({0, 2, 1, 3}), to_array(contiguous.grad()), 1e-6, 1e-7,
                  what + " " + name);
    }
  }
  // Finite differences through the token-major path end to end.
  check_gradients(
      [](const std::vector<Tensor>& in) {
        Tensor o =
            scaled_dot_product_attention(in[0].permute({0, 2, 1, 3}), in[1].permute({0, 2, 1, 3}),
                                         in[2].permute({0, 2, 1, 3}), true);
        return o.permute({0, 2, 1, 3}).reshape({1, 5, 8});
      },
      {random_tensor({1, 5, 2, 4}, 1600, -1, 1, true),
       random_tensor({1, 5, 2, 4}, 1601, -1, 1, true),
       random_tensor({1, 5, 2, 4}, 1602, -1, 1, true)},
      "attention token-major");
}

// Under a bf16 autocast policy (on a CPU with AVX512-BF16) the op runs the bf16 kernel on
// token-major operands in place: f32 output and gradients, token-major, within bf16 rounding
// of f32 attention on the same bf16-rounded inputs and upstream gradient — and measurably not
// the f32 kernel (P and dS are rounded). With the policy off the op is the f32 one, bit for bit.
namespace {

// Under a bf16 policy, attention on token-major [B, T, heads, D] leaves against f32 attention
// on the same values (see the test below).
void check_bf16_policy_attention(int64_t b, int64_t t, int64_t h, int64_t hkv, int64_t d) {
  auto rounded = [](const Tensor& x) {  // bf16 values held in f32
    Tensor r = x.detach().to(DType::kBF16).to(DType::kF32);
    r.set_requires_grad(true);
    return r;
  };
  // Inputs and upstream gradient hold bf16 values, so rounding them loses nothing and only
  // the kernel's own rounding (P, dS) separates the two paths.
  Tensor aq = rounded(random_tensor({b, t, h, d}, 1700, -2, 2)),
         ak = rounded(random_tensor({b, t, hkv, d}, 1701, -2, 2)),
         av = rounded(random_tensor({b, t, hkv, d}, 1702, -1, 1));
  Tensor rq = rounded(aq), rk = rounded(ak), rv = rounded(av);
  Tensor w = random_tensor({b, h, t, d}, 1703).to(DType::kBF16).to(DType::kF32);
  auto heads = [](const Tensor& x) { return x.permute({0, 2, 1, 3}); };

  Tensor out;
  {
    AutocastGuard bf16(DType::kBF16);
    out = scaled_dot_product_attention(heads(aq), heads(ak), heads(av), true);
    backward(sum(mul(out, w)));
  }
  Tensor expected = scaled_dot_product_attention(heads(rq), heads(rk), heads(rv), true);
  backward(sum(mul(expected, w)));
  CHECK(out.dtype() == DType::kF32);
  CHECK(!out.is_contiguous());  // token-major, as with f32 operands
  check_close(out, to_array(expected), 1e-2, 1e-2, "bf16 attention forward");
  const std::vector<float> got = out.to_vector(), want = expected.to_vector();
  double max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i)
    max_diff = std::max(max_diff, double(std::fabs(got[i] - want[i])));
  CHECK(max_diff > 1e-4);  // the f32 kernel on the same values agrees to ~1e-7
  for (auto [leaf, reference, name] :
       {std::tuple{aq, rq, "dq"}, std::tuple{ak, rk, "dk"}, std::tuple{av, rv, "dv"}}) {
    REQUIRE(leaf.grad().defined());
    CHECK(leaf.grad().dtype() == DType::kF32);
    check_close(leaf.grad(), to_array(reference.grad()), 2e-2, 2e-2,
                std::string("bf16 attention ") + name);
  }
  // Policy off: the f32 kernel, identical to the call on the f32 inputs.
  Tensor plain = scaled_dot_product_attention(heads(rq), heads(rk), heads(rv), true);
  CHECK(plain.to_vector() == expected.to_vector());
}

}  // namespace

TEST_CASE("attention under a bf16 autocast policy runs the bf16 kernel") {
  if (!patchbay::kernels::attention_flash_bf16_supported()) {
    MESSAGE("skipped: this CPU has no AVX512-BF16");
    return;
  }
  struct Case {
    int64_t b, t, h, hkv, d;
  };
  // One call on the calling thread; one above the threading threshold with grouped kv heads
  // and a head dim that is not a multiple of 16.
  for (const Case c : {Case{2, 70, 4, 4, 16}, Case{2, 131, 4, 2, 40}}) {
    CAPTURE(c.t);
    check_bf16_policy_attention(c.b, c.t, c.h, c.hkv, c.d);
  }
}

