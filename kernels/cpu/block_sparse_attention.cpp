// Block-sparse attention kernel (see include/patchbay/kernels/block_sparse_attention.hpp).
// It runs the flash-attention tile kernels (attention_flash_tiles_body.inc, one build per ISA,
// picked at run time from p.isa) over the tiles the layout activates, so a computed
// (query, key) pair costs what it costs in dense flash attention and skipped pairs cost
// nothing. Shapes and invariants of the tiles: attention_flash_tiles.hpp.
//
// Forward: one task per (batch, head, query tile), a query tile being the queries of one
// layout row (cut into pieces of kQueryTile rows when block_size is larger). Its keys are
// the active blocks of that layout row, adjacent blocks merged into one span; the tile kernel
// walks each span in key tiles of up to kKeyTile, with the online softmax across them and the
// causal / window mask only on the tiles that cross it. Last layout rows (most keys) first.
//
// Backward: one task per (batch, kv head, key tile), a key tile being the keys of one key
// block (pieces of kKeyTile keys when larger), so dk/dv rows have one writer. For each query
// head of the group its queries are the active rows of that layout column, merged into spans.
// Probabilities are recomputed from lse; dq is gathered in one accumulator per thread and
// summed at the end, with the delta and transposed Q / dO precomputed once: all three exactly
// as in the flash backward (flash_tiles::fill_backward_shared, reduce_dq).
//
// Memory: per thread the tile scratch (~O(kQueryTile * D)) and the span lists (O(layout
// rows)); the backward adds per thread a dq accumulator and, shared, transposed Q and dO
// (O(Tq * D) each). Nothing is ever Tq x Tk.
#include "patchbay/kernels/block_sparse_attention.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "attention_flash_tiles.hpp"

namespace patchbay::kernels {
namespace {

using flash_tiles::kKeyTile;
using flash_tiles::kQueryTile;
using flash_tiles::kVector;
using flash_tiles::Span;

std::int64_t round_up(std::int64_t x, std::int64_t to) { return (x + to - 1) / to * to; }

// Threads for a call: small calls (under 2^20 multiply-adds if every tile were active) stay on
// the calling thread, where an OpenMP region costs more than it saves.
int thread_count(const BlockSparseParams& p) {
  const double work = double(p.batch) * p.heads * p.q_len * p.kv_len * p.head_dim;
  if (work < double(1 << 20)) return 1;
  return p.num_threads > 0 ? p.num_threads : omp_get_max_threads();
}

// The same call as flash-attention params (contiguous strides, no ALiBi), which is what the
// tile kernels read. Its validation also refuses an ISA the CPU lacks.
AttentionParams flash_view(const BlockSparseParams& p) {
  AttentionParams a;
  a.batch = p.batch, a.heads = p.heads, a.kv_heads = p.kv_heads;
  a.q_len = p.q_len, a.kv_len = p.kv_len, a.head_dim = p.head_dim;
  const AttentionStrides qs = contiguous_attention_strides(p.heads, p.q_len, p.head_dim);
  const AttentionStrides ks = contiguous_attention_strides(p.kv_heads, p.kv_len, p.head_dim);
  a.q = p.q, a.q_strides = qs;
  a.k = p.k, a.k_strides = ks;
  a.v = p.v, a.v_strides = ks;
  a.out = p.out, a.out_strides = qs;
  a.lse = p.lse;
  a.scale = p.scale;
  a.causal = p.causal;
  a.window = std::max<std::int64_t>(p.window, 0);
  a.dout = p.dout, a.dout_strides = qs;
  a.dq = p.dq, a.dq_strides = qs;
  a.dk = p.dk, a.dk_strides = ks;
  a.dv = p.dv, a.dv_strides = ks;
  a.num_threads = p.num_threads;
  a.isa = p.isa;
  return a;
}

// One 64-byte aligned float buffer per call.
struct AlignedDelete {
  void operator()(float* data) const { ::operator delete (data, std::align_val_t{64}); }
};
std::unique_ptr<float, AlignedDelete> aligned_floats(std::int64_t count) {
  return std::unique_ptr<float, AlignedDelete>(static_cast<float*>(::operator new (
      std::size_t(std::max<std::int64_t>(count, 1)) * sizeof(float), std::align_val_t{64})));
}

// Appends [begin, end) to spans (count entries so far), merging with the last span when they
// touch; returns the new count.
std::int64_t append_span(Span* spans, std::int64_t count, std::int64_t begin, std::int64_t end) {
  if (begin >= end) return count;
  if (count > 0 && spans[count - 1].end == begin) {
    spans[count - 1].end = end;
    return count;
  }
  spans[count] = Span{begin, end};
  return count + 1;
}

// Query rows of layout row r: [max(r * bs - offset, 0), min((r + 1) * bs - offset, Tq)).
std::int64_t row_first_query(const BlockSparseParams& p, std::int64_t r) {
  return std::max<std::int64_t>(r * p.block_size - (p.kv_len - p.q_len), 0);
}
std::int64_t row_end_query(const BlockSparseParams& p, std::int64_t r) {
  return std::min((r + 1) * p.block_size - (p.kv_len - p.q_len), p.q_len);
}

}  // namespace

std::int64_t block_sparse_layout_blocks(std::int64_t kv_len, std::int64_t block_size) {
  return block_size > 0 ? (kv_len + block_size - 1) / block_size : 0;
}

std::string block_sparse_params_error(const BlockSparseParams& p, bool backward) {
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.q_len < 1 || p.kv_len < 1 || p.head_dim < 1)
    return "batch, heads, kv_heads, q_len, kv_len and head_dim must all be >= 1";
  if (p.heads % p.kv_heads != 0)
    return "heads (" + std::to_string(p.heads) + ") must be a multiple of kv_heads (" +
           std::to_string(p.kv_heads) + ")";
  if (p.q_len > p.kv_len)
    return "a block layout needs q_len <= kv_len (queries are the last q_len positions), found " +
           std::to_string(p.q_len) + " > " + std::to_string(p.kv_len);
  if (p.block_size < 1) return "block_size must be >= 1, found " + std::to_string(p.block_size);
  if (!std::isfinite(p.scale)) return "scale must be finite";
  if (!p.q || !p.k || !p.v || !p.out || !p.lse || !p.layout) return "a forward pointer is null";
  if (backward && (!p.dout || !p.dq || !p.dk || !p.dv)) return "a backward pointer is null";
  return {};
}

std::string block_sparse_attention_forward(const BlockSparseParams& p) {
  if (std::string err = block_sparse_params_error(p, false); !err.empty()) return err;
  const AttentionParams a = flash_view(p);
  if (std::string err = attention_params_error(a, AttentionPass::forward); !err.empty()) return err;
  const flash_tiles::TileKernels kernels = flash_tiles::tile_kernels_for(p.isa);
  const std::int64_t blocks = block_sparse_layout_blocks(p.kv_len, p.block_size);
  const std::int64_t bs = p.block_size;
  const std::int64_t first_row = (p.kv_len - p.q_len) / bs;  // layout rows holding queries
  const std::int64_t rows = blocks - first_row;
  const std::int64_t pieces = (bs + kQueryTile - 1) / kQueryTile;  // query tiles per row
  const std::int64_t tasks = p.batch * p.heads * rows * pieces;
  const int threads = thread_count(p);
  const std::int64_t per_thread = flash_tiles::forward_scratch_floats(p.head_dim);
  const auto workspace = aligned_floats(threads * per_thread);

#pragma omp parallel num_threads(threads) if (tasks > 1 && threads > 1)
  {
    const flash_tiles::ForwardScratch scratch =
        flash_tiles::carve_forward(workspace.get() + omp_get_thread_num() * per_thread, p.head_dim);
    std::vector<Span> spans(static_cast<std::size_t>(blocks));
    std::int64_t spans_of = -1, span_count = 0;  // layout row (h * blocks + r) spans holds
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t task = 0; task < tasks; ++task) {
      const std::int64_t bh = task / (rows * pieces), within = task % (rows * pieces);
      const std::int64_t r = blocks - 1 - within / pieces;  // heaviest (causal) rows first
      const std::int64_t q0 = row_first_query(p, r) + within % pieces * kQueryTile;
      const std::int64_t q_end = row_end_query(p, r);
      if (q0 >= q_end) continue;
      const std::int64_t h = bh % p.heads;
      if (spans_of != h * blocks + r) {
        spans_of = h * blocks + r;
        const std::int32_t* layout_row = p.layout + spans_of * blocks;
        span_count = 0;
        for (std::int64_t c = 0; c < blocks; ++c) {
          if (layout_row[c] == 0) continue;
          span_count =
              append_span(spans.data(), span_count, c * bs, std::min((c + 1) * bs, p.kv_len));
        }
      }
      kernels.sparse_forward_query_tile(a, bh / p.heads, h, q0, std::min(kQueryTile, q_end - q0),
                                        spans.data(), span_count, scratch);
    }
  }
  return {};
}

std::string block_sparse_attention_backward(const BlockSparseParams& p) {
  if (std::string err = block_sparse_params_error(p, true); !err.empty()) return err;
  const AttentionParams a = flash_view(p);
  if (std::string err = attention_params_error(a, AttentionPass::backward); !err.empty())
    return err;
  const flash_tiles::TileKernels kernels = flash_tiles::tile_kernels_for(p.isa);
  const std::int64_t blocks = block_sparse_layout_blocks(p.kv_len, p.block_size);
  const std::int64_t bs = p.block_size, d = p.head_dim, group = p.heads / p.kv_heads;
  const std::int64_t first_row = (p.kv_len - p.q_len) / bs;
  const std::int64_t pieces = (bs + kKeyTile - 1) / kKeyTile;  // key tiles per key block
  const std::int64_t tasks = p.batch * p.kv_heads * blocks * pieces;
  const int threads = thread_count(p);

  // Shared: delta [B][H][Tq], scale*Q^T and dO^T [B][H][D][tq_pad]. A query span may start at
  // any row and its tile reads up to kVector - 1 columns past its last row: hence the extra
  // kVector of zero columns (attention_flash_tiles.hpp, BackwardShared).
  const std::int64_t tq_pad = round_up(p.q_len, kVector) + kVector;
  const std::int64_t delta_floats = round_up(p.batch * p.heads * p.q_len, 16);
  const std::int64_t transposed = p.batch * p.heads * d * tq_pad;
  const std::int64_t shared_size = delta_floats + 2 * transposed;
  const std::int64_t dq_acc_floats = round_up(p.batch * p.heads * p.q_len * round_up(d, 16), 16);
  const std::int64_t per_thread = flash_tiles::backward_scratch_floats(d) + dq_acc_floats;
  const std::int64_t dq_acc_offset = per_thread - dq_acc_floats;
  const auto workspace = aligned_floats(shared_size + threads * per_thread);
  float* delta = workspace.get();
  const flash_tiles::BackwardShared shared{delta, delta + delta_floats,
                                           delta + delta_floats + transposed, tq_pad};

#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    float* mine = workspace.get() + shared_size + omp_get_thread_num() * per_thread;
    const flash_tiles::BackwardScratch scratch = flash_tiles::carve_backward(mine, d);
    float* dq_acc = mine + dq_acc_offset;
    const int team = omp_get_num_threads();
    std::memset(dq_acc, 0, sizeof(float) * std::size_t(dq_acc_floats));
    flash_tiles::fill_backward_shared(a, shared);  // ends with a barrier

    // Query spans of every head of the group, head g's at spans[head_begin[g] ..
    // head_begin[g + 1]); rebuilt when the task moves to another (batch, kv head, key block).
    std::vector<Span> spans(static_cast<std::size_t>(group * blocks));
    std::vector<std::int64_t> head_begin(static_cast<std::size_t>(group + 1), 0);
    std::int64_t spans_of = -1;  // kv head * blocks + key block
    // Static round robin, as the flash backward (attention_flash.cpp): a fixed assignment of
    // tasks to threads keeps dq bit-reproducible; odd (batch, kv head) pairs run their key
    // blocks lightest first so that every thread gets heavy and light ones.
#pragma omp for schedule(static, 1)
    for (std::int64_t task = 0; task < tasks; ++task) {
      const std::int64_t bhk = task / (blocks * pieces), step = task % (blocks * pieces);
      const std::int64_t within = bhk % 2 == 0 ? step : blocks * pieces - 1 - step;
      const std::int64_t c = within / pieces;  // block 0 first: under causal the heaviest
      const std::int64_t k0 = c * bs + within % pieces * kKeyTile;
      const std::int64_t block_end = std::min((c + 1) * bs, p.kv_len);
      if (k0 >= block_end) continue;
      const std::int64_t hk = bhk % p.kv_heads;
      if (spans_of != hk * blocks + c) {
        spans_of = hk * blocks + c;
        // Causal: layout rows before c hold only queries at positions < c * bs.
        const std::int64_t r_begin = p.causal ? std::max(first_row, c) : first_row;
        std::int64_t count = 0;
        for (std::int64_t g = 0; g < group; ++g) {
          const std::int64_t begin = count, h = hk * group + g;
          head_begin[std::size_t(g)] = begin;
          for (std::int64_t r = r_begin; r < blocks; ++r) {
            if (p.layout[(h * blocks + r) * blocks + c] == 0) continue;
            count = begin + append_span(spans.data() + begin, count - begin, row_first_query(p, r),
                                        row_end_query(p, r));
          }
        }
        head_begin[std::size_t(group)] = count;
      }
      kernels.sparse_backward_key_tile(a, bhk / p.kv_heads, hk, k0,
                                       std::min(kKeyTile, block_end - k0), spans.data(),
                                       head_begin.data(), shared, dq_acc, scratch);
    }  // implicit barrier: every accumulator complete

    flash_tiles::reduce_dq(a, workspace.get() + shared_size + dq_acc_offset, per_thread, team);
  }
  return {};
}

}  // namespace patchbay::kernels
