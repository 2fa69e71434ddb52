// CI test of the CPU twin of the CUDA causal linear attention (linear_attention_reference.hpp:
// the GPU's chunked causal product and its use for all three gradients, run on the CPU) against
// the CPU engine's plain O(T^2) double-precision reference (kernels/cpu): forward and backward
// on lengths around the chunk size, and exact causality (later positions leave earlier outputs
// bit for bit unchanged).
#include <doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "patchbay/kernels/causal_linear_attention.hpp"
#include "patchbay/kernels/cuda/linear_attention_reference.hpp"

namespace cuda = patchbay::kernels::cuda;
namespace cpu = patchbay::kernels;

namespace {

std::vector<float> normal(size_t n, std::mt19937& random) {
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (auto& x : v) x = dist(random);
  return v;
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return std::sqrt(diff / (norm > 0 ? norm : 1));
}

}  // namespace

TEST_CASE("linear attention twin: forward and the three gradients equal the O(T^2) reference") {
  std::mt19937 random(3);
  struct Case {
    int64_t rows, length, e, m;
  };
  for (const Case c : {Case{2, 1, 4, 3}, Case{3, 31, 8, 5}, Case{2, 32, 16, 16}, Case{2, 33, 7, 40},
                       Case{1, 100, 20, 9}}) {
    CAPTURE(c.length);
    CAPTURE(c.e);
    CAPTURE(c.m);
    const size_t qk = size_t(c.rows * c.length * c.e), vo = size_t(c.rows * c.length * c.m);
    const auto q = normal(qk, random), k = normal(qk, random), v = normal(vo, random),
               dout = normal(vo, random);
    const cpu::CausalLinearAttentionShape shape{c.rows, c.length, c.e, c.m};
    std::vector<float> out(vo), want_out(vo);
    cuda::causal_product_f32_reference(q.data(), k.data(), v.data(), out.data(), c.rows, c.length,
                                       c.e, c.m, false);
    cpu::causal_linear_attention_reference_forward(shape, q.data(), k.data(), v.data(),
                                                   want_out.data());
    CHECK(relative_error(out, want_out) < 1e-5);
    std::vector<float> dq(qk), dk(qk), dv(vo), want_dq(qk), want_dk(qk), want_dv(vo);
    cuda::causal_linear_attention_backward_f32_reference(q.data(), k.data(), v.data(), dout.data(),
                                                         dq.data(), dk.data(), dv.data(), c.rows,
                                                         c.length, c.e, c.m);
    cpu::causal_linear_attention_reference_backward(shape, q.data(), k.data(), v.data(),
                                                    dout.data(), want_dq.data(), want_dk.data(),
                                                    want_dv.data());
    CHECK(relative_error(dq, want_dq) < 1e-5);
    CHECK(relative_error(dk, want_dk) < 1e-5);
    CHECK(relative_error(dv, want_dv) < 1e-5);
  }
}

TEST_CASE("linear attention twin: outputs at l depend on positions <= l only, bit for bit") {
  std::mt19937 random(4);
  const int64_t length = 70, e = 6, m = 5, cut = 40;
  auto q = normal(size_t(length * e), random), k = normal(size_t(length * e), random);
  auto v = normal(size_t(length * m), random);
  std::vector<float> before(size_t(length * m)), after(size_t(length * m));
  cuda::causal_product_f32_reference(q.data(), k.data(), v.data(), before.data(), 1, length, e, m,
                                     false);
  for (int64_t i = cut * e; i < length * e; ++i) q[size_t(i)] = k[size_t(i)] = 1e6f;
  for (int64_t i = cut * m; i < length * m; ++i) v[size_t(i)] = -3.0f;
  cuda::causal_product_f32_reference(q.data(), k.data(), v.data(), after.data(), 1, length, e, m,
                                     false);
  CHECK(std::memcmp(before.data(), after.data(), size_t(cut * m) * sizeof(float)) == 0);
}
