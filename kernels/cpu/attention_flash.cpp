// Driver of the flash attention: validates the params, sizes and allocates the one workspace
// of a call, picks the tile kernels of the ISA, and distributes tiles over OpenMP threads.
//
// Forward: independent tasks (batch, head, query tile), dynamic schedule, heaviest causal
// tiles (the last query tiles, which see the most keys) first. Decode (Tq = 1) runs one task
// per (batch, head) instead: the row alone against its keys (forward_decode_row), since a
// query tile would compute kVector query columns for the one live row.
//
// Backward: threads take tasks (batch, kv head, key tile), dynamic schedule. A key tile owns
// its rows of dk and dv outright (summed over the query heads of its group inside the task),
// so those are written without races. dq[i] gathers from every key tile, so each thread adds
// into its own dq accumulator ([B][H][Tq][dp] floats) and a final parallel reduction over
// query rows sums the accumulators into dq. This costs threads * |dq| floats of workspace
// (linear in Tq) and one extra pass over dq, but no atomics, only three barriers per call
// (they hurt on a loaded 2-core machine), and no second recomputation of P: the two-pass
// alternative (key tiles for dk/dv, then query tiles for dq) does 7 instead of 5 T^2*D products.
// Before the tiles, one parallel pass writes delta = rowsum(dO*O) and transposed copies of
// scale*Q and dO, so no tile re-transposes them (that was ~20% of the backward).
//
// The scratch carving, that backward preparation and the dq reduction are flash_tiles
// functions (attention_flash_tiles.hpp) because the block-sparse driver uses them too.
#include "patchbay/kernels/attention_flash.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "attention_flash_bf16.hpp"
#include "attention_flash_tiles.hpp"

namespace patchbay::kernels::flash_tiles {
namespace {

std::int64_t round_up(std::int64_t x, std::int64_t to) { return (x + to - 1) / to * to; }

// Hands out consecutive 64-byte aligned float regions of a buffer (or only counts them).
class ScratchCarver {
 public:
  explicit ScratchCarver(float* base) : base_(base) {}
  float* take(std::int64_t floats) {
    float* region = base_ == nullptr ? nullptr : base_ + used_;
    used_ += round_up(floats, 16);
    return region;
  }
  std::int64_t used_floats() const { return used_; }

 private:
  float* base_;
  std::int64_t used_ = 0;
};

ForwardScratch carve_forward(ScratchCarver& carver, std::int64_t d) {
  const std::int64_t dp = round_up(d, 16);
  ForwardScratch s{};
  s.q_t = carver.take(d * kQueryTile);
  s.s_t = carver.take(kKeyTile * kQueryTile);
  s.v_pad = carver.take(kKeyTile * dp);
  s.o = carver.take(kQueryTile * dp);
  s.row_max = carver.take(kQueryTile);
  s.row_sum = carver.take(kQueryTile);
  s.alpha = carver.take(kQueryTile);
  return s;
}

BackwardScratch carve_backward(ScratchCarver& carver, std::int64_t d) {
  const std::int64_t dp = round_up(d, 16);
  BackwardScratch s{};
  s.q_pad = carver.take(kQueryTile * dp);
  s.do_pad = carver.take(kQueryTile * dp);
  s.k_pad = carver.take(kKeyTile * dp);
  s.p_t = carver.take(kKeyTile * kQueryTile);
  s.ds_t = carver.take(kKeyTile * kQueryTile);
  s.dk = carver.take(kKeyTile * dp);
  s.dv = carver.take(kKeyTile * dp);
  s.row_lse = carver.take(kQueryTile);
  s.row_delta = carver.take(kQueryTile);
  return s;
}

}  // namespace

TileKernels tile_kernels_for(KernelIsa isa) {
  if (isa == KernelIsa::automatic) isa = attention_flash_resolved_isa();
  switch (isa) {
#if PATCHBAY_KERNELS_X86_VARIANTS
    case KernelIsa::avx512:
      return tile_kernels_avx512();
    case KernelIsa::avx2:
      return tile_kernels_avx2();
#endif
    default:
      return tile_kernels_generic();
  }
}

std::int64_t forward_scratch_floats(std::int64_t head_dim) {
  ScratchCarver counter(nullptr);
  carve_forward(counter, head_dim);
  return counter.used_floats();
}

std::int64_t backward_scratch_floats(std::int64_t head_dim) {
  ScratchCarver counter(nullptr);
  carve_backward(counter, head_dim);
  return counter.used_floats();
}

ForwardScratch carve_forward(float* base, std::int64_t head_dim) {
  ScratchCarver carver(base);
  return carve_forward(carver, head_dim);
}

BackwardScratch carve_backward(float* base, std::int64_t head_dim) {
  ScratchCarver carver(base);
  return carve_backward(carver, head_dim);
}

void fill_backward_shared(const AttentionParams& p, const BackwardShared& shared) {
  const std::int64_t d = p.head_dim, tq_pad = shared.q_len_padded, row_blocks = tq_pad / 16;
  float* delta = const_cast<float*>(shared.delta);
  float* q_t = const_cast<float*>(shared.q_t);
  float* do_t = const_cast<float*>(shared.do_t);
  // delta and the transposed Q, dO, 16 query rows per iteration (zeros past Tq).
#pragma omp for schedule(static)
  for (std::int64_t block = 0; block < p.batch * p.heads * row_blocks; ++block) {
    const std::int64_t bh = block / row_blocks, b = bh / p.heads, h = bh % p.heads;
    const std::int64_t t0 = block % row_blocks * 16;
    float* q_t_head = q_t + bh * d * tq_pad + t0;
    float* do_t_head = do_t + bh * d * tq_pad + t0;
    const float* q_rows[16];
    const float* do_rows[16];
    const std::int64_t live = std::clamp<std::int64_t>(p.q_len - t0, 0, 16);
    for (std::int64_t r = 0; r < live; ++r) {
      const std::int64_t t = t0 + r;
      q_rows[r] = p.q + b * p.q_strides.batch + h * p.q_strides.head + t * p.q_strides.seq;
      do_rows[r] =
          p.dout + b * p.dout_strides.batch + h * p.dout_strides.head + t * p.dout_strides.seq;
      const float* o =
          p.out + b * p.out_strides.batch + h * p.out_strides.head + t * p.out_strides.seq;
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (std::int64_t x = 0; x < d; ++x) sum += o[x] * do_rows[r][x];
      delta[bh * p.q_len + t] = sum;
    }
    // One 64-byte line of each transposed row per x; rows past Tq are zero.
    for (std::int64_t x = 0; x < d; ++x) {
      for (std::int64_t r = 0; r < 16; ++r) {
        q_t_head[x * tq_pad + r] = r < live ? p.scale * q_rows[r][x] : 0.0f;
        do_t_head[x * tq_pad + r] = r < live ? do_rows[r][x] : 0.0f;
      }
    }
  }  // implicit barrier: shared buffers complete
}

void reduce_dq(const AttentionParams& p, const float* acc_base, std::int64_t acc_stride, int team) {
  const std::int64_t d = p.head_dim, dp = round_up(d, 16);
#pragma omp for schedule(static)
  for (std::int64_t row = 0; row < p.batch * p.heads * p.q_len; ++row) {
    const std::int64_t bh = row / p.q_len, i = row % p.q_len;
    float* dq = p.dq + (bh / p.heads) * p.dq_strides.batch + (bh % p.heads) * p.dq_strides.head +
                i * p.dq_strides.seq;
    for (std::int64_t x = 0; x < d; ++x) dq[x] = 0.0f;
    for (int t = 0; t < team; ++t) {
      const float* acc = acc_base + t * acc_stride + row * dp;
#pragma omp simd
      for (std::int64_t x = 0; x < d; ++x) dq[x] += acc[x];
    }
#pragma omp simd
    for (std::int64_t x = 0; x < d; ++x) dq[x] *= p.scale;
  }
}

}  // namespace patchbay::kernels::flash_tiles

namespace patchbay::kernels {
namespace {

using flash_tiles::kKeyTile;
using flash_tiles::kQueryTile;

std::int64_t round_up(std::int64_t x, std::int64_t to) { return (x + to - 1) / to * to; }

// Below this many multiply-adds (~20 us of work) a call runs on the calling thread only:
// waking the team costs microseconds on an idle machine and milliseconds on a loaded one
// (measured: decode Tq=1, Tk=512, H=12 took 0.23 ms on 1 thread and 13 ms on 2 threads with
// the 2 cores oversubscribed ~6x by other processes).
constexpr double kMinMacsForThreads = 1 << 20;

// Decode (Tq = 1) streams its keys and values from memory once, a few multiply-adds per byte,
// and between two tokens the weights' stream has pushed the KV cache out of the caches: one
// thread reads it at its own latency-bound rate. Threads pay off from a sixteenth of the work
// above (GPT-2's 12 heads from ~85 keys). Measured in GPT-2 decoding at ~120 keys: the row
// kernel's share of the calling thread's time 6.0% -> 3.5%, model time per token 8.97 -> 8.64
// ms (2^18 before, i.e. one thread up to ~340 keys).
constexpr double kMinDecodeMacsForThreads = 1 << 16;

// One query row per head: the forward runs forward_decode_row instead of query tiles (unless
// the caller asks for the tiles' bits, AttentionParams::row_invariant_decode).
bool is_decode(const AttentionParams& p) { return p.q_len == 1 && !p.row_invariant_decode; }

bool worth_threads(const AttentionParams& p) {
  return double(p.batch) * double(p.heads) * double(p.q_len) * double(p.kv_len) *
             double(p.head_dim) >=
         (is_decode(p) ? kMinDecodeMacsForThreads : kMinMacsForThreads);
}

// Threads a call runs on (and sizes its scratch for): one below the threshold above.
int thread_count(const AttentionParams& p) {
  if (!worth_threads(p)) return 1;
  return p.num_threads > 0 ? p.num_threads : omp_get_max_threads();
}

std::int64_t dq_acc_floats(const AttentionParams& p) {
  return round_up(p.batch * p.heads * p.q_len * round_up(p.head_dim, 16), 16);
}

// Floats of one thread's region: tile scratch, plus the dq accumulator for the backward.
// Decode (Tq = 1) needs of the forward scratch only kKeyTile scores and one output row.
std::int64_t decode_scratch_floats(std::int64_t head_dim) {
  return round_up(kKeyTile, 16) + round_up(head_dim, 16);
}
flash_tiles::ForwardScratch carve_decode(float* base) {
  flash_tiles::ForwardScratch s{};
  s.s_t = base;
  s.o = base + round_up(kKeyTile, 16);
  return s;
}

std::int64_t per_thread_floats(const AttentionParams& p, AttentionPass pass) {
  if (pass == AttentionPass::forward)
    return is_decode(p) ? decode_scratch_floats(p.head_dim)
                        : flash_tiles::forward_scratch_floats(p.head_dim);
  return flash_tiles::backward_scratch_floats(p.head_dim) + dq_acc_floats(p);
}

// Floats shared by all threads (backward only): delta [B][H][Tq], then scale*Q^T and dO^T,
// each [B][H][D][round_up(Tq, 16)].
std::int64_t transposed_floats(const AttentionParams& p) {
  return p.batch * p.heads * p.head_dim * round_up(p.q_len, 16);
}
std::int64_t shared_floats(const AttentionParams& p, AttentionPass pass) {
  if (pass == AttentionPass::forward) return 0;
  return round_up(p.batch * p.heads * p.q_len, 16) + 2 * transposed_floats(p);
}

// The call's scratch: the caller's workspace when given (AttentionParams::workspace), else
// an allocation freed on return.
struct AlignedFloats {
  AlignedFloats(std::size_t count, void* caller)
      : owned(caller == nullptr),
        data(owned
                 ? static_cast<float*>(::operator new (count * sizeof(float), std::align_val_t{64}))
                 : static_cast<float*>(caller)) {}
  ~AlignedFloats() {
    if (owned) ::operator delete (data, std::align_val_t{64});
  }
  AlignedFloats(const AlignedFloats&) = delete;
  AlignedFloats& operator=(const AlignedFloats&) = delete;
  bool owned;
  float* data;
};

#if PATCHBAY_KERNELS_X86_VARIANTS
// The bf16 kernel with its workspace: the caller's, or one allocated here (so the
// AVX512-BF16 translation unit never allocates).
std::string run_bf16(const AttentionParams& p, AttentionPass pass) {
  AlignedFloats workspace(flash_bf16::workspace_bytes(p, pass) / sizeof(float), p.workspace);
  AttentionParams with_workspace = p;
  with_workspace.workspace = workspace.data;
  if (pass == AttentionPass::forward) {
    flash_bf16::forward(with_workspace);
  } else {
    flash_bf16::backward(with_workspace);
  }
  return {};
}
#endif

}  // namespace

// Validated params with bf16 operands run the bf16 kernel (compiled only for x86-64, the
// only build where validation accepts them).
std::size_t attention_flash_workspace_bytes(const AttentionParams& p, AttentionPass pass) {
#if PATCHBAY_KERNELS_X86_VARIANTS
  // The bf16 sizes come from the AVX512-BF16 translation unit: only entered where it can run
  // (elsewhere bf16 params are refused by validation and need no workspace).
  if (p.q_bf16 != nullptr)
    return attention_flash_bf16_supported() ? flash_bf16::workspace_bytes(p, pass) : 0;
#endif
  const std::int64_t floats = shared_floats(p, pass) + thread_count(p) * per_thread_floats(p, pass);
  return static_cast<std::size_t>(floats) * sizeof(float);
}

std::string attention_flash_forward(const AttentionParams& p) {
  if (std::string e = attention_params_error(p, AttentionPass::forward); !e.empty()) return e;
#if PATCHBAY_KERNELS_X86_VARIANTS
  if (p.q_bf16 != nullptr) return run_bf16(p, AttentionPass::forward);
#endif
  const flash_tiles::TileKernels kernels = flash_tiles::tile_kernels_for(p.isa);
  const int threads = thread_count(p);
  const std::int64_t per_thread = per_thread_floats(p, AttentionPass::forward);
  AlignedFloats workspace(
      attention_flash_workspace_bytes(p, AttentionPass::forward) / sizeof(float), p.workspace);
  const std::int64_t query_tiles = (p.q_len + kQueryTile - 1) / kQueryTile;
  const std::int64_t tasks = p.batch * p.heads * query_tiles;
  // Decode (one query per head): a row on its own, no query tile padded to kVector columns.
  const bool decode = is_decode(p);

#pragma omp parallel num_threads(threads) if (worth_threads(p))
  {
    float* mine = workspace.data + omp_get_thread_num() * per_thread;
    const flash_tiles::ForwardScratch scratch =
        decode ? carve_decode(mine) : flash_tiles::carve_forward(mine, p.head_dim);
    if (decode) {
#pragma omp for schedule(static)
      for (std::int64_t bh = 0; bh < p.batch * p.heads; ++bh)
        kernels.forward_decode_row(p, bh / p.heads, bh % p.heads, 0, scratch);
    } else {
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t task = 0; task < tasks; ++task) {
        const std::int64_t bh = task / query_tiles;
        const std::int64_t tile = query_tiles - 1 - task % query_tiles;  // heaviest first
        const std::int64_t q0 = tile * kQueryTile;
        const std::int64_t rows = std::min<std::int64_t>(kQueryTile, p.q_len - q0);
        kernels.forward_query_tile(p, bh / p.heads, bh % p.heads, q0, rows, scratch);
      }
    }
  }
  return {};
}

std::string attention_flash_backward(const AttentionParams& p) {
  if (std::string e = attention_params_error(p, AttentionPass::backward); !e.empty()) return e;
#if PATCHBAY_KERNELS_X86_VARIANTS
  if (p.q_bf16 != nullptr) return run_bf16(p, AttentionPass::backward);
#endif
  const flash_tiles::TileKernels kernels = flash_tiles::tile_kernels_for(p.isa);
  const int threads = thread_count(p);
  const std::int64_t d = p.head_dim, tq_pad = round_up(p.q_len, 16);
  const std::int64_t per_thread = per_thread_floats(p, AttentionPass::backward);
  const std::int64_t shared_size = shared_floats(p, AttentionPass::backward);
  AlignedFloats workspace(
      attention_flash_workspace_bytes(p, AttentionPass::backward) / sizeof(float), p.workspace);
  float* delta = workspace.data;
  float* q_t = delta + round_up(p.batch * p.heads * p.q_len, 16);
  float* do_t = q_t + transposed_floats(p);
  const flash_tiles::BackwardShared shared{delta, q_t, do_t, tq_pad};
  const std::int64_t key_tiles = (p.kv_len + kKeyTile - 1) / kKeyTile;
  const std::int64_t tasks = p.batch * p.kv_heads * key_tiles;
  // Each thread's dq accumulator sits at the end of its region (after the tile scratch).
  const std::int64_t dq_acc_offset = per_thread - dq_acc_floats(p);

#pragma omp parallel num_threads(threads) if (worth_threads(p))
  {
    float* mine = workspace.data + shared_size + omp_get_thread_num() * per_thread;
    const flash_tiles::BackwardScratch scratch = flash_tiles::carve_backward(mine, d);
    float* dq_acc = mine + dq_acc_offset;
    const int team = omp_get_num_threads();
    std::memset(dq_acc, 0, sizeof(float) * std::size_t(dq_acc_floats(p)));
    flash_tiles::fill_backward_shared(p, shared);  // ends with a barrier

    // A fixed assignment of key tiles to threads (static, round robin), so that every
    // thread's dq accumulator — and so dq, summed over threads in reduce_dq — holds the same
    // sums run after run: training is bit-reproducible at a given thread count (a dynamic
    // schedule made dq depend on timing). Tiles run heaviest first (tile 0, under causal) for
    // even (batch, head) pairs and lightest first for odd ones, so round robin deals heavy
    // and light tiles to every thread alike.
#pragma omp for schedule(static, 1)
    for (std::int64_t task = 0; task < tasks; ++task) {
      const std::int64_t bhk = task / key_tiles, step = task % key_tiles;
      const std::int64_t tile = bhk % 2 == 0 ? step : key_tiles - 1 - step;
      const std::int64_t k0 = tile * kKeyTile;
      const std::int64_t keys = std::min<std::int64_t>(kKeyTile, p.kv_len - k0);
      kernels.backward_key_tile(p, bhk / p.kv_heads, bhk % p.kv_heads, k0, keys, shared, dq_acc,
                                scratch);
    }  // implicit barrier: every accumulator complete

    flash_tiles::reduce_dq(p, workspace.data + shared_size + dq_acc_offset, per_thread, team);
  }
  return {};
}

}  // namespace patchbay::kernels
