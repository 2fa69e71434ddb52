// The fused sorted-chunk (LSH) attention kernel with bf16 operands (shape.bf16, the engine's bf16
// autocast) on every code path this CPU runs (each forced), with real LSH slot plans: equal to
// the plain reference that rounds the same operands (q, k, v, dout, P, dS) to bf16 and
// accumulates in double, forward, lse and gradients; within bf16 precision of the f32 result and
// measurably apart from it; bit-exact causality; and the engine op under an AutocastGuard equal
// to the kernel with bf16 operands.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "engine/autocast.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "engine/ops/sorted_chunk_attention.hpp"
#include "sorted_chunk_fixture.hpp"

namespace {

namespace kn = patchbay::kernels;
namespace eng = patchbay::engine;
using patchbay_lsh::LshSpec;
using namespace sorted_chunk_test;

LshSpec spec_of(int64_t buckets, int64_t hashes, int64_t chunk, bool dedup) {
  LshSpec s;
  s.n_buckets = buckets, s.n_hashes = hashes, s.chunk_len = chunk, s.dedup = dedup;
  return s;
}

double max_abs(const std::vector<float>& a) {
  double worst = 0;
  for (float x : a) worst = std::max(worst, std::fabs(double(x)));
  return worst;
}

// The share of elements of a within tol of b.
double share_within(const std::vector<float>& a, const std::vector<float>& b, double tol) {
  REQUIRE(a.size() == b.size());
  size_t close = 0;
  for (size_t i = 0; i < a.size(); ++i) close += std::fabs(double(a[i]) - b[i]) <= tol ? 1 : 0;
  return a.empty() ? 1.0 : double(close) / double(a.size());
}

struct Grads {
  std::vector<float> dq, dk, dv;
};

Grads kernel_backward(const Problem& p, const Forward& f) {
  Grads g{std::vector<float>(p.q.size(), 7.f), std::vector<float>(p.q.size(), 7.f),
          std::vector<float>(p.q.size(), 7.f)};
  kn::sorted_chunk_attention_backward(
      p.shape, p.q.data(), p.k.data(), p.v.data(), p.plans.position.data(), p.plans.group.data(),
      f.out.data(), f.stat.data(), p.dout.data(), g.dq.data(), g.dk.data(), g.dv.data());
  return g;
}

// out, lse and the gradients of the plain reference for p.shape (bf16 or not).
struct Reference {
  std::vector<float> out, lse;
  Grads grads;
};
Reference reference(const Problem& p) {
  const size_t n = p.q.size(), positions = size_t(p.shape.rows * p.shape.length);
  Reference r{std::vector<float>(n), std::vector<float>(positions),
              Grads{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)}};
  kn::sorted_chunk_attention_reference_forward(p.shape, p.q.data(), p.k.data(), p.v.data(),
                                               p.plans.position.data(), p.plans.group.data(),
                                               r.out.data(), r.lse.data());
  kn::sorted_chunk_attention_reference_backward(
      p.shape, p.q.data(), p.k.data(), p.v.data(), p.plans.position.data(), p.plans.group.data(),
      p.dout.data(), r.grads.dq.data(), r.grads.dk.data(), r.grads.dv.data());
  return r;
}

const std::vector<LshSpec> kSpecs = {spec_of(4, 3, 8, true), spec_of(8, 2, 16, true),
                                     spec_of(2, 1, 5, false), spec_of(4, 2, 8, false)};

}  // namespace

TEST_CASE("bf16 sorted-chunk attention equals the bf16-rounding reference on every code path") {
  for (kn::KernelIsa isa : runnable_isas()) {
    CAPTURE(kn::kernel_isa_name(isa));
    for (size_t n = 0; n < kSpecs.size(); ++n) {
      for (bool causal : {true, false}) {
        CAPTURE(n);
        CAPTURE(causal);
        Problem p = make_problem(2, 75, n == 2 ? 7 : 20, kSpecs[n], 31 + uint32_t(n));
        p.shape.isa = isa, p.shape.causal = causal, p.shape.bf16 = true;
        const Forward f = forward(p);
        const Grads g = kernel_backward(p, f);
        const Reference bf16_ref = reference(p);
        Problem p32 = p;
        p32.shape.bf16 = false;
        const Reference f32_ref = reference(p32);
        for (size_t i = 0; i < f.lse.size(); ++i)  // relative: self-only rows sit near -1e5
          CHECK(std::fabs(f.lse[i] - bf16_ref.lse[i]) <=
                2e-5 * std::max(1.f, std::fabs(bf16_ref.lse[i])));
        const std::vector<const std::vector<float>*> got = {&f.out, &g.dq, &g.dk, &g.dv};
        const std::vector<const std::vector<float>*> want = {
            &bf16_ref.out, &bf16_ref.grads.dq, &bf16_ref.grads.dk, &bf16_ref.grads.dv};
        const std::vector<const std::vector<float>*> want32 = {
            &f32_ref.out, &f32_ref.grads.dq, &f32_ref.grads.dk, &f32_ref.grads.dv};
        for (size_t t = 0; t < got.size(); ++t) {
          CAPTURE(t);  // out, dq, dk, dv
          const double scale = std::max(1.0, max_abs(*want32[t]));
          // Same rounding points, f32 accumulation: f32 precision for nearly every element (a
          // P or dS whose f32 value sits on a bf16 rounding boundary may round the other way
          // than the double reference's, moving one term by a bf16 step).
          const double tight = 2e-5 * scale;
          CHECK(share_within(*got[t], *want[t], tight) >= 0.99);
          CHECK(max_abs_diff(*got[t], *want[t]) <= 1e-2 * scale);
          // bf16 precision of the f32 result, and visibly rounded.
          CHECK(max_abs_diff(*got[t], *want32[t]) <= 3e-2 * scale);
          CHECK(share_within(*got[t], *want32[t], tight) <= 0.5);
        }
      }
    }
  }
}

TEST_CASE("bf16 sorted-chunk attention is causal bit for bit") {
  const int64_t length = 90, cut = 40, dim = 16;
  for (kn::KernelIsa isa : runnable_isas()) {
    CAPTURE(kn::kernel_isa_name(isa));
    const LshSpec spec = spec_of(4, 2, 8, true);
    Buckets buckets = random_buckets(1, length, spec, 3);
    Problem a = make_problem(1, length, dim, spec, 3);
    a.shape.isa = isa, a.shape.bf16 = true;
    Problem b = a;
    const Buckets other = random_buckets(1, length, spec, 99);
    for (size_t r = 0; r < buckets[0].size(); ++r)
      for (int64_t t = cut + 1; t < length; ++t) buckets[0][r][size_t(t)] = other[0][r][size_t(t)];
    b.plans = make_plans(buckets, length, spec);
    b.shape.slots = b.plans.slots;
    const std::vector<float> noise = random_vector(a.q.size(), 77);
    for (size_t n = size_t((cut + 1) * dim); n < a.q.size(); ++n)
      b.q[n] = noise[n], b.k[n] = -noise[n], b.v[n] = 2 * noise[n];
    const Forward fa = forward(a), fb = forward(b);
    for (int64_t t = 0; t <= cut; ++t) {
      CHECK(fa.stat[size_t(2 * t)] == fb.stat[size_t(2 * t)]);
      CHECK(fa.stat[size_t(2 * t + 1)] == fb.stat[size_t(2 * t + 1)]);
      for (int64_t e = 0; e < dim; ++e)
        CHECK(fa.out[size_t(t * dim + e)] == fb.out[size_t(t * dim + e)]);
    }
    CHECK(max_abs_diff(fa.out, fb.out) > 1e-3);
  }
}

TEST_CASE("sorted_chunk_attention op under bf16 autocast runs the bf16 kernel, f32 outside") {
  Problem p = make_problem(2, 40, 16, spec_of(4, 2, 8, true), 9);
  auto run_op = [&](bool autocast) {
    const eng::Shape shape = {2, 1, 40, 16}, plan_shape = {2, 1, p.plans.slots};
    eng::Tensor q = eng::Tensor::from_vector(p.q, shape);
    eng::Tensor k = eng::Tensor::from_vector(p.k, shape);
    eng::Tensor v = eng::Tensor::from_vector(p.v, shape);
    for (eng::Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
    eng::SortedChunkOptions o;
    o.chunk_len = p.shape.chunk_len, o.scale = p.shape.scale, o.self_bias = p.shape.self_bias;
    o.causal = true, o.dedup = p.shape.dedup;
    eng::Tensor out;
    {
      eng::AutocastGuard guard(autocast ? eng::DType::kBF16 : eng::DType::kF32);
      out = eng::sorted_chunk_attention(
          q, k, v, eng::Tensor::from_data(p.plans.position.data(), plan_shape, eng::DType::kI32),
          eng::Tensor::from_data(p.plans.group.data(), plan_shape, eng::DType::kI32), o);
    }
    eng::backward(eng::sum(eng::mul(out, eng::Tensor::from_vector(p.dout, shape))));
    return std::vector<std::vector<float>>{out.to_vector(), q.grad().to_vector(),
                                           k.grad().to_vector(), v.grad().to_vector()};
  };
  for (bool bf16 : {true, false}) {
    CAPTURE(bf16);
    p.shape.bf16 = bf16;
    const Forward f = forward(p);
    const Grads g = kernel_backward(p, f);
    const std::vector<std::vector<float>> got = run_op(bf16);
    CHECK(max_abs_diff(got[0], f.out) == 0.0);
    CHECK(max_abs_diff(got[1], g.dq) == 0.0);
    CHECK(max_abs_diff(got[2], g.dk) == 0.0);
    CHECK(max_abs_diff(got[3], g.dv) == 0.0);
  }
}
