// Driver of the flash attention: validates the params, sizes and allocates the one workspace
// of a call, picks the tile kernels of the ISA, and distributes tiles over OpenMP threads.
//
// Forward: independent tasks (batch, head, query tile), dynamic schedule, heaviest causal
// tiles (the last query tiles, which see the most keys) first.
//
// Backward: for each (batch, kv head) in turn, threads take key tiles (dynamic schedule).
// A key tile owns its rows of dk and dv outright (summed over the query heads of its group
// inside the task), so those are written without races. dq[i] gathers from every key tile,
// so each thread adds into its own dq accumulator ([group][Tq][dp] floats) and a parallel
// reduction over query rows sums the accumulators into dq after each (batch, kv head).
// This costs threads * group * Tq * dp floats of workspace and one extra pass over dq, but
// no atomics and no second recomputation of P (the two-pass alternative, one pass over key
// tiles for dk/dv and one over query tiles for dq, does 7 instead of 5 T^2*D products).
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "attention_flash_tiles.hpp"
#include "patchbay/kernels/attention_flash.hpp"

namespace patchbay::kernels {
namespace {

using flash_tiles::kKeyTile;
using flash_tiles::kQueryTile;

std::int64_t round_up(std::int64_t x, std::int64_t to) { return (x + to - 1) / to * to; }

int thread_count(const AttentionParams& p) {
  return p.num_threads > 0 ? p.num_threads : omp_get_max_threads();
}

flash_tiles::TileKernels tile_kernels_for(KernelIsa isa) {
  if (isa == KernelIsa::automatic) isa = attention_flash_resolved_isa();
  switch (isa) {
#if PATCHBAY_KERNELS_X86_VARIANTS
    case KernelIsa::avx512: return flash_tiles::tile_kernels_avx512();
    case KernelIsa::avx2: return flash_tiles::tile_kernels_avx2();
#endif
    default: return flash_tiles::tile_kernels_generic();
  }
}

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

flash_tiles::ForwardScratch carve_forward(ScratchCarver& carver, std::int64_t d) {
  const std::int64_t dp = round_up(d, 16);
  flash_tiles::ForwardScratch s{};
  s.q_t = carver.take(d * kQueryTile);
  s.s_t = carver.take(kKeyTile * kQueryTile);
  s.v_pad = carver.take(kKeyTile * dp);
  s.o = carver.take(kQueryTile * dp);
  s.row_max = carver.take(kQueryTile);
  s.row_sum = carver.take(kQueryTile);
  s.work = carver.take(3 * kQueryTile);
  return s;
}

flash_tiles::BackwardScratch carve_backward(ScratchCarver& carver, std::int64_t d) {
  const std::int64_t dp = round_up(d, 16);
  flash_tiles::BackwardScratch s{};
  s.q_t = carver.take(d * kQueryTile);
  s.do_t = carver.take(d * kQueryTile);
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

// Floats of one thread's region: tile scratch, plus the dq accumulator for the backward.
std::int64_t per_thread_floats(const AttentionParams& p, AttentionPass pass) {
  ScratchCarver counter(nullptr);
  if (pass == AttentionPass::forward) {
    carve_forward(counter, p.head_dim);
  } else {
    carve_backward(counter, p.head_dim);
    counter.take((p.heads / p.kv_heads) * p.q_len * round_up(p.head_dim, 16));
  }
  return counter.used_floats();
}

// Floats shared by all threads: delta = rowsum(dO * O), [B][H][Tq], backward only.
std::int64_t shared_floats(const AttentionParams& p, AttentionPass pass) {
  return pass == AttentionPass::backward ? round_up(p.batch * p.heads * p.q_len, 16) : 0;
}

struct AlignedFloats {
  explicit AlignedFloats(std::size_t count)
      : data(static_cast<float*>(::operator new(count * sizeof(float), std::align_val_t{64}))) {}
  ~AlignedFloats() { ::operator delete(data, std::align_val_t{64}); }
  AlignedFloats(const AlignedFloats&) = delete;
  AlignedFloats& operator=(const AlignedFloats&) = delete;
  float* data;
};

}  // namespace

std::size_t attention_flash_workspace_bytes(const AttentionParams& p, AttentionPass pass) {
  const std::int64_t floats =
      shared_floats(p, pass) + thread_count(p) * per_thread_floats(p, pass);
  return static_cast<std::size_t>(floats) * sizeof(float);
}

std::string attention_flash_forward(const AttentionParams& p) {
  if (std::string e = attention_params_error(p, AttentionPass::forward); !e.empty()) return e;
  const flash_tiles::TileKernels kernels = tile_kernels_for(p.isa);
  const int threads = thread_count(p);
  const std::int64_t per_thread = per_thread_floats(p, AttentionPass::forward);
  AlignedFloats workspace(attention_flash_workspace_bytes(p, AttentionPass::forward) / sizeof(float));
  const std::int64_t query_tiles = (p.q_len + kQueryTile - 1) / kQueryTile;
  const std::int64_t tasks = p.batch * p.heads * query_tiles;

#pragma omp parallel num_threads(threads)
  {
    ScratchCarver carver(workspace.data + omp_get_thread_num() * per_thread);
    const flash_tiles::ForwardScratch scratch = carve_forward(carver, p.head_dim);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t task = 0; task < tasks; ++task) {
      const std::int64_t bh = task / query_tiles;
      const std::int64_t tile = query_tiles - 1 - task % query_tiles;  // heaviest first
      const std::int64_t q0 = tile * kQueryTile;
      const std::int64_t rows = std::min<std::int64_t>(kQueryTile, p.q_len - q0);
      kernels.forward_query_tile(p, bh / p.heads, bh % p.heads, q0, rows, scratch);
    }
  }
  return {};
}

std::string attention_flash_backward(const AttentionParams& p) {
  if (std::string e = attention_params_error(p, AttentionPass::backward); !e.empty()) return e;
  const flash_tiles::TileKernels kernels = tile_kernels_for(p.isa);
  const int threads = thread_count(p);
  const std::int64_t d = p.head_dim, dp = round_up(d, 16);
  const std::int64_t group = p.heads / p.kv_heads;
  const std::int64_t per_thread = per_thread_floats(p, AttentionPass::backward);
  const std::int64_t shared = shared_floats(p, AttentionPass::backward);
  AlignedFloats workspace(attention_flash_workspace_bytes(p, AttentionPass::backward) / sizeof(float));
  float* delta = workspace.data;  // [B][H][Tq]
  const std::int64_t key_tiles = (p.kv_len + kKeyTile - 1) / kKeyTile;
  const std::int64_t dq_acc_floats = group * p.q_len * dp;
  // Each thread's dq accumulator sits at the end of its region (after the tile scratch).
  const std::int64_t dq_acc_offset = per_thread - round_up(dq_acc_floats, 16);

#pragma omp parallel num_threads(threads)
  {
    float* mine = workspace.data + shared + omp_get_thread_num() * per_thread;
    ScratchCarver carver(mine);
    const flash_tiles::BackwardScratch scratch = carve_backward(carver, d);
    float* dq_acc = mine + dq_acc_offset;
    const int team = omp_get_num_threads();

#pragma omp for schedule(static)
    for (std::int64_t row = 0; row < p.batch * p.heads * p.q_len; ++row) {
      const std::int64_t bh = row / p.q_len, i = row % p.q_len;
      const float* o = p.out + (bh / p.heads) * p.out_strides.batch +
                       (bh % p.heads) * p.out_strides.head + i * p.out_strides.seq;
      const float* g = p.dout + (bh / p.heads) * p.dout_strides.batch +
                       (bh % p.heads) * p.dout_strides.head + i * p.dout_strides.seq;
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (std::int64_t x = 0; x < d; ++x) sum += o[x] * g[x];
      delta[row] = sum;
    }  // implicit barrier: delta complete

    for (std::int64_t bhk = 0; bhk < p.batch * p.kv_heads; ++bhk) {
      const std::int64_t b = bhk / p.kv_heads, hk = bhk % p.kv_heads;
      std::memset(dq_acc, 0, sizeof(float) * std::size_t(dq_acc_floats));
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t tile = 0; tile < key_tiles; ++tile) {  // tile 0 sees most queries
        const std::int64_t k0 = tile * kKeyTile;
        const std::int64_t keys = std::min<std::int64_t>(kKeyTile, p.kv_len - k0);
        kernels.backward_key_tile(p, b, hk, k0, keys, delta, dq_acc, scratch);
      }  // implicit barrier: every accumulator complete
#pragma omp for schedule(static)
      for (std::int64_t row = 0; row < group * p.q_len; ++row) {
        const std::int64_t h = hk * group + row / p.q_len, i = row % p.q_len;
        float* dq = p.dq + b * p.dq_strides.batch + h * p.dq_strides.head + i * p.dq_strides.seq;
        for (std::int64_t x = 0; x < d; ++x) dq[x] = 0.0f;
        for (int t = 0; t < team; ++t) {
          const float* acc = workspace.data + shared + t * per_thread + dq_acc_offset + row * dp;
#pragma omp simd
          for (std::int64_t x = 0; x < d; ++x) dq[x] += acc[x];
        }
#pragma omp simd
        for (std::int64_t x = 0; x < d; ++x) dq[x] *= p.scale;
      }  // implicit barrier: accumulators may be cleared for the next (batch, kv head)
    }
  }
  return {};
}

}  // namespace patchbay::kernels
