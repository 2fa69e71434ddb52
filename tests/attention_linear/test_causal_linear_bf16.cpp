// The chunked causal linear attention kernel with bf16 operands (shape.bf16, the engine's bf16
// autocast), on every code path this CPU runs (each forced): equal to the plain reference that
// rounds the same operands and chunk products to bf16 and accumulates (in double) to f32
// precision, forward and backward; within bf16 precision of the f32 result, and measurably apart
// from it (the rounding happens); bit-exact causality; and the engine op under an AutocastGuard
// equal to the kernel with bf16 operands, forward and gradients.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/autocast.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "engine/ops/causal_linear_attention.hpp"
#include "patchbay/kernels/attention_flash.hpp"
#include "patchbay/kernels/causal_linear_attention.hpp"

namespace {

namespace eng = patchbay::engine;
namespace kn = patchbay::kernels;

std::vector<float> random_vector(size_t n, uint32_t seed, float low, float high) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

double max_abs(const std::vector<float>& a) {
  double worst = 0;
  for (float x : a) worst = std::max(worst, std::fabs(static_cast<double>(x)));
  return worst;
}

// The share of elements of a within tol of b.
double share_within(const std::vector<float>& a, const std::vector<float>& b, double tol) {
  REQUIRE(a.size() == b.size());
  size_t close = 0;
  for (size_t i = 0; i < a.size(); ++i) close += std::fabs(double(a[i]) - b[i]) <= tol ? 1 : 0;
  return a.empty() ? 1.0 : double(close) / double(a.size());
}

std::vector<kn::KernelIsa> runnable_isas() {
  std::vector<kn::KernelIsa> out;
  for (kn::KernelIsa isa : {kn::KernelIsa::generic, kn::KernelIsa::avx2, kn::KernelIsa::avx512})
    if (kn::kernel_isa_supported(isa)) out.push_back(isa);
  return out;
}

struct Problem {
  kn::CausalLinearAttentionShape shape;
  std::vector<float> q, k, v, dout;
  Problem(kn::CausalLinearAttentionShape s, uint32_t seed) : shape(s) {
    const size_t qk = size_t(s.rows * s.length * s.key_dim);
    const size_t vm = size_t(s.rows * s.length * s.value_dim);
    q = random_vector(qk, seed, 0.f, 1.f);  // positive, as after a feature map
    k = random_vector(qk, seed + 1, 0.f, 1.f);
    v = random_vector(vm, seed + 2, -1.f, 1.f);
    dout = random_vector(vm, seed + 3, -1.f, 1.f);
  }
};

struct Results {
  std::vector<float> out, dq, dk, dv;
  std::vector<const std::vector<float>*> all() const { return {&out, &dq, &dk, &dv}; }
};

Results sized(const Problem& p) {
  return Results{std::vector<float>(p.v.size(), 7.f), std::vector<float>(p.q.size(), 7.f),
                 std::vector<float>(p.q.size(), 7.f), std::vector<float>(p.v.size(), 7.f)};
}

Results kernel(const Problem& p, const kn::CausalLinearAttentionShape& s) {
  Results r = sized(p);
  kn::causal_linear_attention_forward(s, p.q.data(), p.k.data(), p.v.data(), r.out.data());
  kn::causal_linear_attention_backward(s, p.q.data(), p.k.data(), p.v.data(), p.dout.data(),
                                       r.dq.data(), r.dk.data(), r.dv.data());
  return r;
}

Results reference(const Problem& p, const kn::CausalLinearAttentionShape& s) {
  Results r = sized(p);
  kn::causal_linear_attention_reference_forward(s, p.q.data(), p.k.data(), p.v.data(),
                                                r.out.data());
  kn::causal_linear_attention_reference_backward(
      s, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), r.dq.data(), r.dk.data(), r.dv.data());
  return r;
}

}  // namespace

TEST_CASE("bf16 causal linear attention equals the bf16-rounding reference on every code path") {
  struct Dims {
    int64_t e, m;
  };
  for (kn::KernelIsa isa : runnable_isas()) {
    for (const Dims d : {Dims{5, 4}, Dims{16, 16}, Dims{37, 20}, Dims{64, 65}}) {
      for (int64_t length : {1, 17, 32, 33, 65, 130}) {
        CAPTURE(kn::kernel_isa_name(isa));
        CAPTURE(d.e);
        CAPTURE(d.m);
        CAPTURE(length);
        kn::CausalLinearAttentionShape s{2, length, d.e, d.m};
        s.isa = isa;
        s.bf16 = true;
        const Problem p(s, uint32_t(length * 17 + d.e));
        const Results got = kernel(p, s);
        const Results bf16_ref = reference(p, s);
        kn::CausalLinearAttentionShape f32 = s;
        f32.bf16 = false;
        const Results f32_ref = reference(p, f32);
        const auto g = got.all(), b = bf16_ref.all(), f = f32_ref.all();
        for (size_t n = 0; n < g.size(); ++n) {
          CAPTURE(n);  // out, dq, dk, dv
          const double scale = std::max(1.0, max_abs(*f[n]));
          // The same rounding points, f32 accumulation: f32 precision of the sums, except where
          // a sum's last bit rounds an intermediate product the other way (one term moved by
          // a bf16 step, 2^-8): rare, so the tight bound holds for nearly every element.
          const double tight = 1e-5 * scale;
          CHECK(share_within(*g[n], *b[n], tight) >= 0.99);
          CHECK(max_abs_diff(*g[n], *b[n]) <= 1e-2 * scale);
          // bf16 operands: within bf16 precision of the f32 result, and visibly rounded (most
          // elements further from it than f32 precision) once there are enough of them.
          CHECK(max_abs_diff(*g[n], *f[n]) <= 2e-2 * scale);
          if (length >= 32) CHECK(share_within(*g[n], *f[n], tight) <= 0.5);
        }
      }
    }
  }
}

TEST_CASE("bf16 causal linear attention is causal bit for bit, dk and dv anti-causal") {
  for (kn::KernelIsa isa : runnable_isas()) {
    CAPTURE(kn::kernel_isa_name(isa));
    kn::CausalLinearAttentionShape s{2, 150, 24, 20};
    s.isa = isa;
    s.bf16 = true;
    const Problem base(s, 5);
    const Results before = kernel(base, s);
    const int64_t e = s.key_dim, m = s.value_dim;
    auto same = [&](const std::vector<float>& a, const std::vector<float>& b, int64_t width,
                    int64_t begin, int64_t end) {
      for (int64_t r = 0; r < s.rows; ++r)
        if (std::memcmp(a.data() + (r * s.length + begin) * width,
                        b.data() + (r * s.length + begin) * width,
                        size_t((end - begin) * width) * sizeof(float)) != 0)
          return false;
      return true;
    };
    auto redraw = [&](std::vector<float>& a, int64_t width, int64_t begin, int64_t end,
                      uint32_t seed) {
      const std::vector<float> fresh = random_vector(a.size(), seed, 0.f, 1.f);
      for (int64_t r = 0; r < s.rows; ++r)
        for (int64_t i = (r * s.length + begin) * width; i < (r * s.length + end) * width; ++i)
          a[size_t(i)] = fresh[size_t(i)];
    };
    for (int64_t pos : {0, 15, 31, 32, 64, 100, 148}) {
      CAPTURE(pos);
      Problem later = base;
      redraw(later.q, e, pos + 1, s.length, 11);
      redraw(later.k, e, pos + 1, s.length, 12);
      redraw(later.v, m, pos + 1, s.length, 13);
      redraw(later.dout, m, pos + 1, s.length, 14);
      const Results after_later = kernel(later, s);
      CHECK(same(before.out, after_later.out, m, 0, pos + 1));
      CHECK(same(before.dq, after_later.dq, e, 0, pos + 1));
      CHECK_FALSE(same(before.out, after_later.out, m, pos + 1, s.length));
      Problem earlier = base;
      redraw(earlier.q, e, 0, pos, 21);
      redraw(earlier.k, e, 0, pos, 22);
      redraw(earlier.v, m, 0, pos, 23);
      redraw(earlier.dout, m, 0, pos, 24);
      const Results after_earlier = kernel(earlier, s);
      CHECK(same(before.dk, after_earlier.dk, e, pos, s.length));
      CHECK(same(before.dv, after_earlier.dv, m, pos, s.length));
    }
  }
}

TEST_CASE("causal_linear_attention op under bf16 autocast runs the bf16 kernel, f32 outside") {
  kn::CausalLinearAttentionShape s{3, 70, 12, 9};  // rows = B * H = 3 * 1
  s.bf16 = true;
  const Problem p(s, 77);
  const Results want = kernel(p, s);
  kn::CausalLinearAttentionShape f32 = s;
  f32.bf16 = false;
  const Results want_f32 = kernel(p, f32);
  auto run_op = [&](bool autocast) {
    eng::Tensor q = eng::Tensor::from_vector(p.q, {3, 1, 70, 12});
    eng::Tensor k = eng::Tensor::from_vector(p.k, {3, 1, 70, 12});
    eng::Tensor v = eng::Tensor::from_vector(p.v, {3, 1, 70, 9});
    for (eng::Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
    eng::Tensor out;
    {
      eng::AutocastGuard guard(autocast ? eng::DType::kBF16 : eng::DType::kF32);
      out = eng::causal_linear_attention(q, k, v);
    }
    // The backward runs outside the scope: it follows the forward's choice.
    eng::backward(eng::sum(eng::mul(out, eng::Tensor::from_vector(p.dout, {3, 1, 70, 9}))));
    return Results{out.to_vector(), q.grad().to_vector(), k.grad().to_vector(),
                   v.grad().to_vector()};
  };
  const Results bf16 = run_op(true), plain = run_op(false);
  const auto got = bf16.all(), w = want.all(), got32 = plain.all(), w32 = want_f32.all();
  for (size_t n = 0; n < got.size(); ++n) {
    CAPTURE(n);
    // Bit-identical: the same kernel, the same rows (the ones-column sums are no different).
    CHECK(max_abs_diff(*got[n], *w[n]) == 0.0);
    CHECK(max_abs_diff(*got32[n], *w32[n]) == 0.0);
  }
}
