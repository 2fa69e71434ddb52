// Skinny matmul driver (see patchbay/kernels/skinny_matmul.hpp): validation, the split of
// W's rows over OpenMP threads, the ISA choice, and the portable row loop.
#include "patchbay/kernels/skinny_matmul.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "patchbay/kernels/bias_activation.hpp"
#include "skinny_matmul_rows.hpp"

namespace patchbay::kernels {
namespace skinny_rows {
namespace {

float load_weight(const SkinnyMatmulParams& p, std::int64_t j, std::int64_t q) {
  const std::int64_t at = j * p.w_row_stride + q;
  if (p.w_type == SkinnyWeightType::kF32) return static_cast<const float*>(p.w)[at];
  const std::uint32_t bits = static_cast<std::uint32_t>(static_cast<const std::uint16_t*>(p.w)[at])
                             << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

}  // namespace

// 16 partial sums per (i, j), so the compiler can vectorise the k loop without reassociating
// one chain (the result then depends on the lanes' order only, fixed).
void rows_generic(const SkinnyMatmulParams& p, std::int64_t j_begin, std::int64_t j_end) {
  constexpr int kLanes = 16;
  for (std::int64_t j = j_begin; j < j_end; ++j) {
    for (std::int64_t i = 0; i < p.m; ++i) {
      const float* x = p.x + i * p.x_row_stride;
      float partial[kLanes] = {};
      std::int64_t q = 0;
      if (p.w_type == SkinnyWeightType::kF32) {
        const float* w = static_cast<const float*>(p.w) + j * p.w_row_stride;
        for (; q + kLanes <= p.k; q += kLanes)
          for (int l = 0; l < kLanes; ++l) partial[l] += x[q + l] * w[q + l];
      } else {
        for (; q + kLanes <= p.k; q += kLanes) {
          float w[kLanes];
          for (int l = 0; l < kLanes; ++l) w[l] = load_weight(p, j, q + l);
          for (int l = 0; l < kLanes; ++l) partial[l] += x[q + l] * w[l];
        }
      }
      for (; q < p.k; ++q) partial[q % kLanes] += x[q] * load_weight(p, j, q);
      float total = 0;
      for (float s : partial) total += s;
      p.y[i * p.y_row_stride + j] = total;
    }
  }
}

}  // namespace skinny_rows

bool skinny_matmul_has_avx512() {
#if defined(PATCHBAY_KERNELS_X86_VARIANTS)
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl");
  return has;
#else
  return false;
#endif
}

std::string skinny_matmul_error(const SkinnyMatmulParams& p) {
  if (p.x == nullptr || p.w == nullptr || p.y == nullptr) return "skinny_matmul: null x, w or y";
  if (p.m < 1 || p.m > kSkinnyMaxRows)
    return "skinny_matmul: m must be in [1, " + std::to_string(kSkinnyMaxRows) + "], found " +
           std::to_string(p.m);
  if (p.n < 1 || p.k < 1)
    return "skinny_matmul: n and k must be >= 1, found n " + std::to_string(p.n) + ", k " +
           std::to_string(p.k);
  if (p.w_row_stride < p.k || (p.m > 1 && (p.x_row_stride < p.k || p.y_row_stride < p.n)))
    return "skinny_matmul: row strides must cover a row (w >= k, x >= k, y >= n), found w " +
           std::to_string(p.w_row_stride) + ", x " + std::to_string(p.x_row_stride) + ", y " +
           std::to_string(p.y_row_stride) + " for n " + std::to_string(p.n) + ", k " +
           std::to_string(p.k);
  if (p.activation != SkinnyActivation::kNone && p.bias == nullptr)
    return "skinny_matmul: an activation needs a bias (the epilogue is act(x · Wᵀ + bias))";
  return {};
}

namespace {

// The calling thread's profile (skinny_matmul.hpp): off by default.
struct ProfileState {
  bool on = false;
  SkinnyProfile counted;
};
thread_local ProfileState profile_state;

// The epilogue on y's columns [j_begin, j_end), every row of x: y = act(y + bias).
void epilogue(const SkinnyMatmulParams& p, std::int64_t j_begin, std::int64_t j_end) {
  if (p.bias == nullptr) return;
  for (std::int64_t i = 0; i < p.m; ++i) {
    float* y = p.y + i * p.y_row_stride + j_begin;
    const float* bias = p.bias + j_begin;
    const std::int64_t count = j_end - j_begin;
    if (p.activation == SkinnyActivation::kNone) {
      for (std::int64_t j = 0; j < count; ++j) y[j] += bias[j];
    } else {
      bias_activation_row(p.activation == SkinnyActivation::kRelu ? BiasActivationKind::kRelu
                                                                  : BiasActivationKind::kGeluTanh,
                          y, bias, y, count);
    }
  }
}

void run_rows(const SkinnyMatmulParams& p) {
  const bool avx512 = p.isa != SkinnyIsa::kGeneric && skinny_matmul_has_avx512();
  void (*row_loop)(const SkinnyMatmulParams&, std::int64_t, std::int64_t) =
      avx512 ? skinny_rows::rows_avx512 : skinny_rows::rows_generic;
  // Rows [j_begin, j_end) of W, then the epilogue on their outputs, by the same thread.
  auto rows = [&](const SkinnyMatmulParams& params, std::int64_t j_begin, std::int64_t j_end) {
    row_loop(params, j_begin, j_end);
    epilogue(params, j_begin, j_end);
  };
  // Below ~256 KiB of weights a fork/join costs about what the rows do (measured: the
  // quickstart's 128-wide layers); one thread then.
  const std::int64_t weight_bytes = p.n * p.k * (p.w_type == SkinnyWeightType::kBF16 ? 2 : 4);
  const int threads = weight_bytes < (std::int64_t{256} << 10)
                          ? 1
                          : (p.threads > 0 ? p.threads : omp_get_max_threads());
  if (threads <= 1) {
    rows(p, 0, p.n);
    return;
  }
  // Rows go in blocks of 16 (whole 64-byte lines of each y row, so no two threads write one
  // cache line). Each thread first takes a contiguous share of 7/8 of the blocks, then the
  // rest in small chunks, whichever thread is free first: with an even static split of all
  // rows, the thread that finished first waited at the barrier for the other, whose memory
  // stream had run slower (GPT-2 f32 decoding: the calling thread waited 6.7-8.6% of its time,
  // 2.7-4.0% with the chunked tail). A row is always computed by one thread alone, so the
  // result does not depend on which one.
  const std::int64_t blocks = (p.n + 15) / 16;
  const std::int64_t shared_from = blocks * 7 / 8;
  const std::int64_t chunk = std::max<std::int64_t>(1, (blocks - shared_from) / 16);
  std::atomic<std::int64_t> next_block{shared_from};
#pragma omp parallel num_threads(threads)
  {
    const std::int64_t t = omp_get_thread_num(), count = omp_get_num_threads();
    const std::int64_t begin = std::min(p.n, shared_from * t / count * 16);
    const std::int64_t end = std::min(p.n, shared_from * (t + 1) / count * 16);
    if (begin < end) rows(p, begin, end);
    for (;;) {
      const std::int64_t b = next_block.fetch_add(chunk, std::memory_order_relaxed);
      if (b >= blocks) break;
      rows(p, b * 16, std::min(p.n, std::min(blocks, b + chunk) * 16));
    }
  }
}

}  // namespace

void set_skinny_profiling(bool on) { profile_state.on = on; }

SkinnyProfile take_skinny_profile() {
  SkinnyProfile taken = profile_state.counted;
  profile_state.counted = {};
  return taken;
}

std::string skinny_matmul(const SkinnyMatmulParams& p) {
  std::string error = skinny_matmul_error(p);
  if (!error.empty()) return error;
  if (!profile_state.on) {
    run_rows(p);
    return {};
  }
  const auto start = std::chrono::steady_clock::now();
  run_rows(p);
  SkinnyProfile& counted = profile_state.counted;
  counted.seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  counted.weight_bytes += p.n * p.k * (p.w_type == SkinnyWeightType::kBF16 ? 2 : 4);
  ++counted.calls;
  return {};
}

}  // namespace patchbay::kernels
