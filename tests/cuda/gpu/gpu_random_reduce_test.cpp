// GPU tests of the Philox fills, dropout masks and row reductions (random_reduce_rows.hpp)
// against their CPU twins: the same counter-based draws give the same numbers on both sides
// (uniform bit for bit; normal within a few ulps of logf/cosf), whatever the launch shape.
#include <cmath>

#include "gpu_test_harness.hpp"
#include "patchbay/kernels/cuda/random_reduce_rows.hpp"
#include "patchbay/kernels/cuda/random_reduce_rows_reference.hpp"

namespace cuda = patchbay::kernels::cuda;
using cuda::testing::DeviceBuffer;

GPU_TEST(philox_fills_and_dropout_match_cpu) {
  const int64_t n = 1000001;
  const uint64_t seed = t.random()(), offset = 17;
  DeviceBuffer<float> out(static_cast<size_t>(n));
  std::vector<float> expected(static_cast<size_t>(n));
  t.poison(out);
  CUDA_CHECK(cuda::random_uniform_f32(out.get(), n, seed, offset, -2.0f, 3.0f, t.stream()));
  cuda::random_uniform_f32_reference(expected.data(), n, seed, offset, -2.0f, 3.0f);
  t.expect_close("uniform [-2, 3)", out.download(), expected, 1e-7);
  t.poison(out);
  CUDA_CHECK(cuda::random_normal_f32(out.get(), n, seed, offset, 0.5f, 0.02f, t.stream()));
  cuda::random_normal_f32_reference(expected.data(), n, seed, offset, 0.5f, 0.02f);
  const auto normal = out.download();
  t.expect_close("normal(0.5, 0.02)", normal, expected, 1e-6);
  double mean = 0;
  for (float v : normal) mean += v;
  t.expect_true("normal mean within 1e-4 of 0.5", std::fabs(mean / double(n) - 0.5) < 1e-4);
  t.poison(out);
  CUDA_CHECK(cuda::dropout_mask_f32(out.get(), n, 0.1f, seed, offset, t.stream()));
  cuda::dropout_mask_f32_reference(expected.data(), n, 0.1f, seed, offset);
  const auto mask = out.download();
  t.expect_close("dropout mask p = 0.1", mask, expected, 0.0);
  int64_t kept = 0;
  for (float v : mask) kept += v != 0.0f;
  t.expect_true("dropout keeps about 90%", std::fabs(double(kept) / double(n) - 0.9) < 0.002);
  t.expect_true("p = 1 is refused", cuda::dropout_mask_f32(out.get(), n, 1.0f, seed, offset,
                                                           t.stream()) == cudaErrorInvalidValue);
}

GPU_TEST(row_sum_mean_max) {
  const int64_t rows = 67, cols = 5003;
  auto x = t.normal(static_cast<size_t>(rows * cols));
  x[size_t(3 * cols + 7)] = NAN;  // row 3's max is NaN
  DeviceBuffer<float> dx(x), out(static_cast<size_t>(rows));
  std::vector<float> expected(static_cast<size_t>(rows));
  for (const auto reduction :
       {cuda::RowReduction::kSum, cuda::RowReduction::kMean, cuda::RowReduction::kMax}) {
    t.poison(out);
    CUDA_CHECK(cuda::reduce_rows_f32(reduction, dx.get(), out.get(), rows, cols, t.stream()));
    cuda::reduce_rows_f32_reference(reduction, x.data(), expected.data(), rows, cols);
    auto gpu = out.download();
    if (reduction != cuda::RowReduction::kMax) {  // row 3 is NaN in both; compare the others
      gpu[3] = expected[3] = 0.0f;
    }
    t.expect_close("reduction " + std::to_string(int(reduction)), gpu, expected, 1e-5);
  }
}
