// GPU tests of the fused causal attention (attention.hpp) against the plain double-precision
// CPU twin: head dims 32, 64 and 128, T ragged (not a multiple of the 64-row blocks or 32-row
// tiles) and T = 1, NaN-poisoned outputs; the backward is also checked to be bitwise
// repeatable. Tolerance (relative norm): 1e-4 for f32 (T-term f32 sums through exp).
#include <cmath>

#include "gpu_test_harness.hpp"
#include "patchbay/kernels/cuda/attention.hpp"
#include "patchbay/kernels/cuda/attention_reference.hpp"

namespace cuda = patchbay::kernels::cuda;
using cuda::testing::DeviceBuffer;

GPU_TEST(causal_attention_forward_backward_f32) {
  const int64_t cases[][3] = {{3, 200, 64}, {2, 129, 128}, {2, 1, 64}, {1, 64, 128}, {2, 77, 32}};
  for (const auto& c : cases) {
    const int64_t heads = c[0], steps = c[1], dim = c[2];
    const size_t n = static_cast<size_t>(heads * steps * dim);
    const size_t rows = static_cast<size_t>(heads * steps);
    const float scale = 1.0f / std::sqrt(float(dim));
    const std::string label =
        std::to_string(heads) + " heads, T " + std::to_string(steps) + ", D " + std::to_string(dim);
    const auto q = t.normal(n), k = t.normal(n), v = t.normal(n), dout = t.normal(n);
    DeviceBuffer<float> dq_in(q), dk_in(k), dv_in(v), ddout(dout), out(n), lse(rows), delta(rows),
        dq(n), dk(n), dv(n);
    for (auto* buffer : {&out, &lse, &delta, &dq, &dk, &dv}) t.poison(*buffer);
    CUDA_CHECK(cuda::causal_attention_forward(dq_in.get(), dk_in.get(), dv_in.get(), out.get(),
                                              lse.get(), heads, steps, dim, scale, t.stream()));
    std::vector<float> out_ref(n), lse_ref(rows), dq_ref(n), dk_ref(n), dv_ref(n);
    cuda::causal_attention_forward_reference(q.data(), k.data(), v.data(), out_ref.data(),
                                             lse_ref.data(), heads, steps, dim, scale);
    t.expect_close("out, " + label, out.download(), out_ref, 1e-5);
    t.expect_close("lse, " + label, lse.download(), lse_ref, 1e-6);
    CUDA_CHECK(cuda::causal_attention_backward(
        dq_in.get(), dk_in.get(), dv_in.get(), out.get(), ddout.get(), lse.get(), delta.get(),
        dq.get(), dk.get(), dv.get(), heads, steps, dim, scale, t.stream()));
    cuda::causal_attention_backward_reference(q.data(), k.data(), v.data(), dout.data(),
                                              dq_ref.data(), dk_ref.data(), dv_ref.data(), heads,
                                              steps, dim, scale);
    const auto dq_first = dq.download();
    t.expect_close("dq, " + label, dq_first, dq_ref, 1e-4);
    t.expect_close("dk, " + label, dk.download(), dk_ref, 1e-4);
    t.expect_close("dv, " + label, dv.download(), dv_ref, 1e-4);
    CUDA_CHECK(cuda::causal_attention_backward(
        dq_in.get(), dk_in.get(), dv_in.get(), out.get(), ddout.get(), lse.get(), delta.get(),
        dq.get(), dk.get(), dv.get(), heads, steps, dim, scale, t.stream()));
    t.expect_true("dq bitwise repeatable, " + label, dq.download() == dq_first);
  }
  DeviceBuffer<float> x(64);
  t.expect_true("head dim 96 is refused",
                cuda::causal_attention_forward(x.get(), x.get(), x.get(), x.get(), x.get(), 1, 1,
                                               96, 1.0f, t.stream()) == cudaErrorInvalidValue);
}
