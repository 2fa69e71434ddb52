// The chunked causal linear attention kernel (kernels/cpu/causal_linear_chunks_body.inc) on
// every code path this CPU runs (generic, avx2, avx512, each forced): against the O(T^2)
// reference around the chunk (32) and strip (16) boundaries and with E, M not multiples of 16,
// its gradients by central finite differences of its own forward, and exact causality: outputs
// and dq at positions <= p do not change by a single bit when positions > p change, nor dk, dv
// at positions >= p when positions < p change.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "patchbay/kernels/attention_flash.hpp"
#include "patchbay/kernels/causal_linear_attention.hpp"

namespace {

namespace kn = patchbay::kernels;

std::vector<float> random_vector(size_t n, uint32_t seed, float low = -1.f, float high = 1.f) {
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

// The code paths this CPU runs; the others are checked to be refused.
std::vector<kn::KernelIsa> runnable_isas() {
  std::vector<kn::KernelIsa> out;
  for (kn::KernelIsa isa : {kn::KernelIsa::generic, kn::KernelIsa::avx2, kn::KernelIsa::avx512})
    if (kn::kernel_isa_supported(isa)) out.push_back(isa);
  return out;
}

struct Buffers {
  std::vector<float> q, k, v, dout;
  Buffers(const kn::CausalLinearAttentionShape& s, uint32_t seed) {
    const size_t qk = static_cast<size_t>(s.rows * s.length * s.key_dim);
    const size_t vm = static_cast<size_t>(s.rows * s.length * s.value_dim);
    q = random_vector(qk, seed, 0.f, 1.f);  // positive, as after a feature map
    k = random_vector(qk, seed + 1, 0.f, 1.f);
    v = random_vector(vm, seed + 2);
    dout = random_vector(vm, seed + 3);
  }
};

struct Results {
  std::vector<float> out, dq, dk, dv;
};

Results run(const kn::CausalLinearAttentionShape& s, const Buffers& b) {
  Results r{std::vector<float>(b.v.size(), 7.f), std::vector<float>(b.q.size(), 7.f),
            std::vector<float>(b.q.size(), 7.f), std::vector<float>(b.v.size(), 7.f)};
  kn::causal_linear_attention_forward(s, b.q.data(), b.k.data(), b.v.data(), r.out.data());
  kn::causal_linear_attention_backward(s, b.q.data(), b.k.data(), b.v.data(), b.dout.data(),
                                       r.dq.data(), r.dk.data(), r.dv.data());
  return r;
}

// Bytes of positions [begin, end) of every row of a [rows, T, width] buffer equal.
bool same_positions(const std::vector<float>& a, const std::vector<float>& b,
                    const kn::CausalLinearAttentionShape& s, int64_t width, int64_t begin,
                    int64_t end) {
  for (int64_t r = 0; r < s.rows; ++r) {
    const size_t offset = static_cast<size_t>((r * s.length + begin) * width);
    const size_t bytes = static_cast<size_t>((end - begin) * width) * sizeof(float);
    if (std::memcmp(a.data() + offset, b.data() + offset, bytes) != 0) return false;
  }
  return true;
}

// Overwrites positions [begin, end) of every row with fresh values.
void redraw_positions(std::vector<float>& a, const kn::CausalLinearAttentionShape& s, int64_t width,
                      int64_t begin, int64_t end, uint32_t seed) {
  const std::vector<float> fresh = random_vector(a.size(), seed, 0.f, 1.f);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t i = (r * s.length + begin) * width; i < (r * s.length + end) * width; ++i)
      a[static_cast<size_t>(i)] = fresh[static_cast<size_t>(i)];
}

}  // namespace

TEST_CASE("chunked causal linear attention equals the reference on every code path") {
  struct Dims {
    int64_t e, m;
  };
  for (kn::KernelIsa isa : runnable_isas()) {
    for (const Dims d : {Dims{5, 4}, Dims{16, 16}, Dims{37, 20}, Dims{64, 64}, Dims{133, 24}}) {
      for (int64_t length : {1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 129, 200}) {
        CAPTURE(kn::kernel_isa_name(isa));
        CAPTURE(d.e);
        CAPTURE(d.m);
        CAPTURE(length);
        kn::CausalLinearAttentionShape s{2, length, d.e, d.m};
        s.isa = isa;
        const Buffers b(s, static_cast<uint32_t>(length * 131 + d.e));
        const Results got = run(s, b);
        Results ref{std::vector<float>(b.v.size()), std::vector<float>(b.q.size()),
                    std::vector<float>(b.q.size()), std::vector<float>(b.v.size())};
        kn::causal_linear_attention_reference_forward(s, b.q.data(), b.k.data(), b.v.data(),
                                                      ref.out.data());
        kn::causal_linear_attention_reference_backward(s, b.q.data(), b.k.data(), b.v.data(),
                                                       b.dout.data(), ref.dq.data(), ref.dk.data(),
                                                       ref.dv.data());
        CHECK(max_abs_diff(got.out, ref.out) <= 2e-6 * std::max(1.0, max_abs(ref.out)));
        CHECK(max_abs_diff(got.dq, ref.dq) <= 2e-6 * std::max(1.0, max_abs(ref.dq)));
        CHECK(max_abs_diff(got.dk, ref.dk) <= 2e-6 * std::max(1.0, max_abs(ref.dk)));
        CHECK(max_abs_diff(got.dv, ref.dv) <= 2e-6 * std::max(1.0, max_abs(ref.dv)));
      }
    }
  }
}

TEST_CASE("chunked causal linear attention gradients by central finite differences") {
  // loss = sum(out * dout); T = 70 crosses a chunk boundary. Each input is perturbed at a
  // sample of positions on both sides of it; the kernel's forward is f32, hence a large h = 5e-2
  // and a tolerance of 2e-3 relative to the gradient's scale (the loss is linear in each single
  // element, so the central difference has no truncation error, only rounding).
  for (kn::KernelIsa isa : runnable_isas()) {
    CAPTURE(kn::kernel_isa_name(isa));
    kn::CausalLinearAttentionShape s{1, 70, 6, 5};
    s.isa = isa;
    Buffers b(s, 42);
    const Results grads = run(s, b);
    auto loss = [&] {
      std::vector<float> out(b.v.size());
      kn::causal_linear_attention_forward(s, b.q.data(), b.k.data(), b.v.data(), out.data());
      double sum = 0;
      for (size_t i = 0; i < out.size(); ++i) sum += static_cast<double>(out[i]) * b.dout[i];
      return sum;
    };
    const double h = 5e-2;
    struct Input {
      std::vector<float>* values;
      const std::vector<float>* grad;
      const char* name;
    };
    for (const Input in :
         {Input{&b.q, &grads.dq, "q"}, Input{&b.k, &grads.dk, "k"}, Input{&b.v, &grads.dv, "v"}}) {
      CAPTURE(in.name);
      const double scale = std::max(1.0, max_abs(*in.grad));
      for (size_t i = 0; i < in.values->size(); i += 7) {
        CAPTURE(i);
        const float saved = (*in.values)[i];
        (*in.values)[i] = static_cast<float>(saved + h);
        const double up = loss();
        (*in.values)[i] = static_cast<float>(saved - h);
        const double down = loss();
        (*in.values)[i] = saved;
        CHECK(std::fabs((up - down) / (2 * h) - (*in.grad)[i]) <= 2e-3 * scale);
      }
    }
  }
}

TEST_CASE("chunked causal linear attention is causal bit for bit, dk and dv anti-causal") {
  for (kn::KernelIsa isa : runnable_isas()) {
    CAPTURE(kn::kernel_isa_name(isa));
    kn::CausalLinearAttentionShape s{2, 150, 24, 20};
    s.isa = isa;
    const Buffers base(s, 5);
    const Results before = run(s, base);
    for (int64_t p : {0, 1, 14, 15, 16, 31, 32, 63, 64, 100, 148}) {
      CAPTURE(p);
      // Later positions (> p) change: out and dq at <= p stay the same bits.
      Buffers later = base;
      redraw_positions(later.q, s, s.key_dim, p + 1, s.length, 11);
      redraw_positions(later.k, s, s.key_dim, p + 1, s.length, 12);
      redraw_positions(later.v, s, s.value_dim, p + 1, s.length, 13);
      redraw_positions(later.dout, s, s.value_dim, p + 1, s.length, 14);
      const Results after_later = run(s, later);
      CHECK(same_positions(before.out, after_later.out, s, s.value_dim, 0, p + 1));
      CHECK(same_positions(before.dq, after_later.dq, s, s.key_dim, 0, p + 1));
      CHECK_FALSE(same_positions(before.out, after_later.out, s, s.value_dim, p + 1, s.length));
      // Earlier positions (< p) change: dk and dv at >= p stay the same bits.
      Buffers earlier = base;
      redraw_positions(earlier.q, s, s.key_dim, 0, p, 21);
      redraw_positions(earlier.k, s, s.key_dim, 0, p, 22);
      redraw_positions(earlier.v, s, s.value_dim, 0, p, 23);
      redraw_positions(earlier.dout, s, s.value_dim, 0, p, 24);
      const Results after_earlier = run(s, earlier);
      CHECK(same_positions(before.dk, after_earlier.dk, s, s.key_dim, p, s.length));
      CHECK(same_positions(before.dv, after_earlier.dv, s, s.value_dim, p, s.length));
    }
    // The result of a prefix does not depend on the length it is part of.
    kn::CausalLinearAttentionShape shorter = s;
    shorter.rows = 1;
    shorter.length = 77;
    std::vector<float> out(static_cast<size_t>(77 * s.value_dim));
    kn::causal_linear_attention_forward(shorter, base.q.data(), base.k.data(), base.v.data(),
                                        out.data());
    CHECK(std::memcmp(out.data(), before.out.data(), out.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("chunked causal linear attention refuses bad shapes and a code path the CPU lacks") {
  kn::CausalLinearAttentionShape s{1, 4, 0, 3};
  CHECK(kn::causal_linear_attention_error(s).find("key_dim >= 1") != std::string::npos);
  s.key_dim = 2;
  CHECK(kn::causal_linear_attention_error(s).empty());
  std::vector<float> x(8, 1.f), out(12);
  for (kn::KernelIsa isa : {kn::KernelIsa::avx2, kn::KernelIsa::avx512}) {
    if (kn::kernel_isa_supported(isa)) continue;
    s.isa = isa;
    const std::string e = kn::causal_linear_attention_error(s);
    CHECK(e.find("does not support it") != std::string::npos);
    CHECK_THROWS_AS(
        kn::causal_linear_attention_forward(s, x.data(), x.data(), out.data(), out.data()),
        std::invalid_argument);
  }
  // Zero rows or zero positions are valid and write nothing.
  s = kn::CausalLinearAttentionShape{0, 4, 2, 3};
  kn::causal_linear_attention_forward(s, nullptr, nullptr, nullptr, nullptr);
  s = kn::CausalLinearAttentionShape{1, 0, 2, 3};
  kn::causal_linear_attention_forward(s, nullptr, nullptr, nullptr, nullptr);
}
