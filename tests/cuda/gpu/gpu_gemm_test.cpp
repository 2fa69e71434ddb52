// GPU tests of the cuBLASLt products (gemm.hpp) against the double-precision CPU twin, on fresh
// random operands with NaN-poisoned outputs: every transpose combination in f32, TF32 and bf16
// (bf16 operands rounded first, so the reference sees the same values), f32 and bf16 output,
// alpha/beta accumulation, batched strided products, and each fused epilogue.
// Tolerances (relative norm): f32 1e-5; TF32 2e-3 (10-bit mantissa products, ~3e-4 typical);
// bf16 operands with f32 output 1e-5 (same operands as the reference); bf16 output 1e-2.
#include <cublasLt.h>

#include "gpu_test_harness.hpp"
#include "patchbay/kernels/cuda/gemm.hpp"
#include "patchbay/kernels/cuda/gemm_reference.hpp"
#include "patchbay/kernels/cuda/math/bf16.hpp"

namespace cuda = patchbay::kernels::cuda;
using cuda::GemmArguments;
using cuda::GemmEpilogue;
using cuda::GemmOutput;
using cuda::GemmPrecision;
using cuda::testing::DeviceBuffer;
using cuda::testing::TestContext;
using cuda::testing::TestFailure;

namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

// A cuBLASLt handle and workspace for one test.
class Gemm {
 public:
  Gemm() : workspace_(kWorkspaceBytes) {
    if (cublasLtCreate(&handle_) != CUBLAS_STATUS_SUCCESS)
      throw TestFailure(
          "cublasLtCreate failed on a usable GPU (is libcublasLt.so.13 the "
          "CUDA 13 one? LD_LIBRARY_PATH: see scripts/gpu/README.md)");
  }
  ~Gemm() { cublasLtDestroy(handle_); }
  void run(const GemmArguments& arguments, cudaStream_t stream) {
    const cublasStatus_t status =
        cuda::gemm(handle_, arguments, workspace_.get(), kWorkspaceBytes, stream);
    if (status != CUBLAS_STATUS_SUCCESS)
      throw TestFailure(std::string("gemm returned ") + cublasLtGetStatusName(status) + " (" +
                        cublasLtGetStatusString(status) + ")");
  }

 private:
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer<unsigned char> workspace_;
};

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
std::vector<float> rounded_to_bf16(const std::vector<float>& values) {
  return from_bf16(to_bf16(values));
}

// One product (batch 1, no epilogue) in the given precision, checked against the twin.
void check_product(TestContext& t, Gemm& gemm, GemmPrecision precision, GemmOutput output,
                   int64_t m, int64_t n, int64_t k, bool ta, bool tb, float beta,
                   double tolerance) {
  const bool bf16 = precision == GemmPrecision::kBf16;
  auto a = t.uniform(static_cast<size_t>(m * k)), b = t.uniform(static_cast<size_t>(k * n));
  const auto d_initial = t.uniform(static_cast<size_t>(m * n));
  if (bf16) {
    a = rounded_to_bf16(a);
    b = rounded_to_bf16(b);
  }
  std::vector<float> expected = d_initial;
  cuda::gemm_reference(m, n, k, ta, tb, a.data(), b.data(), expected.data(), 0.75f, beta,
                       GemmEpilogue::kNone, nullptr, nullptr, nullptr);
  DeviceBuffer<float> a32(a), b32(b), d32(d_initial);
  DeviceBuffer<uint16_t> a16(to_bf16(a)), b16(to_bf16(b)), d16(to_bf16(d_initial));
  if (beta == 0.0f) {
    t.poison(d32);
    t.poison(d16);
  }
  GemmArguments g;
  g.precision = precision;
  g.output = output;
  g.m = m, g.n = n, g.k = k;
  g.transpose_a = ta, g.transpose_b = tb;
  g.a = bf16 ? static_cast<const void*>(a16.get()) : a32.get();
  g.b = bf16 ? static_cast<const void*>(b16.get()) : b32.get();
  g.d = output == GemmOutput::kBf16 ? static_cast<void*>(d16.get()) : d32.get();
  g.alpha = 0.75f;
  g.beta = beta;
  gemm.run(g, t.stream());
  const auto result = output == GemmOutput::kBf16 ? from_bf16(d16.download()) : d32.download();
  const char* names[] = {"f32", "tf32", "bf16"};
  t.expect_close(std::string(names[int(precision)]) +
                     (output == GemmOutput::kBf16 ? "->bf16" : "") + " " + std::to_string(m) + "x" +
                     std::to_string(n) + "x" + std::to_string(k) + (ta ? " A^T" : "") +
                     (tb ? " B^T" : "") + (beta != 0 ? " beta" : ""),
                 result, expected, tolerance);
}

}  // namespace

GPU_TEST(gemm_f32_tf32_all_transposes) {
  Gemm gemm;
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      check_product(t, gemm, GemmPrecision::kF32, GemmOutput::kF32, 67, 45, 129, ta, tb, 0.0f,
                    1e-5);
      check_product(t, gemm, GemmPrecision::kTf32, GemmOutput::kF32, 256, 768, 768, ta, tb, 0.0f,
                    2e-3);
    }
  check_product(t, gemm, GemmPrecision::kF32, GemmOutput::kF32, 64, 32, 16, false, false, 0.5f,
                1e-5);
}

GPU_TEST(gemm_bf16_f32_accumulation) {
  Gemm gemm;
  for (const bool ta : {false, true})
    for (const bool tb : {false, true})
      check_product(t, gemm, GemmPrecision::kBf16, GemmOutput::kF32, 128, 768, 256, ta, tb, 0.0f,
                    1e-5);
  check_product(t, gemm, GemmPrecision::kBf16, GemmOutput::kBf16, 1024, 768, 3072, false, true,
                0.0f, 1e-2);
  check_product(t, gemm, GemmPrecision::kBf16, GemmOutput::kF32, 64, 64, 64, false, false, 1.0f,
                1e-5);
}

GPU_TEST(gemm_batched_strided) {
  Gemm gemm;
  const int64_t batch = 5, m = 128, n = 128, k = 64;  // attention-like: Q K^T per head
  const auto a = t.uniform(static_cast<size_t>(batch * m * k)),
             b = t.uniform(static_cast<size_t>(batch * n * k));
  DeviceBuffer<float> da(a), db(b), dd(static_cast<size_t>(batch * m * n));
  t.poison(dd);
  GemmArguments g;
  g.precision = GemmPrecision::kF32;
  g.m = m, g.n = n, g.k = k;
  g.transpose_b = true;
  g.a = da.get(), g.b = db.get(), g.d = dd.get();
  g.batch_count = batch;
  gemm.run(g, t.stream());
  std::vector<float> expected(static_cast<size_t>(batch * m * n));
  for (int64_t i = 0; i < batch; ++i)
    cuda::gemm_reference(m, n, k, false, true, a.data() + i * m * k, b.data() + i * n * k,
                         expected.data() + i * m * n, 1.0f, 0.0f, GemmEpilogue::kNone, nullptr,
                         nullptr, nullptr);
  t.expect_close("5 x [128x64] [128x64]^T", dd.download(), expected, 1e-5);
  t.poison(dd);  // the same problem again: the algorithm now comes from the cache
  gemm.run(g, t.stream());
  t.expect_close("5 x [128x64] [128x64]^T, cached algorithm", dd.download(), expected, 1e-5);
}

GPU_TEST(gemm_batched_broadcast_weight) {
  Gemm gemm;
  const int64_t batch = 3, m = 40, n = 24, k = 16;  // x [3, 40, 16] @ W^T, W [24, 16] shared
  const auto a = t.uniform(size_t(batch * m * k)), w = t.uniform(size_t(n * k));
  DeviceBuffer<float> da(a), dw(w), dd(size_t(batch * m * n));
  t.poison(dd);
  GemmArguments g;
  g.m = m, g.n = n, g.k = k;
  g.transpose_b = true;
  g.a = da.get(), g.b = dw.get(), g.d = dd.get();
  g.batch_count = batch;
  g.broadcast_b = true;
  gemm.run(g, t.stream());
  std::vector<float> expected(size_t(batch * m * n));
  for (int64_t i = 0; i < batch; ++i)
    cuda::gemm_reference(m, n, k, false, true, a.data() + i * m * k, w.data(),
                         expected.data() + i * m * n, 1.0f, 0.0f, GemmEpilogue::kNone, nullptr,
                         nullptr, nullptr);
  t.expect_close("3 x [40x16] [24x16]^T, W broadcast", dd.download(), expected, 1e-5);
}

GPU_TEST(gemm_epilogues_bias_gelu_aux_backward) {
  Gemm gemm;
  const int64_t m = 128, n = 256, k = 96;
  const auto a = t.uniform(static_cast<size_t>(m * k)), b = t.uniform(static_cast<size_t>(k * n)),
             bias = t.uniform(static_cast<size_t>(n));
  DeviceBuffer<float> da(a), db(b), dbias(bias), dd(static_cast<size_t>(m * n)),
      daux(static_cast<size_t>(m * n)), dgrad(static_cast<size_t>(n));
  for (const auto epilogue : {GemmEpilogue::kBias, GemmEpilogue::kGelu, GemmEpilogue::kBiasGelu,
                              GemmEpilogue::kBiasGeluAux}) {
    t.poison(dd);
    t.poison(daux);
    GemmArguments g;
    g.m = m, g.n = n, g.k = k;
    g.a = da.get(), g.b = db.get(), g.d = dd.get();
    g.epilogue = epilogue;
    g.bias = dbias.get();
    g.aux = daux.get();
    gemm.run(g, t.stream());
    std::vector<float> expected(static_cast<size_t>(m * n)), aux(static_cast<size_t>(m * n));
    cuda::gemm_reference(m, n, k, false, false, a.data(), b.data(), expected.data(), 1.0f, 0.0f,
                         epilogue, bias.data(), aux.data(), nullptr);
    t.expect_close("epilogue " + std::to_string(int(epilogue)), dd.download(), expected, 1e-5);
    if (epilogue == GemmEpilogue::kBiasGeluAux)
      t.expect_close("aux (pre-GELU)", daux.download(), aux, 1e-5);
  }
  // Backward through GELU: D = (dY W^T) * gelu'(aux), with the bias gradient.
  const auto pre = t.normal(size_t(m * n), 2.0f);
  DeviceBuffer<float> dpre(pre);
  t.poison(dd);
  t.poison(dgrad);
  GemmArguments g;
  g.m = m, g.n = n, g.k = k;
  g.a = da.get(), g.b = db.get(), g.d = dd.get();
  g.epilogue = GemmEpilogue::kGeluBackwardBias;
  g.aux = dpre.get();
  g.bias_gradient = dgrad.get();
  gemm.run(g, t.stream());
  std::vector<float> expected(static_cast<size_t>(m * n)), grad(static_cast<size_t>(n));
  std::vector<float> aux = pre;
  cuda::gemm_reference(m, n, k, false, false, a.data(), b.data(), expected.data(), 1.0f, 0.0f,
                       GemmEpilogue::kGeluBackwardBias, nullptr, aux.data(), grad.data());
  t.expect_close("GELU backward", dd.download(), expected, 1e-5);
  t.expect_close("GELU backward bias gradient", dgrad.download(), grad, 1e-5);
}

GPU_TEST(gemm_rejects_inconsistent_arguments) {
  DeviceBuffer<float> x(64);
  GemmArguments g;
  g.m = g.n = g.k = 8;
  g.a = g.b = g.d = x.get();
  g.output = GemmOutput::kBf16;  // bf16 output with f32 inputs
  cublasLtHandle_t handle = nullptr;
  t.expect_true("cublasLtCreate", cublasLtCreate(&handle) == CUBLAS_STATUS_SUCCESS);
  t.expect_true("bf16 output with f32 inputs is refused",
                cuda::gemm(handle, g, nullptr, 0, t.stream()) == CUBLAS_STATUS_INVALID_VALUE);
  g.output = GemmOutput::kF32;
  g.epilogue = GemmEpilogue::kBias;  // no bias pointer
  t.expect_true("bias epilogue without bias is refused",
                cuda::gemm(handle, g, nullptr, 0, t.stream()) == CUBLAS_STATUS_INVALID_VALUE);
  cublasLtDestroy(handle);
}
