// GPU tests of the chunked causal linear attention (linear_attention.hpp) against its CPU twin
// (linear_attention_reference.hpp, itself checked against the O(T^2) reference in CI): forward
// and the three gradients at lengths around the chunk, head dims from 7 to 256 (Performer
// features; past 48 KiB of shared memory), f32 relative norm 1e-5, and identical bits run to
// run (fixed summation order, no atomics).
#include <cstring>

#include "gpu_test_harness.hpp"
#include "patchbay/kernels/cuda/linear_attention.hpp"
#include "patchbay/kernels/cuda/linear_attention_reference.hpp"

namespace cuda = patchbay::kernels::cuda;
using cuda::testing::DeviceBuffer;

GPU_TEST(causal_linear_attention_forward_backward_match_twin) {
  struct Case {
    int64_t rows, length, e, m;
  };
  const Case cases[] = {{3, 1, 4, 3}, {2, 33, 7, 40}, {8, 1000, 64, 64}, {4, 300, 256, 64}};
  for (const auto& c : cases) {
    const std::string what = "rows " + std::to_string(c.rows) + " T " + std::to_string(c.length) +
                             " E " + std::to_string(c.e) + " M " + std::to_string(c.m);
    const size_t qk = size_t(c.rows * c.length * c.e), vo = size_t(c.rows * c.length * c.m);
    const auto q = t.normal(qk, 0.3f), k = t.normal(qk, 0.3f), v = t.normal(vo),
               dout = t.normal(vo);
    DeviceBuffer<float> dq_in(q), dk_in(k), dv_in(v), ddout(dout), out(vo), dq(qk), dk(qk), dv(vo);
    t.poison(out);
    CUDA_CHECK(cuda::causal_linear_attention_forward_f32(
        dq_in.get(), dk_in.get(), dv_in.get(), out.get(), c.rows, c.length, c.e, c.m, t.stream()));
    std::vector<float> want(vo);
    cuda::causal_product_f32_reference(q.data(), k.data(), v.data(), want.data(), c.rows, c.length,
                                       c.e, c.m, false);
    const auto first = out.download();
    t.expect_close("forward, " + what, first, want, 1e-5);
    CUDA_CHECK(cuda::causal_linear_attention_forward_f32(
        dq_in.get(), dk_in.get(), dv_in.get(), out.get(), c.rows, c.length, c.e, c.m, t.stream()));
    t.expect_true("forward repeats bit for bit, " + what,
                  std::memcmp(first.data(), out.download().data(), vo * sizeof(float)) == 0);
    t.poison(dq);
    t.poison(dk);
    t.poison(dv);
    CUDA_CHECK(cuda::causal_linear_attention_backward_f32(dq_in.get(), dk_in.get(), dv_in.get(),
                                                          ddout.get(), dq.get(), dk.get(), dv.get(),
                                                          c.rows, c.length, c.e, c.m, t.stream()));
    std::vector<float> want_dq(qk), want_dk(qk), want_dv(vo);
    cuda::causal_linear_attention_backward_f32_reference(
        q.data(), k.data(), v.data(), dout.data(), want_dq.data(), want_dk.data(), want_dv.data(),
        c.rows, c.length, c.e, c.m);
    t.expect_close("dq, " + what, dq.download(), want_dq, 1e-5);
    t.expect_close("dk, " + what, dk.download(), want_dk, 1e-5);
    t.expect_close("dv, " + what, dv.download(), want_dv, 1e-5);
  }
  DeviceBuffer<float> one(1);
  t.expect_true("a key dim past the shared memory is refused",
                cuda::causal_product_f32(one.get(), one.get(), one.get(), one.get(), 1, 1,
                                         cuda::linear_attention_max_key_dim() + 1, 1, false,
                                         t.stream()) == cudaErrorInvalidValue);
}
