// GPU tests of the random fills (the CPU engine's Philox layout), dropout masks and row
// reductions (random_reduce_rows.hpp) against their CPU twins: uniform bit for bit, normal
// within a few ulps of logf/cosf/sinf, whatever the launch shape.
#include <cmath>

#include "gpu_test_harness.hpp"
#include "patchbay/kernels/cuda/cumsum.hpp"
#include "patchbay/kernels/cuda/cumsum_reference.hpp"
#include "patchbay/kernels/cuda/random_reduce_rows.hpp"
#include "patchbay/kernels/cuda/random_reduce_rows_reference.hpp"

namespace cuda = patchbay::kernels::cuda;
using cuda::testing::DeviceBuffer;

GPU_TEST(random_fills_and_dropout_match_cpu) {
  const int64_t n = 1000003;  // not a multiple of 4: the last counter block is partial
  const uint64_t seed = t.random()(), first_block = 12345;
  DeviceBuffer<float> out(static_cast<size_t>(n)), keep(static_cast<size_t>(n));
  std::vector<float> expected(static_cast<size_t>(n));
  t.poison(out);
  CUDA_CHECK(cuda::random_fill_f32(out.get(), n, first_block, seed, false, -2.0, 3.0, t.stream()));
  cuda::random_fill_f32_reference(expected.data(), n, first_block, seed, false, -2.0, 3.0);
  const auto uniform = out.download();
  t.expect_close("uniform [-2, 3)", uniform, expected, 0.0);
  t.poison(keep);
  CUDA_CHECK(cuda::dropout_mask_f32(out.get(), 0.1, keep.get(), n, t.stream()));
  std::vector<float> keep_expected(static_cast<size_t>(n));
  cuda::dropout_mask_f32_reference(uniform.data(), 0.1, keep_expected.data(), n);
  t.expect_close("dropout mask p = 0.1", keep.download(), keep_expected, 0.0);
  t.poison(out);
  CUDA_CHECK(cuda::random_fill_f32(out.get(), n, first_block, seed, true, 0.0, 1.0, t.stream()));
  cuda::random_fill_f32_reference(expected.data(), n, first_block, seed, true, 0.0, 1.0);
  const auto normal = out.download();
  t.expect_close("normal (few-ulp logf/cosf/sinf differences)", normal, expected, 1e-6);
  double mean = 0;
  for (float v : normal) mean += v;
  t.expect_true("normal mean within 5e-3 of 0", std::fabs(mean / double(n)) < 5e-3);
  t.expect_true("p = 1 is refused", cuda::dropout_mask_f32(out.get(), 1.0, keep.get(), n,
                                                           t.stream()) == cudaErrorInvalidValue);
}

GPU_TEST(row_sum_mean_max_argmax_and_max_backward) {
  const int64_t rows = 67, cols = 5003;
  auto x = t.normal(static_cast<size_t>(rows * cols));
  x[size_t(3 * cols + 7)] = NAN;  // row 3: NaN is the max, at index 7
  x[size_t(5 * cols + 4000)] = x[size_t(5 * cols + 11)] = 100.0f;  // row 5: a tie, first wins
  DeviceBuffer<float> dx(x), out(static_cast<size_t>(rows));
  DeviceBuffer<int64_t> argmax(static_cast<size_t>(rows));
  std::vector<float> expected(static_cast<size_t>(rows));
  std::vector<int64_t> expected_argmax(static_cast<size_t>(rows));
  for (const auto reduction :
       {cuda::RowReduction::kSum, cuda::RowReduction::kMean, cuda::RowReduction::kMax}) {
    t.poison(out);
    const bool is_max = reduction == cuda::RowReduction::kMax;
    CUDA_CHECK(cuda::reduce_rows_f32(reduction, dx.get(), out.get(),
                                     is_max ? argmax.get() : nullptr, rows, cols, t.stream()));
    cuda::reduce_rows_f32_reference(reduction, x.data(), expected.data(),
                                    is_max ? expected_argmax.data() : nullptr, rows, cols);
    auto gpu = out.download();
    if (!is_max) gpu[3] = expected[3] = 0.0f;  // NaN in both; compare the other rows
    t.expect_close("reduction " + std::to_string(int(reduction)), gpu, expected, 1e-5);
    if (is_max)
      t.expect_true("argmax (first maximum, NaN wins)", argmax.download() == expected_argmax);
  }
  const auto dy = t.normal(static_cast<size_t>(rows));
  DeviceBuffer<float> ddy(dy), grad(static_cast<size_t>(rows * cols));
  t.poison(grad);
  CUDA_CHECK(
      cuda::max_rows_backward_f32(ddy.get(), argmax.get(), grad.get(), rows, cols, t.stream()));
  std::vector<float> grad_expected(static_cast<size_t>(rows * cols));
  cuda::max_rows_backward_f32_reference(dy.data(), expected_argmax.data(), grad_expected.data(),
                                        rows, cols);
  t.expect_close("max backward", grad.download(), grad_expected, 0.0);
}

GPU_TEST(cumsum_forward_reverse_along_each_position) {
  // [outer, length, inner] for a sum along a middle, the last and the first dimension.
  const int64_t shapes[][3] = {{5, 300, 7}, {40, 1024, 1}, {1, 64, 4096}};
  for (const auto& s : shapes) {
    const size_t n = static_cast<size_t>(s[0] * s[1] * s[2]);
    const auto x = t.normal(n);
    DeviceBuffer<float> dx(x), out(n);
    std::vector<float> expected(n);
    for (const bool reverse : {false, true}) {
      t.poison(out);
      CUDA_CHECK(cuda::cumsum_f32(dx.get(), out.get(), s[0], s[1], s[2], reverse, t.stream()));
      cuda::cumsum_f32_reference(x.data(), expected.data(), s[0], s[1], s[2], reverse);
      t.expect_close("cumsum [" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + ", " +
                         std::to_string(s[2]) + "]" + (reverse ? " reverse" : ""),
                     out.download(), expected, 1e-7);
    }
  }
}
