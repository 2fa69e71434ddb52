// Skinny matmul driver (see patchbay/kernels/skinny_matmul.hpp): validation, the split of
// W's rows over OpenMP threads, the ISA choice, and the portable row loop.
#include "patchbay/kernels/skinny_matmul.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>

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

bool skinny_matmul_has_avx2() {
#if defined(PATCHBAY_KERNELS_X86_VARIANTS)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

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
  if (p.m < 1) return "skinny_matmul: m must be >= 1, found " + std::to_string(p.m);
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

using RowLoop = void (*)(const SkinnyMatmulParams&, std::int64_t, std::int64_t);

// One thread's range of 16-row blocks [next, end): the owner claims chunks from `next` in
// order; a thread that finished its own range claims from the same cursor (alignas: one
// cache line per cursor).
struct alignas(64) BlockCursor {
  std::atomic<std::int64_t> next{0};
  std::int64_t end = 0;
};

// Rows over `threads` threads. Rows go in blocks of 16 (whole 64-byte lines of each y row, so
// no two threads write one cache line). Each thread owns an equal contiguous range of blocks
// and walks it chunk after chunk (one sequential stream); a thread done with its own range
// then claims the next chunks of whichever range has the most left (it and the owner then
// alternate there). A row is
// always computed by one thread alone, so the result does not depend on which one.
// Why: with an even static split, the thread that finished first waited at the barrier for
// the other, whose memory stream had run slower (the calling thread waited 6.7-8.6% of its
// decoding time). The former fix, a static 7/8 then the last 1/8 in small chunks to whichever
// thread was free, made every product end in interleaved chunks, each a restarted stream: at
// ~78 GB/s that eighth streamed at ~51 GB/s against ~75 for the rest (GPT-2 f32 decoding,
// timed per thread). Here only the imbalance itself is shared. A throwaway driver chaining
// GPT-2's 49 f32 decoding products, 10 alternating runs of 200 rounds at 40-67 GB/s:
// 94.5-97.7% of a plain read loop for the chunked eighth, 96.8-100.5% with stealing (every
// run higher, by 0.7-3.6 points). Chunks are at most 8 blocks (128 rows), so the ranges end within
// microseconds.
void run_stealing(const SkinnyMatmulParams& p, RowLoop row_loop, int threads) {
  const std::int64_t blocks = (p.n + 15) / 16;
  const std::int64_t chunk = std::clamp<std::int64_t>(blocks / (16 * threads), 1, 8);
  BlockCursor stack_cursors[8];
  std::unique_ptr<BlockCursor[]> heap_cursors;
  BlockCursor* cursors = stack_cursors;
  if (threads > 8) {
    heap_cursors = std::make_unique<BlockCursor[]>(static_cast<std::size_t>(threads));
    cursors = heap_cursors.get();
  }
  for (int t = 0; t < threads; ++t) {
    cursors[t].next.store(blocks * t / threads, std::memory_order_relaxed);
    cursors[t].end = blocks * (t + 1) / threads;
  }
  auto run_chunk = [&](BlockCursor& cursor) {
    const std::int64_t b = cursor.next.fetch_add(chunk, std::memory_order_relaxed);
    if (b >= cursor.end) return false;
    const std::int64_t j_begin = b * 16,
                       j_end = std::min(p.n, std::min(cursor.end, b + chunk) * 16);
    row_loop(p, j_begin, j_end);
    epilogue(p, j_begin, j_end);
    return true;
  };
#pragma omp parallel num_threads(threads)
  {
    const int me = omp_get_thread_num();
    if (me < threads)
      while (run_chunk(cursors[me])) {
      }
    for (;;) {  // steal from the range with the most blocks left
      int victim = -1;
      std::int64_t most = 0;
      for (int t = 0; t < threads; ++t) {
        const std::int64_t left = cursors[t].end - cursors[t].next.load(std::memory_order_relaxed);
        if (left > most) {
          most = left;
          victim = t;
        }
      }
      if (victim < 0) break;
      run_chunk(cursors[victim]);
    }
  }
}

// The row loop of this CPU (or the one a test forces, when the CPU has it). Never chosen by
// shape: every product on one machine sums in one order (batch invariance).
RowLoop row_loop_for(SkinnyIsa isa) {
  const bool avx512 = skinny_matmul_has_avx512(), avx2 = skinny_matmul_has_avx2();
  switch (isa) {
    case SkinnyIsa::kGeneric:
      return skinny_rows::rows_generic;
    case SkinnyIsa::kAvx2:
      return avx2 ? skinny_rows::rows_avx2 : skinny_rows::rows_generic;
    case SkinnyIsa::kAvx512:
    case SkinnyIsa::kAuto:
      break;
  }
  if (avx512) return skinny_rows::rows_avx512;
  return avx2 ? skinny_rows::rows_avx2 : skinny_rows::rows_generic;
}

void run_rows(const SkinnyMatmulParams& p) {
  RowLoop row_loop = row_loop_for(p.isa);
  // Below ~256 KiB of weights times rows a fork/join costs about what the rows do (measured:
  // the quickstart's 128-wide layers at one row); one thread then.
  const std::int64_t weight_bytes = p.n * p.k * (p.w_type == SkinnyWeightType::kBF16 ? 2 : 4);
  const int threads = weight_bytes * p.m < (std::int64_t{256} << 10)
                          ? 1
                          : (p.threads > 0 ? p.threads : omp_get_max_threads());
  if (threads <= 1) {
    row_loop(p, 0, p.n);
    epilogue(p, 0, p.n);
    return;
  }
  run_stealing(p, row_loop, threads);
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
