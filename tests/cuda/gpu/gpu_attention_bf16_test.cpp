// GPU tests of the bf16 tensor-core flash attention (attention_bf16.hpp) on fresh random
// inputs with NaN-poisoned outputs: against its CPU twin (attention_bf16_reference.hpp, the
// same algorithm and rounding points; only the order of sums inside a tensor-core product
// differs, so 3e-3 by relative norm, lse 1e-5) and against the plain double reference on the
// same bf16 values (bf16 tolerance, 1e-2 / 2e-2, as the twin's own CI test). Head dims 64 and
// 128, T ragged (not a multiple of the 64-row tiles) and T = 1, packed segments with several
// heads; the backward is checked bitwise repeatable (no atomics), and bad arguments refused.
#include <cmath>

#include "gpu_test_harness.hpp"
#include "patchbay/kernels/cuda/attention_bf16.hpp"
#include "patchbay/kernels/cuda/attention_bf16_reference.hpp"
#include "patchbay/kernels/cuda/attention_reference.hpp"
#include "patchbay/kernels/cuda/math/bf16.hpp"

namespace cuda = patchbay::kernels::cuda;
using cuda::testing::DeviceBuffer;

namespace {

std::vector<uint16_t> to_bf16(const std::vector<float>& values) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = cuda::math::bf16_from_float(values[i]);
  return bits;
}
std::vector<float> from_bf16(const std::vector<uint16_t>& bits) {
  std::vector<float> values(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) values[i] = cuda::math::float_from_bf16(bits[i]);
  return values;
}

struct Case {
  int64_t batch, heads, steps, dim;
  bool packed;  // segments: row b packs segments of 37 + 23 b positions
};

std::vector<int32_t> segment_ids(const Case& c) {
  std::vector<int32_t> ids(size_t(c.batch * c.steps));
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t t = 0; t < c.steps; ++t) ids[size_t(b * c.steps + t)] = int32_t(t / (37 + 23 * b));
  return ids;
}

void check_case(cuda::testing::TestContext& t, const Case& c) {
  const int64_t bh = c.batch * c.heads, steps = c.steps, dim = c.dim;
  const size_t n = size_t(bh * steps * dim), rows = size_t(bh * steps);
  const float scale = 1.0f / std::sqrt(float(dim));
  const std::string label = std::to_string(bh) + " heads, T " + std::to_string(steps) + ", D " +
                            std::to_string(dim) + (c.packed ? ", packed" : "");
  const auto q = to_bf16(t.normal(n)), k = to_bf16(t.normal(n)), v = to_bf16(t.normal(n)),
             dout = to_bf16(t.normal(n));
  const std::vector<int32_t> ids = c.packed ? segment_ids(c) : std::vector<int32_t>{};
  DeviceBuffer<uint16_t> dq_in(q), dk_in(k), dv_in(v), ddout(dout);
  DeviceBuffer<int32_t> dsegments(c.packed ? ids : std::vector<int32_t>{0});
  const int32_t* segments = c.packed ? dsegments.get() : nullptr;
  DeviceBuffer<float> out(n), lse(rows), delta(rows), dq(n), dk(n), dv(n);
  for (auto* buffer : {&out, &lse, &delta, &dq, &dk, &dv}) t.poison(*buffer);
  CUDA_CHECK(cuda::causal_attention_bf16_forward(dq_in.get(), dk_in.get(), dv_in.get(), out.get(),
                                                 lse.get(), bh, steps, dim, scale, t.stream(),
                                                 segments, c.heads));
  CUDA_CHECK(cuda::causal_attention_bf16_backward(
      dq_in.get(), dk_in.get(), dv_in.get(), out.get(), ddout.get(), lse.get(), delta.get(),
      dq.get(), dk.get(), dv.get(), bh, steps, dim, scale, t.stream(), segments, c.heads));
  const auto out_gpu = out.download(), lse_gpu = lse.download(), dq_gpu = dq.download(),
             dk_gpu = dk.download(), dv_gpu = dv.download();

  // The twin, from the GPU's own out and lse for the backward (isolates each pass).
  std::vector<float> out_twin(n), lse_twin(rows), dq_twin(n), dk_twin(n), dv_twin(n);
  cuda::causal_attention_bf16_forward_twin(q.data(), k.data(), v.data(), out_twin.data(),
                                           lse_twin.data(), bh, steps, dim, scale,
                                           c.packed ? ids.data() : nullptr, c.heads);
  cuda::causal_attention_bf16_backward_twin(q.data(), k.data(), v.data(), out_gpu.data(),
                                            dout.data(), lse_gpu.data(), dq_twin.data(),
                                            dk_twin.data(), dv_twin.data(), bh, steps, dim, scale,
                                            c.packed ? ids.data() : nullptr, c.heads);
  t.expect_close("out vs twin, " + label, out_gpu, out_twin, 3e-3);
  t.expect_close("lse vs twin, " + label, lse_gpu, lse_twin, 1e-5);
  t.expect_close("dq vs twin, " + label, dq_gpu, dq_twin, 3e-3);
  t.expect_close("dk vs twin, " + label, dk_gpu, dk_twin, 3e-3);
  t.expect_close("dv vs twin, " + label, dv_gpu, dv_twin, 3e-3);

  if (!c.packed) {  // the plain reference has no segments (the twin's CI test covers them)
    std::vector<float> out_ref(n), lse_ref(rows), dq_ref(n), dk_ref(n), dv_ref(n);
    const auto qf = from_bf16(q), kf = from_bf16(k), vf = from_bf16(v), dof = from_bf16(dout);
    cuda::causal_attention_forward_reference(qf.data(), kf.data(), vf.data(), out_ref.data(),
                                             lse_ref.data(), bh, steps, dim, scale);
    cuda::causal_attention_backward_reference(qf.data(), kf.data(), vf.data(), dof.data(),
                                              dq_ref.data(), dk_ref.data(), dv_ref.data(), bh,
                                              steps, dim, scale);
    t.expect_close("out vs double reference, " + label, out_gpu, out_ref, 1e-2);
    t.expect_close("lse vs double reference, " + label, lse_gpu, lse_ref, 1e-5);
    t.expect_close("dq vs double reference, " + label, dq_gpu, dq_ref, 2e-2);
    t.expect_close("dk vs double reference, " + label, dk_gpu, dk_ref, 2e-2);
    t.expect_close("dv vs double reference, " + label, dv_gpu, dv_ref, 1e-2);
  }

  for (auto* buffer : {&dq, &dk, &dv}) t.poison(*buffer);
  CUDA_CHECK(cuda::causal_attention_bf16_backward(
      dq_in.get(), dk_in.get(), dv_in.get(), out.get(), ddout.get(), lse.get(), delta.get(),
      dq.get(), dk.get(), dv.get(), bh, steps, dim, scale, t.stream(), segments, c.heads));
  t.expect_true("dq, dk, dv bitwise repeatable, " + label,
                dq.download() == dq_gpu && dk.download() == dk_gpu && dv.download() == dv_gpu);
}

}  // namespace

GPU_TEST(causal_attention_bf16_forward_backward) {
  const Case cases[] = {{3, 1, 200, 64, false}, {2, 1, 129, 128, false}, {2, 1, 1, 64, false},
                        {1, 1, 64, 128, false}, {2, 2, 300, 128, true},  {2, 3, 150, 64, true}};
  for (const Case& c : cases) check_case(t, c);
  DeviceBuffer<uint16_t> x(64 * 128 + 8);
  DeviceBuffer<float> y(64 * 128);
  t.expect_true("head dim 32 is refused", cuda::causal_attention_bf16_forward(
                                              x.get(), x.get(), x.get(), y.get(), y.get(), 1, 1, 32,
                                              1.0f, t.stream()) == cudaErrorInvalidValue);
  t.expect_true(
      "a misaligned operand is refused",
      cuda::causal_attention_bf16_forward(x.get() + 1, x.get(), x.get(), y.get(), y.get(), 1, 64,
                                          128, 1.0f, t.stream()) == cudaErrorMisalignedAddress);
}

// Small shapes for compute-sanitizer's racecheck (the device check's racecheck stage filters on
// this name; the instrumented kernels run orders of magnitude slower): two key tiles, a ragged
// last block and a segment boundary inside a tile, at both head dims.
GPU_TEST(attention_bf16_race_small) {
  for (const Case& c : {Case{1, 2, 100, 128, true}, Case{1, 1, 130, 64, false}}) check_case(t, c);
}
