// Fused scaled-dot-product attention for CPU, f32, FlashAttention-style: the forward pass
// tiles queries and keys and keeps an online softmax (running max m, running sum l, rescaled
// accumulator), so no Tq x Tk matrix is ever allocated; the backward pass recomputes the
// probabilities from the saved row log-sum-exp. `AttentionParams` is the whole host<->kernel
// seam (the flash-attention `Flash_fwd_params` habit): the engine fills one struct, the kernel
// reads only it. The double-precision reference in attention_reference.hpp takes the same
// struct and has the same masking semantics; tests compare the two.
//
// Semantics (per batch b, query head h, with g = H / Hkv query heads per kv head):
//   kv head       hk = h / g                      (grouped-query attention; Hkv == H is MHA)
//   S[i][j]       = scale * <q[b,h,i,:], k[b,hk,j,:]>
//   pos(i)        = i + (Tk - Tq)                 absolute position of query i: queries are the
//                   LAST Tq positions of the Tk keys (BOTTOM-RIGHT alignment, as in
//                   FlashAttention >= 2.1; for decode with Tq = 1 the query sits at Tk - 1)
//   visible(i,j)  = (!causal || j <= pos(i))       causal mask (the usual lower triangle
//                   when Tq == Tk)
//                && (window == 0 || pos(i) - window < j)                 sliding window:
//                && (window == 0 || causal || j < pos(i) + window)       |pos(i) - j| < window
//                   (causal: the query sees itself and the window - 1 keys before it)
//   bias(i,j)     = alibi_slopes ? -alibi_slopes[h] * |pos(i) - j| : 0   (ALiBi, Press et al.
//                   2022; |.| only matters when not causal, as in FlashAttention's alibi)
//   P[i][j]       = exp(S[i][j] + bias(i,j) - lse[i]) on visible entries, 0 elsewhere
//   lse[i]        = log(sum_{visible j} exp(S[i][j] + bias(i,j)))   (natural log)
//   out[i,:]      = sum_j P[i][j] * v[b,hk,j,:]
//              && (!segment_ids || seg[j] == seg[pos(i)])   packed sequences (see segment_ids)
// A row with no visible key (causal with i + Tk - Tq < 0, only possible when Tq > Tk) gets
// out = 0 and lse = -inf, and contributes nothing (zero gradients) in the backward pass.
// With a window, key tiles wholly outside a query tile's window are never touched (and
// query tiles wholly outside a key tile's window are skipped in the backward): the work is
// O(Tq * window * D), not O(Tq * Tk * D). The bias is constant: no gradient for the slopes.
//
// Backward, given dout = dL/dout:  Dlt[i] = sum_d dout[i,d]*out[i,d];
//   dv[j] += sum_i P[i][j] dout[i];  dP[i][j] = <dout[i], v[j]>;  dS = P * (dP - Dlt[i]);
//   dq[i] = scale * sum_j dS[i][j] k[j];  dk[j] += scale * sum_i dS[i][j] q[i]
// with dk/dv summed over the g query heads that share a kv head. dq, dk, dv are overwritten.
//
// Thread safety: a call only writes the output pointers of its own struct; concurrent calls
// with disjoint outputs are safe. Each call opens its own OpenMP parallel region.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace patchbay::kernels {

// Element strides (not bytes) of a rank-4 [B, heads, T, D] view; the last dim is contiguous.
// A [B, T, H, D] tensor (straight out of a QKV projection) is {T*H*D, D, H*D}.
struct AttentionStrides {
  std::int64_t batch = 0;
  std::int64_t head = 0;
  std::int64_t seq = 0;
};

// Strides of a densely packed [B, heads, T, D] tensor: {heads*T*D, T*D, D}.
AttentionStrides contiguous_attention_strides(std::int64_t heads, std::int64_t seq_len,
                                              std::int64_t head_dim);

// Which compiled code path runs. `automatic` picks the widest the CPU supports (checked once
// at run time); the others force a path and fail validation if the CPU lacks it. Tests use
// the forced values to cover every compiled variant.
enum class KernelIsa { automatic, generic, avx2, avx512 };

enum class AttentionPass { forward, backward };

struct AttentionParams {
  // Shapes. All >= 1; heads % kv_heads == 0.
  std::int64_t batch = 0;     // B
  std::int64_t heads = 0;     // H, query heads
  std::int64_t kv_heads = 0;  // Hkv, key/value heads
  std::int64_t q_len = 0;     // Tq
  std::int64_t kv_len = 0;    // Tk
  std::int64_t head_dim = 0;  // D

  // Forward inputs (borrowed, read only).
  const float* q = nullptr;  // [B, H,   Tq, D]
  AttentionStrides q_strides;
  const float* k = nullptr;  // [B, Hkv, Tk, D]
  AttentionStrides k_strides;
  const float* v = nullptr;  // [B, Hkv, Tk, D]
  AttentionStrides v_strides;

  // Forward outputs; backward inputs (the values the forward wrote).
  float* out = nullptr;  // [B, H, Tq, D]  // out of forward
  AttentionStrides out_strides;
  float* lse = nullptr;  // [B, H, Tq] densely packed, natural-log row log-sum-exp; out of forward

  float scale = 0.0f;       // score scale; the caller chooses, usually 1/sqrt(D). Must be finite.
  bool causal = false;      // bottom-right aligned mask (see top of file)
  std::int64_t window = 0;  // >= 0; 0 = unlimited; else the sliding window above
  const float* alibi_slopes = nullptr;  // nullable; [H] finite ALiBi slopes (borrowed)
  // Packed sequences (nullable, borrowed): seg = segment_ids + b * Tk holds the segment of
  // every key position of batch row b, NON-DECREASING along the row (each segment one
  // contiguous run of positions, several documents or examples laid end to end). Query i,
  // at position pos(i), sees key j only when seg[j] == seg[pos(i)], on top of the causal mask,
  // window and ALiBi (whose distances pos(i) - j are the same as with the segment alone, so a
  // segment's result equals running it on its own). Needs Tq <= Tk. Key tiles wholly outside a
  // query tile's segments are never touched (and query tiles outside a key tile's segments are
  // skipped in the backward). Not with bf16 operands (refused by validation).
  const std::int32_t* segment_ids = nullptr;  // [B, Tk]

  // Backward only (ignored by the forward). dq/dk/dv are overwritten, not accumulated.
  const float* dout = nullptr;  // [B, H, Tq, D]
  AttentionStrides dout_strides;
  float* dq = nullptr;  // [B, H,   Tq, D]  // out
  AttentionStrides dq_strides;
  float* dk = nullptr;  // [B, Hkv, Tk, D]  // out
  AttentionStrides dk_strides;
  float* dv = nullptr;  // [B, Hkv, Tk, D]  // out
  AttentionStrides dv_strides;

  // bf16 operands (optional). When q_bf16 is set the call runs the bf16 kernel: q, k, v (and
  // dout in the backward) are read as bf16 bit patterns (uint16, round-to-nearest-even of the
  // f32 value) through these pointers with the strides above, and the f32 pointers q, k, v,
  // dout must be null; out, lse, dq, dk, dv stay f32. Every product (S = QK^T, PV, dP = dO V^T,
  // dV, dK, dQ) takes bf16 inputs with f32 accumulation (AVX512-BF16 vdpbf16ps): P and dS are
  // rounded to bf16 for the products that read them, while the softmax statistics, lse, delta
  // and every accumulator stay f32 (FlashAttention's bf16 recipe). Needs head_dim even and a
  // CPU with AVX512-BF16 (attention_flash_bf16_supported()); isa must be automatic or avx512.
  const std::uint16_t* q_bf16 = nullptr;     // [B, H,   Tq, D]
  const std::uint16_t* k_bf16 = nullptr;     // [B, Hkv, Tk, D]
  const std::uint16_t* v_bf16 = nullptr;     // [B, Hkv, Tk, D]
  const std::uint16_t* dout_bf16 = nullptr;  // [B, H,   Tq, D], backward only

  // Scratch (optional; attention_flash_forward / _backward): a caller-owned, 64-byte aligned
  // buffer of at least attention_flash_workspace_bytes(p, pass) bytes, e.g. a block of the
  // caller's caching allocator, so a call neither allocates nor touches fresh pages. Null: the
  // call allocates its own and frees it before returning.
  void* workspace = nullptr;

  // Execution. num_threads == 0 means the OpenMP default (omp_get_max_threads()). Calls with
  // fewer than 2^20 multiply-adds (B*H*Tq*Tk*D; 2^16 for decode, Tq = 1) run on the calling
  // thread only.
  int num_threads = 0;
  KernelIsa isa = KernelIsa::automatic;
  // Decode (Tq = 1) runs a row kernel of its own by default (no query tile padded to 16
  // columns), which sums in another order than the query tiles: a decoded token's output then
  // differs in the last bits from its row of a longer call. true: Tq = 1 runs the query-tile
  // path too, bit-identical to that row of any call over the same keys (batch invariance),
  // at 2.5-3.5x the row kernel's time (docs/reliability.md).
  bool row_invariant_decode = false;
};

// Empty when `p` is usable for `pass`; otherwise one sentence saying what was expected and
// what was found (e.g. "heads (12) must be a multiple of kv_heads (5)"). Checks shapes,
// non-null pointers the pass reads or writes, positive seq strides, finite scale, ISA support.
std::string attention_params_error(const AttentionParams& p, AttentionPass pass);

// Forward: writes out and lse. Returns attention_params_error(p, forward) and touches nothing
// when that is non-empty; empty string on success.
[[nodiscard]] std::string attention_flash_forward(const AttentionParams& p);

// Backward: reads q, k, v, out, lse, dout; writes dq, dk, dv. Same error contract.
[[nodiscard]] std::string attention_flash_backward(const AttentionParams& p);

// Bytes of scratch the kernel allocates for one call of `pass` with `p` (one allocation per
// call, freed before return). Never proportional to Tq*Tk. Forward: O(Br*Bc + Br*D) floats
// per thread, independent of the lengths (~64 KiB at D = 64). Backward: per thread the tile
// scratch plus a private dq accumulator of B*H*Tq*D floats, and shared: transposed copies of
// scale*Q and dO (2*B*H*Tq*D floats) and delta (B*H*Tq); i.e. linear in Tq. Uses the thread
// count the call would use (num_threads, or the OpenMP default; 1 below 2^20 multiply-adds,
// 2^16 for decode).
// The bf16 kernel (q_bf16 set) needs about half as much, plus in the forward a copy of V in
// key pairs (2 bytes per element of V, so the forward workspace is linear in Tk there); on a
// CPU without AVX512-BF16, where such a call is refused, its size is reported as 0.
std::size_t attention_flash_workspace_bytes(const AttentionParams& p, AttentionPass pass);

// Whether this build and CPU can run the bf16 kernel (x86-64 with AVX-512 and AVX512-BF16).
bool attention_flash_bf16_supported();

// The ISA `automatic` resolves to on this CPU, and a printable name for any value.
KernelIsa attention_flash_resolved_isa();
const char* kernel_isa_name(KernelIsa isa);
// Whether this build and CPU can run the code path `isa` (automatic and generic: always).
bool kernel_isa_supported(KernelIsa isa);

}  // namespace patchbay::kernels
