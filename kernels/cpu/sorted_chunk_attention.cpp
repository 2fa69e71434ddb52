// The sorted-chunk (LSH) attention kernels (sorted_chunk_attention.hpp): validation of the
// shape and plan, the ISA dispatch, the per-row occurrence table (slot of every position's r-th
// occurrence) and delta = dout . out, one scratch block per thread and OpenMP over the rows. The
// products are the chunk kernels of sorted_chunks_body.inc (one build per ISA), described in
// sorted_chunks.hpp.
#include "patchbay/kernels/sorted_chunk_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "patchbay/kernels/bf16_rounding.hpp"
#include "sorted_chunks.hpp"

namespace patchbay::kernels {
namespace {

namespace sc = sorted_chunks;

std::int64_t round_up16(std::int64_t x) { return (x + 15) / 16 * 16; }

sc::ChunkKernels kernels_for(KernelIsa isa) {
  if (isa == KernelIsa::automatic) isa = attention_flash_resolved_isa();
  switch (isa) {
#if PATCHBAY_KERNELS_X86_VARIANTS
    case KernelIsa::avx512:
      return sc::chunk_kernels_avx512();
    case KernelIsa::avx2:
      return sc::chunk_kernels_avx2();
#endif
    default:
      return sc::chunk_kernels_generic();
  }
}

// One thread's scratch (sorted_chunks.hpp, ChunkScratch): floats, then int32s.
struct Scratch {
  std::vector<float> floats;
  std::vector<std::int32_t> ints;
  sc::ChunkScratch view{};

  Scratch(std::int64_t chunk_len, std::int64_t head_dim, std::int64_t rounds_max) {
    const std::int64_t cp = round_up16(chunk_len), dp = round_up16(head_dim);
    const std::int64_t wp = round_up16(2 * chunk_len);
    floats.assign(std::size_t(4 * cp * dp + 4 * wp * dp + 2 * wp * cp + cp * dp + 2 * cp), 0.0f);
    ints.assign(std::size_t(3 * cp + 2 * wp + 2 * rounds_max * (cp + wp)), 0);
    float* base = floats.data();
    auto take = [&base](std::int64_t n) {
      float* at = base;
      base += n;
      return at;
    };
    view.q_t = take(dp * cp);
    view.do_t = take(dp * cp);
    view.q_g = take(cp * dp);
    view.do_g = take(cp * dp);
    view.k_g = take(wp * dp);
    view.v_g = take(wp * dp);
    view.dk_tile = take(wp * dp);
    view.dv_tile = take(wp * dp);
    view.s_t = take(wp * cp);
    view.g_t = take(wp * cp);
    view.o = take(cp * dp);
    view.row_max = take(cp);
    view.row_sum = take(cp);
    std::int32_t* at = ints.data();
    auto take_ints = [&at](std::int64_t n) {
      std::int32_t* here = at;
      at += n;
      return here;
    };
    view.query_position = take_ints(cp);
    view.query_group = take_ints(cp);
    view.count = take_ints(cp);
    view.key_position = take_ints(wp);
    view.key_group = take_ints(wp);
    view.query_round = take_ints(2 * rounds_max * cp);
    view.key_round = take_ints(2 * rounds_max * wp);
  }
};

// Occurrences of every position of one row's plan, [T][rounds] slot indices in slot order.
std::vector<std::int32_t> occurrences(const SortedChunkAttentionShape& s,
                                      const std::int32_t* position, std::int64_t rounds) {
  std::vector<std::int32_t> table(std::size_t(s.length * rounds), -1);
  std::vector<std::int64_t> seen(std::size_t(s.length), 0);
  for (std::int64_t slot = 0; slot < s.slots; ++slot) {
    const std::int32_t pos = position[slot];
    if (pos < 0) continue;
    table[std::size_t(pos * rounds + seen[std::size_t(pos)]++)] = std::int32_t(slot);
  }
  return table;
}

// Rounds of a row: its real slots / T (the plan check made them equal per position).
std::int64_t rounds_of(const SortedChunkAttentionShape& s, const std::int32_t* position) {
  if (s.length == 0) return 0;
  std::int64_t real = 0;
  for (std::int64_t slot = 0; slot < s.slots; ++slot) real += position[slot] >= 0 ? 1 : 0;
  return real / s.length;
}

std::vector<float> log_counts(std::int64_t rounds) {
  std::vector<float> table(std::size_t(rounds + 1), 0.0f);
  for (std::int64_t n = 1; n <= rounds; ++n) table[std::size_t(n)] = std::log(float(n));
  return table;
}

void check(const SortedChunkAttentionShape& s, const std::int32_t* position,
           const std::int32_t* group) {
  if (const std::string e = sorted_chunk_attention_error(s, position, group); !e.empty())
    throw std::invalid_argument(e);
}

bool big_enough(const SortedChunkAttentionShape& s) {
  return s.rows > 1 && s.slots * s.chunk_len * s.head_dim * s.rows > (1 << 16);
}

// Runs `pass` on every row in parallel; fill sets a row's pointers.
template <class Fill>
void run_rows(const SortedChunkAttentionShape& s, const std::int32_t* position,
              const std::int32_t* group,
              void (*pass)(const sc::RowProblem&, const sc::ChunkScratch&), const Fill& fill) {
  std::int64_t rounds_max = 0;
  for (std::int64_t r = 0; r < s.rows; ++r)
    rounds_max = std::max(rounds_max, rounds_of(s, position + r * s.slots));
#pragma omp parallel if (big_enough(s))
  {
    Scratch scratch(s.chunk_len, s.head_dim, rounds_max);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t r = 0; r < s.rows; ++r) {
      const std::int32_t* row_position = position + r * s.slots;
      const std::int64_t rounds = rounds_of(s, row_position);
      const std::vector<std::int32_t> occurrence = occurrences(s, row_position, rounds);
      const std::vector<float> logs = log_counts(rounds);
      sc::RowProblem p;
      p.length = s.length, p.head_dim = s.head_dim, p.slots = s.slots, p.chunk_len = s.chunk_len;
      p.rounds = rounds;
      p.scale = s.scale, p.self_bias = s.self_bias, p.causal = s.causal, p.dedup = s.dedup;
      p.bf16 = s.bf16;
      p.position = row_position;
      p.group = group + r * s.slots;
      p.occurrence = occurrence.data();
      p.log_count = logs.data();
      fill(r, p);
      pass(p, scratch.view);
    }
  }
}

}  // namespace

std::string sorted_chunk_attention_error(const SortedChunkAttentionShape& s,
                                         const std::int32_t* slot_position,
                                         const std::int32_t* slot_group) {
  if (s.rows < 0 || s.length < 0 || s.head_dim < 1 || s.chunk_len < 1 || s.slots < 0 ||
      s.slots % s.chunk_len != 0)
    return "sorted-chunk attention expects rows >= 0, length >= 0, head_dim >= 1, chunk_len >= 1 "
           "and slots a multiple of chunk_len; found rows " +
           std::to_string(s.rows) + ", length " + std::to_string(s.length) + ", head_dim " +
           std::to_string(s.head_dim) + ", chunk_len " + std::to_string(s.chunk_len) + ", slots " +
           std::to_string(s.slots);
  if (!std::isfinite(s.scale) || !std::isfinite(s.self_bias))
    return "sorted-chunk attention: scale and self_bias must be finite";
  if (!kernel_isa_supported(s.isa))
    return std::string("sorted-chunk attention: isa '") + kernel_isa_name(s.isa) +
           "' was forced but this CPU does not support it; use KernelIsa::automatic";
  if (slot_position == nullptr || slot_group == nullptr) return {};
  std::vector<std::int64_t> count(std::size_t(s.length));
  for (std::int64_t r = 0; r < s.rows; ++r) {
    std::fill(count.begin(), count.end(), 0);
    for (std::int64_t slot = 0; slot < s.slots; ++slot) {
      const std::int32_t pos = slot_position[r * s.slots + slot];
      if (pos < -1 || pos >= s.length)
        return "sorted-chunk attention: slot " + std::to_string(slot) + " of row " +
               std::to_string(r) + " reads position " + std::to_string(pos) +
               ", expected -1 (padding) or a position in [0, " + std::to_string(s.length) + ")";
      if (pos >= 0 && slot_group[r * s.slots + slot] < 0)
        return "sorted-chunk attention: slot " + std::to_string(slot) + " of row " +
               std::to_string(r) + " has group " + std::to_string(slot_group[r * s.slots + slot]) +
               ", expected a group >= 0 for a real slot";
      if (pos >= 0) ++count[std::size_t(pos)];
    }
    for (std::int64_t t = 1; t < s.length; ++t)
      if (count[std::size_t(t)] != count[0])
        return "sorted-chunk attention: every position of a row must occur equally often (once "
               "per round); in row " +
               std::to_string(r) + " position 0 occurs " + std::to_string(count[0]) +
               " times and position " + std::to_string(t) + " " +
               std::to_string(count[std::size_t(t)]);
  }
  return {};
}

void sorted_chunk_attention_forward(const SortedChunkAttentionShape& s, const float* q,
                                    const float* k, const float* v,
                                    const std::int32_t* slot_position,
                                    const std::int32_t* slot_group, float* out, float* stat) {
  check(s, slot_position, slot_group);
  const std::int64_t td = s.length * s.head_dim;
  run_rows(s, slot_position, slot_group, kernels_for(s.isa).forward_row,
           [&](std::int64_t r, sc::RowProblem& p) {
             p.q = q + r * td, p.k = k + r * td, p.v = v + r * td;
             p.out = out + r * td;
             p.stat = stat + 2 * r * s.length;
           });
}

void sorted_chunk_attention_backward(const SortedChunkAttentionShape& s, const float* q,
                                     const float* k, const float* v,
                                     const std::int32_t* slot_position,
                                     const std::int32_t* slot_group, const float* out,
                                     const float* stat, const float* dout, float* dq, float* dk,
                                     float* dv) {
  check(s, slot_position, slot_group);
  const std::int64_t td = s.length * s.head_dim;
  run_rows(s, slot_position, slot_group, kernels_for(s.isa).backward_row,
           [&](std::int64_t r, sc::RowProblem& p) {
             thread_local std::vector<float> delta;
             delta.assign(std::size_t(s.length), 0.0f);
             for (std::int64_t t = 0; t < s.length; ++t) {
               float sum = 0.0f;
               const float* o = out + r * td + t * s.head_dim;
               const float* g = dout + r * td + t * s.head_dim;
               for (std::int64_t e = 0; e < s.head_dim; ++e)  // dout as the kernel reads it
                 sum += o[e] * (s.bf16 ? round_to_bf16(g[e]) : g[e]);
               delta[std::size_t(t)] = sum;
             }
             p.q = q + r * td, p.k = k + r * td, p.v = v + r * td;
             p.dout = dout + r * td;
             p.stat_in = stat + 2 * r * s.length;
             p.delta = delta.data();
             p.dq = dq + r * td, p.dk = dk + r * td, p.dv = dv + r * td;
             std::memset(p.dq, 0, sizeof(float) * std::size_t(td));
             std::memset(p.dk, 0, sizeof(float) * std::size_t(td));
             std::memset(p.dv, 0, sizeof(float) * std::size_t(td));
           });
}

}  // namespace patchbay::kernels
