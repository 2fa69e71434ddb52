// The fused sorted-chunk (LSH) attention kernel (kernels/cpu/sorted_chunks_body.inc) on every
// code path this CPU runs (generic, avx2, avx512, each forced), with real LSH slot plans
// (plan_slots of lsh_buckets.cpp): forward and lse against the plain reference and against the
// composed definition the plugin used before (fill_bias's bias, a softmax per chunk, rounds
// combined by log-sum-exp), the backward against the reference, gradients by central finite
// differences of the kernel's own forward, bit-exact causality (changing later positions and
// their buckets leaves earlier outputs unchanged bit for bit), and the plan checks.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "lsh_buckets.hpp"
#include "patchbay/kernels/attention_flash.hpp"
#include "patchbay/kernels/sorted_chunk_attention.hpp"
#include "sorted_chunk_fixture.hpp"

namespace {

namespace kn = patchbay::kernels;
using patchbay_lsh::LshSpec;
using namespace sorted_chunk_test;

// The composed definition the plugin computed with engine ops: per chunk, scores against the
// previous and own chunk plus fill_bias's bias, a softmax, rounds combined by log-sum-exp.
std::vector<double> composed_out(const Problem& p) {
  const int64_t t_len = p.shape.length, d = p.shape.head_dim, c = p.spec.chunk_len;
  const int64_t slots = p.plans.slots, chunks = slots / c;
  std::vector<double> out(p.q.size(), 0.0);
  for (int64_t row = 0; row < p.shape.rows; ++row) {
    const auto& plan = p.plans.rows[size_t(row)];
    std::vector<float> bias(size_t(slots * 2 * c));
    patchbay_lsh::fill_bias(plan, t_len, slots, p.spec, bias.data());
    const float* q = p.q.data() + row * t_len * d;
    const float* k = p.k.data() + row * t_len * d;
    const float* v = p.v.data() + row * t_len * d;
    auto pos_of = [&](int64_t slot) {
      return std::max<int32_t>(p.plans.position[size_t(row * slots + slot)], 0);
    };
    std::vector<std::vector<std::pair<double, std::vector<double>>>> per_pos(
        static_cast<size_t>(t_len));
    for (int64_t s = 0; s < slots; ++s) {
      const int64_t i = p.plans.position[size_t(row * slots + s)];
      if (i < 0) continue;
      const int64_t ch = s / c;
      std::vector<double> score(size_t(2 * c));
      double mx = -1e300;
      for (int64_t w = 0; w < 2 * c; ++w) {
        const int64_t ks = w < c ? ((ch + chunks - 1) % chunks) * c + w : ch * c + (w - c);
        double dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += double(q[i * d + e]) * k[pos_of(ks) * d + e];
        score[size_t(w)] = p.shape.scale * dot + bias[size_t(s * 2 * c + w)];
        mx = std::max(mx, score[size_t(w)]);
      }
      double sum = 0;
      std::vector<double> o(size_t(d), 0.0);
      for (int64_t w = 0; w < 2 * c; ++w) {
        const int64_t ks = w < c ? ((ch + chunks - 1) % chunks) * c + w : ch * c + (w - c);
        const double e = std::exp(score[size_t(w)] - mx);
        sum += e;
        for (int64_t x = 0; x < d; ++x) o[size_t(x)] += e * v[pos_of(ks) * d + x];
      }
      for (double& x : o) x /= sum;
      per_pos[size_t(i)].push_back({mx + std::log(sum), o});
    }
    for (int64_t i = 0; i < t_len; ++i) {
      double mx = -1e300, total = 0;
      for (const auto& [l, o] : per_pos[size_t(i)]) mx = std::max(mx, l);
      for (const auto& [l, o] : per_pos[size_t(i)]) total += std::exp(l - mx);
      for (const auto& [l, o] : per_pos[size_t(i)])
        for (int64_t x = 0; x < d; ++x)
          out[size_t((row * t_len + i) * d + x)] += std::exp(l - mx) / total * o[size_t(x)];
    }
  }
  return out;
}

LshSpec spec_of(int64_t buckets, int64_t hashes, int64_t chunk, bool dedup) {
  LshSpec s;
  s.n_buckets = buckets, s.n_hashes = hashes, s.chunk_len = chunk, s.dedup = dedup;
  return s;
}

const std::vector<LshSpec> kSpecs = {spec_of(4, 3, 8, true), spec_of(8, 2, 16, true),
                                     spec_of(2, 1, 5, false), spec_of(4, 2, 8, false)};

}  // namespace

TEST_CASE("sorted-chunk attention forward equals the reference and the composed definition") {
  for (kn::KernelIsa isa : runnable_isas()) {
    CAPTURE(kn::kernel_isa_name(isa));
    for (size_t n = 0; n < kSpecs.size(); ++n) {
      CAPTURE(n);
      Problem p = make_problem(2, 75, n == 2 ? 7 : 20, kSpecs[n], 11 + uint32_t(n));
      p.shape.isa = isa;
      const Forward f = forward(p);
      Forward ref{std::vector<float>(f.out.size()), {}, std::vector<float>(f.lse.size())};
      kn::sorted_chunk_attention_reference_forward(p.shape, p.q.data(), p.k.data(), p.v.data(),
                                                   p.plans.position.data(), p.plans.group.data(),
                                                   ref.out.data(), ref.lse.data());
      CHECK(max_abs_diff(f.out, ref.out) < 2e-5);
      for (size_t i = 0; i < f.lse.size(); ++i)  // relative: self-only rows sit near -1e5
        CHECK(std::fabs(f.lse[i] - ref.lse[i]) <= 2e-5 * std::max(1.f, std::fabs(ref.lse[i])));
      const std::vector<double> composed = composed_out(p);
      double worst = 0;
      for (size_t i = 0; i < composed.size(); ++i)
        worst = std::max(worst, std::fabs(composed[i] - f.out[i]));
      CHECK(worst < 2e-5);
    }
  }
}

TEST_CASE("sorted-chunk attention backward equals the reference; non-causal too") {
  for (kn::KernelIsa isa : runnable_isas()) {
    CAPTURE(kn::kernel_isa_name(isa));
    for (size_t n = 0; n < kSpecs.size(); ++n) {
      for (bool causal : {true, false}) {
        CAPTURE(n);
        CAPTURE(causal);
        Problem p = make_problem(2, 61, n == 2 ? 7 : 20, kSpecs[n], 23 + uint32_t(n));
        p.shape.isa = isa, p.shape.causal = causal;
        const Forward f = forward(p);
        std::vector<float> dq(p.q.size(), 7.f), dk(dq), dv(dq), rq(dq.size()), rk(rq), rv(rq);
        kn::sorted_chunk_attention_backward(p.shape, p.q.data(), p.k.data(), p.v.data(),
                                            p.plans.position.data(), p.plans.group.data(),
                                            f.out.data(), f.stat.data(), p.dout.data(), dq.data(),
                                            dk.data(), dv.data());
        kn::sorted_chunk_attention_reference_backward(
            p.shape, p.q.data(), p.k.data(), p.v.data(), p.plans.position.data(),
            p.plans.group.data(), p.dout.data(), rq.data(), rk.data(), rv.data());
        CHECK(max_abs_diff(dq, rq) < 5e-5);
        CHECK(max_abs_diff(dk, rk) < 5e-5);
        CHECK(max_abs_diff(dv, rv) < 5e-5);
      }
    }
  }
}

TEST_CASE("sorted-chunk attention gradients by central finite differences") {
  // loss = sum(out * dout) of the kernel's own f32 forward; a small problem keeps the loss's
  // rounding (~1e-6) well under h^2-sized truncation at h = 1e-2.
  for (kn::KernelIsa isa : runnable_isas()) {
    CAPTURE(kn::kernel_isa_name(isa));
    Problem p = make_problem(1, 24, 6, spec_of(2, 2, 4, true), 5);
    p.shape.isa = isa;
    const Forward f = forward(p);
    std::vector<float> dq(p.q.size()), dk(dq), dv(dq);
    kn::sorted_chunk_attention_backward(
        p.shape, p.q.data(), p.k.data(), p.v.data(), p.plans.position.data(), p.plans.group.data(),
        f.out.data(), f.stat.data(), p.dout.data(), dq.data(), dk.data(), dv.data());
    auto loss = [&] {
      const Forward g = forward(p);
      double sum = 0;
      for (size_t i = 0; i < g.out.size(); ++i) sum += double(g.out[i]) * p.dout[i];
      return sum;
    };
    const double h = 1e-2;
    using Input = std::tuple<std::vector<float>*, const std::vector<float>*, const char*>;
    for (auto [values, grad, name] :
         {Input{&p.q, &dq, "q"}, Input{&p.k, &dk, "k"}, Input{&p.v, &dv, "v"}}) {
      CAPTURE(name);
      for (size_t i = 0; i < values->size(); i += 5) {
        CAPTURE(i);
        const float saved = (*values)[i];
        (*values)[i] = saved + float(h);
        const double up = loss();
        (*values)[i] = saved - float(h);
        const double down = loss();
        (*values)[i] = saved;
        CHECK(std::fabs((up - down) / (2 * h) - (*grad)[i]) < 3e-3);
      }
    }
  }
}

TEST_CASE("sorted-chunk attention is causal bit for bit") {
  // Positions > 40 get other values and other buckets (so other slots and chunk boundaries after
  // them); outputs and lse at positions <= 40 must not change at all.
  const int64_t length = 90, cut = 40, dim = 16;
  for (kn::KernelIsa isa : runnable_isas()) {
    CAPTURE(kn::kernel_isa_name(isa));
    const LshSpec spec = spec_of(4, 2, 8, true);
    Buckets buckets = random_buckets(1, length, spec, 3);
    Problem a = make_problem(1, length, dim, spec, 3);
    a.shape.isa = isa;
    Problem b = a;
    Buckets other = random_buckets(1, length, spec, 99);
    for (size_t r = 0; r < buckets[0].size(); ++r)
      for (int64_t t = cut + 1; t < length; ++t) buckets[0][r][size_t(t)] = other[0][r][size_t(t)];
    a.plans = make_plans(random_buckets(1, length, spec, 3), length, spec);
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
    // Not vacuous: a later output changed.
    CHECK(max_abs_diff(fa.out, fb.out) > 1e-3);
  }
}

TEST_CASE("sorted-chunk attention refuses bad shapes and plans with the reason") {
  kn::SortedChunkAttentionShape s;
  s.rows = 1, s.length = 3, s.head_dim = 4, s.slots = 6, s.chunk_len = 4;
  CHECK(kn::sorted_chunk_attention_error(s, nullptr, nullptr).find("multiple of chunk_len") !=
        std::string::npos);
  s.chunk_len = 3;
  const std::vector<int32_t> group(6, 0);
  const std::vector<int32_t> out_of_range = {0, 1, 2, 3, -1, -1};
  CHECK(kn::sorted_chunk_attention_error(s, out_of_range.data(), group.data())
            .find("reads position 3") != std::string::npos);
  const std::vector<int32_t> unequal = {0, 1, 2, 0, -1, -1};
  CHECK(kn::sorted_chunk_attention_error(s, unequal.data(), group.data()).find("equally often") !=
        std::string::npos);
  std::vector<float> x(12);
  CHECK_THROWS_AS(
      kn::sorted_chunk_attention_forward(s, x.data(), x.data(), x.data(), unequal.data(),
                                         group.data(), x.data(), x.data()),
      std::invalid_argument);
  const std::vector<int32_t> good = {0, 1, 2, 2, 1, 0};
  CHECK(kn::sorted_chunk_attention_error(s, good.data(), group.data()).empty());
  for (kn::KernelIsa isa : {kn::KernelIsa::avx2, kn::KernelIsa::avx512}) {
    s.isa = isa;
    if (!kn::kernel_isa_supported(isa))
      CHECK(kn::sorted_chunk_attention_error(s, nullptr, nullptr).find("does not support") !=
            std::string::npos);
  }
}
