// GPU tests of the element-wise, bias+activation, norm, softmax, cross-entropy, embedding,
// rotary, optimizer and reduction kernels against their CPU twins (kernels/cuda/reference), on
// fresh random inputs with NaN-poisoned outputs. Shapes include GPT-2's (768, 3072 columns;
// a 50257-wide vocabulary row) and ragged ones (not multiples of 32 or of a block).
// Tolerances: f32 kernels against double references, relative norm 1e-5 (sums of 1e3-1e4
// terms in f32) unless said; bit-exact where the arithmetic is the same (conversions).
#include <cmath>

#include "gpu_test_harness.hpp"
#include "patchbay/kernels/cuda/bias_activation.hpp"
#include "patchbay/kernels/cuda/bias_activation_reference.hpp"
#include "patchbay/kernels/cuda/elementwise.hpp"
#include "patchbay/kernels/cuda/elementwise_reference.hpp"
#include "patchbay/kernels/cuda/embedding_rotary.hpp"
#include "patchbay/kernels/cuda/embedding_rotary_reference.hpp"
#include "patchbay/kernels/cuda/normalization.hpp"
#include "patchbay/kernels/cuda/normalization_reference.hpp"
#include "patchbay/kernels/cuda/optimizer_reduce.hpp"
#include "patchbay/kernels/cuda/optimizer_reduce_reference.hpp"
#include "patchbay/kernels/cuda/softmax_cross_entropy.hpp"
#include "patchbay/kernels/cuda/softmax_cross_entropy_reference.hpp"

namespace cuda = patchbay::kernels::cuda;
using cuda::testing::DeviceBuffer;

namespace {
constexpr double kF32 = 1e-5;
}

GPU_TEST(elementwise_add_multiply_axpby) {
  const int64_t n = 1000003;
  const auto a = t.uniform(n), b = t.uniform(n);
  DeviceBuffer<float> da(a), db(b), out(n);
  std::vector<float> expected(n);
  t.poison(out);
  CUDA_CHECK(cuda::add_f32(da.get(), db.get(), out.get(), n, t.stream()));
  cuda::add_f32_reference(a.data(), b.data(), expected.data(), n);
  t.expect_close("add", out.download(), expected, 0.0);
  t.poison(out);
  CUDA_CHECK(cuda::multiply_f32(da.get(), db.get(), out.get(), n, t.stream()));
  cuda::multiply_f32_reference(a.data(), b.data(), expected.data(), n);
  t.expect_close("multiply", out.download(), expected, 0.0);
  t.poison(out);  // beta = 0 must not read the NaN in y
  CUDA_CHECK(cuda::axpby_f32(0.5f, da.get(), 0.0f, out.get(), n, t.stream()));
  std::vector<float> y(n, 0.0f);
  cuda::axpby_f32_reference(0.5f, a.data(), 0.0f, y.data(), n);
  t.expect_close("axpby beta=0 over NaN", out.download(), y, 0.0);
  CUDA_CHECK(cuda::axpby_f32(-2.0f, db.get(), 0.25f, out.get(), n, t.stream()));
  cuda::axpby_f32_reference(-2.0f, b.data(), 0.25f, y.data(), n);
  t.expect_close("axpby", out.download(), y, 1e-7);
}

GPU_TEST(convert_f32_bf16_round_trip) {
  const int64_t n = 65537;
  auto x = t.normal(n, 100.0f);
  x[0] = NAN;
  x[1] = INFINITY;
  x[2] = 3.4e38f;  // rounds to infinity in bf16
  DeviceBuffer<float> dx(x), back(n);
  DeviceBuffer<uint16_t> bits(n);
  t.poison(bits);
  CUDA_CHECK(cuda::convert_f32_to_bf16(dx.get(), bits.get(), n, t.stream()));
  std::vector<uint16_t> expected(n);
  cuda::convert_f32_to_bf16_reference(x.data(), expected.data(), n);
  const auto gpu_bits = bits.download();
  t.expect_equal_bits("f32 -> bf16 (round to nearest even)", gpu_bits, expected);
  t.poison(back);
  CUDA_CHECK(cuda::convert_bf16_to_f32(bits.get(), back.get(), n, t.stream()));
  std::vector<float> widened(n);
  cuda::convert_bf16_to_f32_reference(expected.data(), widened.data(), n);
  t.expect_close("bf16 -> f32", back.download(), widened, 0.0);
}

GPU_TEST(bias_activation_forward_backward) {
  const int64_t shapes[][2] = {{64, 3072}, {33, 77}};
  for (const auto& shape : shapes) {
    const int64_t rows = shape[0], cols = shape[1], n = rows * cols;
    for (const auto kind :
         {cuda::Activation::kGeluTanh, cuda::Activation::kGeluErf, cuda::Activation::kRelu}) {
      const std::string label =
          std::to_string(rows) + "x" + std::to_string(cols) + " kind " + std::to_string(int(kind));
      const auto x = t.normal(n, 2.0f), bias = t.normal(cols), dy = t.normal(n);
      DeviceBuffer<float> dx_in(x), dbias_in(bias), ddy(dy), y(n), dx(n), dbias(cols);
      std::vector<float> y_ref(n), dx_ref(n), dbias_ref(cols);
      t.poison(y);
      CUDA_CHECK(cuda::bias_activation_forward(kind, dx_in.get(), dbias_in.get(), y.get(), rows,
                                               cols, t.stream()));
      cuda::bias_activation_forward_reference(kind, x.data(), bias.data(), y_ref.data(), rows,
                                              cols);
      t.expect_close("forward " + label, y.download(), y_ref, kF32);
      t.poison(dx);
      t.poison(dbias);
      CUDA_CHECK(cuda::bias_activation_backward(kind, dx_in.get(), dbias_in.get(), ddy.get(),
                                                dx.get(), dbias.get(), rows, cols, t.stream()));
      cuda::bias_activation_backward_reference(kind, x.data(), bias.data(), dy.data(),
                                               dx_ref.data(), dbias_ref.data(), rows, cols);
      t.expect_close("backward dx " + label, dx.download(), dx_ref, kF32);
      t.expect_close("backward dbias " + label, dbias.download(), dbias_ref, kF32);
    }
  }
}

GPU_TEST(layer_norm_and_residual_forward_backward) {
  const int64_t shapes[][2] = {{256, 768}, {37, 1000}, {5, 31}};
  for (const auto& shape : shapes) {
    const int64_t rows = shape[0], cols = shape[1], n = rows * cols;
    const std::string label = std::to_string(rows) + "x" + std::to_string(cols);
    auto a = t.normal(n, 3.0f);
    for (float& v : a) v += 5.0f;  // a mean far from zero
    const auto b = t.normal(n), gamma = t.normal(cols), beta = t.normal(cols), dy = t.normal(n),
               dres = t.normal(n);
    DeviceBuffer<float> da(a), db(b), dgamma_in(gamma), dbeta_in(beta), ddy(dy), ddres(dres);
    DeviceBuffer<float> residual(n), y(n), mean(rows), rstd(rows), dx(n), dgamma(cols), dbeta(cols);
    std::vector<float> residual_ref(n), y_ref(n), mean_ref(rows), rstd_ref(rows), dx_ref(n),
        dgamma_ref(cols), dbeta_ref(cols);
    for (auto* buffer : {&residual, &y, &mean, &rstd, &dx, &dgamma, &dbeta}) t.poison(*buffer);
    CUDA_CHECK(cuda::residual_layer_norm_forward(
        da.get(), db.get(), dgamma_in.get(), dbeta_in.get(), residual.get(), y.get(), mean.get(),
        rstd.get(), rows, cols, 1e-5f, t.stream()));
    cuda::residual_layer_norm_forward_reference(a.data(), b.data(), gamma.data(), beta.data(),
                                                residual_ref.data(), y_ref.data(), mean_ref.data(),
                                                rstd_ref.data(), rows, cols, 1e-5f);
    t.expect_close("residual " + label, residual.download(), residual_ref, 0.0);
    t.expect_close("y " + label, y.download(), y_ref, kF32);
    t.expect_close("mean " + label, mean.download(), mean_ref, kF32);
    t.expect_close("rstd " + label, rstd.download(), rstd_ref, kF32);
    CUDA_CHECK(cuda::layer_norm_backward(residual.get(), dgamma_in.get(), mean.get(), rstd.get(),
                                         ddy.get(), ddres.get(), dx.get(), dgamma.get(),
                                         dbeta.get(), rows, cols, t.stream()));
    cuda::layer_norm_backward_reference(residual_ref.data(), gamma.data(), mean_ref.data(),
                                        rstd_ref.data(), dy.data(), dres.data(), dx_ref.data(),
                                        dgamma_ref.data(), dbeta_ref.data(), rows, cols);
    t.expect_close("dx " + label, dx.download(), dx_ref, 1e-4);
    t.expect_close("dgamma " + label, dgamma.download(), dgamma_ref, kF32);
    t.expect_close("dbeta " + label, dbeta.download(), dbeta_ref, kF32);
    // The plain forward (no residual) on the same rows.
    t.poison(y);
    CUDA_CHECK(cuda::layer_norm_forward(da.get(), dgamma_in.get(), nullptr, y.get(), mean.get(),
                                        rstd.get(), rows, cols, 1e-5f, t.stream()));
    cuda::layer_norm_forward_reference(a.data(), gamma.data(), nullptr, y_ref.data(),
                                       mean_ref.data(), rstd_ref.data(), rows, cols, 1e-5f);
    t.expect_close("plain y (no beta) " + label, y.download(), y_ref, kF32);
  }
}

GPU_TEST(rms_norm_forward_backward) {
  const int64_t rows = 129, cols = 1536, n = rows * cols;
  const auto x = t.normal(n, 2.0f), gamma = t.normal(cols), dy = t.normal(n);
  DeviceBuffer<float> dxin(x), dgamma_in(gamma), ddy(dy), y(n), rstd(rows), dx(n), dgamma(cols);
  std::vector<float> y_ref(n), rstd_ref(rows), dx_ref(n), dgamma_ref(cols);
  for (auto* buffer : {&y, &rstd, &dx, &dgamma}) t.poison(*buffer);
  CUDA_CHECK(cuda::rms_norm_forward(dxin.get(), dgamma_in.get(), y.get(), rstd.get(), rows, cols,
                                    1e-6f, t.stream()));
  cuda::rms_norm_forward_reference(x.data(), gamma.data(), y_ref.data(), rstd_ref.data(), rows,
                                   cols, 1e-6f);
  t.expect_close("y", y.download(), y_ref, kF32);
  t.expect_close("rstd", rstd.download(), rstd_ref, kF32);
  CUDA_CHECK(cuda::rms_norm_backward(dxin.get(), dgamma_in.get(), rstd.get(), ddy.get(), dx.get(),
                                     dgamma.get(), rows, cols, t.stream()));
  cuda::rms_norm_backward_reference(x.data(), gamma.data(), rstd_ref.data(), dy.data(),
                                    dx_ref.data(), dgamma_ref.data(), rows, cols);
  t.expect_close("dx", dx.download(), dx_ref, 1e-4);
  t.expect_close("dgamma", dgamma.download(), dgamma_ref, kF32);
}

GPU_TEST(softmax_forward_backward) {
  const int64_t shapes[][2] = {{64, 1024}, {7, 50257}, {3, 5}};
  for (const auto& shape : shapes) {
    const int64_t rows = shape[0], cols = shape[1], n = rows * cols;
    const std::string label = std::to_string(rows) + "x" + std::to_string(cols);
    auto x = t.normal(n, 4.0f);
    x[1] = -INFINITY;  // a masked entry
    const auto dy = t.normal(n);
    DeviceBuffer<float> dxin(x), ddy(dy), y(n), dx(n);
    std::vector<float> y_ref(n), dx_ref(n);
    t.poison(y);
    t.poison(dx);
    CUDA_CHECK(cuda::softmax_forward(dxin.get(), y.get(), rows, cols, t.stream()));
    cuda::softmax_forward_reference(x.data(), y_ref.data(), rows, cols);
    t.expect_close("forward " + label, y.download(), y_ref, kF32);
    CUDA_CHECK(cuda::softmax_backward(y.get(), ddy.get(), dx.get(), rows, cols, t.stream()));
    cuda::softmax_backward_reference(y_ref.data(), dy.data(), dx_ref.data(), rows, cols);
    t.expect_close("backward " + label, dx.download(), dx_ref, 1e-4);
    t.poison(y);
    t.poison(dx);
    CUDA_CHECK(cuda::log_softmax_forward(dxin.get(), y.get(), rows, cols, t.stream()));
    cuda::log_softmax_forward_reference(x.data(), y_ref.data(), rows, cols);
    t.expect_close("log forward " + label, y.download(), y_ref, kF32);
    CUDA_CHECK(cuda::log_softmax_backward(y.get(), ddy.get(), dx.get(), rows, cols, t.stream()));
    cuda::log_softmax_backward_reference(y_ref.data(), dy.data(), dx_ref.data(), rows, cols);
    t.expect_close("log backward " + label, dx.download(), dx_ref, 1e-4);
  }
}

GPU_TEST(cross_entropy_fused_gradient) {
  const int64_t rows = 40, cols = 50257, n = rows * cols;
  const auto logits = t.normal(n, 3.0f);
  auto targets = t.ids<int32_t>(rows, cols);
  targets[3] = -100;  // ignored
  const float grad_scale = 1.0f / float(rows - 1);
  DeviceBuffer<float> dlogits_in(logits), losses(rows), dlogits(n);
  DeviceBuffer<int32_t> dtargets(targets);
  std::vector<float> losses_ref(rows), dlogits_ref(n);
  t.poison(losses);
  t.poison(dlogits);
  CUDA_CHECK(cuda::cross_entropy_forward_backward(dlogits_in.get(), dtargets.get(), losses.get(),
                                                  dlogits.get(), rows, cols, -100, grad_scale,
                                                  t.stream()));
  cuda::cross_entropy_forward_backward_reference(logits.data(), targets.data(), losses_ref.data(),
                                                 dlogits_ref.data(), rows, cols, -100, grad_scale);
  t.expect_close("losses", losses.download(), losses_ref, kF32);
  t.expect_close("dlogits", dlogits.download(), dlogits_ref, 1e-4);
  // In place: the gradient replaces the logits.
  CUDA_CHECK(cuda::cross_entropy_forward_backward(dlogits_in.get(), dtargets.get(), losses.get(),
                                                  dlogits_in.get(), rows, cols, -100, grad_scale,
                                                  t.stream()));
  t.expect_close("losses (in place)", losses.download(), losses_ref, kF32);
  t.expect_close("dlogits (in place)", dlogits_in.download(), dlogits_ref, 1e-4);
}

// The engine's contract (ignore_index, label smoothing, per-row upstream gradients), int32 and
// int64 targets, against the double twin.
GPU_TEST(cross_entropy_rows_smoothing_ignore) {
  const int64_t rows = 37, cols = 50257, n = rows * cols;
  const auto logits = t.normal(n, 3.0f), row_grad = t.normal(rows);
  auto targets64 = t.ids<int64_t>(rows, cols);
  targets64[5] = -100;
  std::vector<int32_t> targets32(targets64.begin(), targets64.end());
  DeviceBuffer<float> dlogits(logits), drow_grad(row_grad), loss(rows), lse(rows), grad(n);
  DeviceBuffer<int64_t> dtargets64(targets64);
  DeviceBuffer<int32_t> dtargets32(targets32);
  for (const float smoothing : {0.0f, 0.1f}) {
    const std::string label = "smoothing " + std::to_string(smoothing);
    std::vector<float> loss_ref(rows), lse_ref(rows), grad_ref(n);
    cuda::cross_entropy_rows_forward_reference(logits.data(), targets64.data(), loss_ref.data(),
                                               lse_ref.data(), rows, cols, -100, smoothing);
    cuda::cross_entropy_rows_backward_reference(logits.data(), targets64.data(), row_grad.data(),
                                                grad_ref.data(), rows, cols, -100, smoothing);
    for (int width : {32, 64}) {
      t.poison(loss);
      t.poison(lse);
      t.poison(grad);
      if (width == 32) {
        CUDA_CHECK(cuda::cross_entropy_rows_forward(dlogits.get(), dtargets32.get(), loss.get(),
                                                    lse.get(), rows, cols, -100, smoothing,
                                                    t.stream()));
        CUDA_CHECK(cuda::cross_entropy_rows_backward(dlogits.get(), dtargets32.get(), lse.get(),
                                                     drow_grad.get(), grad.get(), rows, cols, -100,
                                                     smoothing, t.stream()));
      } else {
        CUDA_CHECK(cuda::cross_entropy_rows_forward(dlogits.get(), dtargets64.get(), loss.get(),
                                                    lse.get(), rows, cols, -100, smoothing,
                                                    t.stream()));
        CUDA_CHECK(cuda::cross_entropy_rows_backward(dlogits.get(), dtargets64.get(), lse.get(),
                                                     drow_grad.get(), grad.get(), rows, cols, -100,
                                                     smoothing, t.stream()));
      }
      const std::string which = label + ", int" + std::to_string(width) + " targets";
      t.expect_close("row loss, " + which, loss.download(), loss_ref, kF32);
      t.expect_close("row lse, " + which, lse.download(), lse_ref, kF32);
      t.expect_close("gradient, " + which, grad.download(), grad_ref, 1e-4);
    }
  }
}

GPU_TEST(embedding_forward_deterministic_backward) {
  const int64_t count = 4099, vocab = 50257, dim = 768;
  auto ids = t.ids<int32_t>(count, vocab);
  for (int64_t i = 0; i < count; i += 7) ids[size_t(i)] = 42;  // many repeats of one token
  const auto weight = t.normal(static_cast<size_t>(vocab * dim)),
             dout = t.normal(static_cast<size_t>(count * dim));
  DeviceBuffer<int32_t> dids(ids);
  DeviceBuffer<float> dweight_in(weight), out(static_cast<size_t>(count * dim)), ddout(dout);
  std::vector<float> out_ref(static_cast<size_t>(count * dim));
  t.poison(out);
  CUDA_CHECK(cuda::embedding_forward(dids.get(), dweight_in.get(), out.get(), count, vocab, dim,
                                     t.stream()));
  cuda::embedding_forward_reference(ids.data(), weight.data(), out_ref.data(), count, vocab, dim);
  t.expect_close("forward", out.download(), out_ref, 0.0);
  // Backward accumulates into a non-zero gradient; twice to check bitwise determinism.
  const auto initial = t.normal(static_cast<size_t>(vocab * dim));
  std::vector<float> dweight_ref = initial;
  cuda::embedding_backward_reference(ids.data(), dout.data(), dweight_ref.data(), count, vocab,
                                     dim);
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    DeviceBuffer<float> dweight(initial);
    CUDA_CHECK(cuda::embedding_backward(dids.get(), ddout.get(), dweight.get(), count, vocab, dim,
                                        t.stream()));
    const auto result = dweight.download();
    if (run == 0) {
      t.expect_close("backward", result, dweight_ref, kF32);
      first = result;
    } else {
      t.expect_true("backward is bitwise deterministic", result == first);
    }
  }
  const std::vector<int64_t> ids64(ids.begin(), ids.end());
  DeviceBuffer<int64_t> dids64(ids64);
  t.poison(out);
  CUDA_CHECK(cuda::embedding_forward(dids64.get(), dweight_in.get(), out.get(), count, vocab, dim,
                                     t.stream()));
  t.expect_close("forward (int64 ids)", out.download(), out_ref, 0.0);
}

GPU_TEST(rotary_forward_and_inverse) {
  const int64_t rows = 24, steps = 257, dim = 64, n = rows * steps * dim;
  const auto x = t.normal(static_cast<size_t>(n));
  DeviceBuffer<float> dxin(x), out(static_cast<size_t>(n)), back(static_cast<size_t>(n));
  std::vector<float> out_ref(static_cast<size_t>(n));
  t.poison(out);
  t.poison(back);
  CUDA_CHECK(cuda::rotary_embedding(dxin.get(), out.get(), rows, steps, dim, 3, 10000.0, false,
                                    t.stream()));
  cuda::rotary_embedding_reference(x.data(), out_ref.data(), rows, steps, dim, 3, 10000.0, false);
  t.expect_close("forward", out.download(), out_ref, 1e-6);
  CUDA_CHECK(cuda::rotary_embedding(out.get(), back.get(), rows, steps, dim, 3, 10000.0, true,
                                    t.stream()));
  t.expect_close("inverse undoes forward", back.download(), x, 1e-6);
}

GPU_TEST(optimizer_updates_match_cpu) {
  const int64_t n = 1 << 20;
  const auto param = t.normal(n), grad = t.normal(n, 0.1f), m = t.normal(n, 0.01f);
  auto v = t.normal(n, 0.001f);
  for (auto& value : v) value = value * value;
  {
    const auto c = cuda::math::make_adamw_scalars(3e-4, 0.9, 0.95, 1e-8, 0.1, 7, 0.5f);
    DeviceBuffer<float> dp(param), dg(grad), dm(m), dv(v);
    DeviceBuffer<uint16_t> copy(n);
    t.poison(copy);
    std::vector<float> p_ref = param, m_ref = m, v_ref = v;
    std::vector<uint16_t> copy_ref(n);
    CUDA_CHECK(
        cuda::adamw_step(dp.get(), dg.get(), dm.get(), dv.get(), copy.get(), n, c, t.stream()));
    cuda::adamw_step_reference(p_ref.data(), grad.data(), m_ref.data(), v_ref.data(),
                               copy_ref.data(), n, c);
    t.expect_close("adamw param", dp.download(), p_ref, 1e-6);
    t.expect_close("adamw exp_avg", dm.download(), m_ref, 1e-6);
    t.expect_close("adamw exp_avg_sq", dv.download(), v_ref, 1e-6);
    const auto gpu_copy = copy.download();
    size_t far = 0;  // the copy may differ in the last bf16 bit where param differs by an ulp
    for (int64_t i = 0; i < n; ++i) far += std::abs(int(gpu_copy[i]) - int(copy_ref[i])) > 1;
    t.expect_true("adamw bf16 copy within one bf16 ulp", far == 0);
  }
  for (const bool nesterov : {false, true}) {
    const auto c = cuda::math::make_sgd_scalars(0.1, 0.9, 0.0, nesterov, 1e-4, false, 1.0f);
    DeviceBuffer<float> dp(param), dg(grad), dm(m);
    std::vector<float> p_ref = param, m_ref = m;
    CUDA_CHECK(cuda::sgd_step(dp.get(), dg.get(), dm.get(), nullptr, n, c, t.stream()));
    cuda::sgd_step_reference(p_ref.data(), grad.data(), m_ref.data(), nullptr, n, c);
    t.expect_close(nesterov ? "sgd nesterov param" : "sgd param", dp.download(), p_ref, 1e-6);
    t.expect_close("sgd momentum", dm.download(), m_ref, 1e-6);
  }
  {
    const auto c = cuda::math::make_lion_scalars(1e-4, 0.9, 0.99, 0.1, 1.0f);
    DeviceBuffer<float> dp(param), dg(grad), dm(m);
    std::vector<float> p_ref = param, m_ref = m;
    CUDA_CHECK(cuda::lion_step(dp.get(), dg.get(), dm.get(), nullptr, n, c, t.stream()));
    cuda::lion_step_reference(p_ref.data(), grad.data(), m_ref.data(), nullptr, n, c);
    t.expect_close("lion param", dp.download(), p_ref, 1e-6);
    t.expect_close("lion exp_avg", dm.download(), m_ref, 1e-6);
  }
}

GPU_TEST(deterministic_sums) {
  for (const int64_t n : {int64_t(1), int64_t(1000), int64_t(124000000 / 16)}) {
    const auto x = t.normal(static_cast<size_t>(n));
    DeviceBuffer<float> dxin(x), workspace(cuda::kReduceWorkspaceFloats), result(2);
    t.poison(result);
    CUDA_CHECK(cuda::sum_f32(dxin.get(), n, result.get(), workspace.get(), t.stream()));
    CUDA_CHECK(cuda::sum_squares_f32(dxin.get(), n, result.get() + 1, workspace.get(), t.stream()));
    const auto gpu = result.download();
    // The sum of n normal values can be near zero: compare against sum(|x|)-scaled error.
    double absolute = 0.0;
    for (float value : x) absolute += std::fabs(value);
    const double sum_error = std::fabs(gpu[0] - cuda::sum_f32_reference(x.data(), n)) / absolute;
    t.expect_true("sum of " + std::to_string(n) +
                      ": error / sum|x| = " + std::to_string(sum_error) + " <= 1e-6",
                  std::isfinite(gpu[0]) && sum_error <= 1e-6);
    t.expect_close("sum of squares of " + std::to_string(n), {gpu[1]},
                   {cuda::sum_squares_f32_reference(x.data(), n)}, 1e-5);
    CUDA_CHECK(cuda::sum_f32(dxin.get(), n, result.get() + 1, workspace.get(), t.stream()));
    t.expect_true("sum is bitwise repeatable", result.download()[1] == gpu[0]);
  }
}
