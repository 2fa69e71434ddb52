// Validation of AttentionParams and the small helpers around it (strides, ISA names and
// run-time ISA detection). Shared by the flash kernel and the naive reference so both accept
// and refuse exactly the same inputs with the same messages.
#include <cmath>
#include <cstdint>
#include <string>

#include "patchbay/kernels/attention_flash.hpp"

namespace patchbay::kernels {
namespace {

std::string num(std::int64_t value) { return std::to_string(value); }

bool cpu_supports(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::automatic:
    case KernelIsa::generic:
      return true;
#if PATCHBAY_KERNELS_X86_VARIANTS
    case KernelIsa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case KernelIsa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    case KernelIsa::avx2:
    case KernelIsa::avx512:
      return false;  // not compiled on this architecture
#endif
  }
  return false;
}

// Checks one strided [B, heads, T, D] operand; empty when usable.
std::string operand_error(const char* name, const void* data, const AttentionStrides& s) {
  if (data == nullptr) return std::string(name) + " must not be null for this pass";
  if (s.seq <= 0 || s.head < 0 || s.batch < 0) {
    return std::string(name) +
           " strides must be seq > 0, head >= 0, batch >= 0 (elements); found {" + num(s.batch) +
           ", " + num(s.head) + ", " + num(s.seq) + "}";
  }
  return {};
}

// The bf16 operands' own rules (q_bf16 is set): the rest of the bf16 pointers, no f32
// operand pointers (one call reads one kind), an even head_dim (products read bf16 pairs along
// D), a CPU with AVX512-BF16 and no forced narrower ISA.
std::string bf16_operands_error(const AttentionParams& p, AttentionPass pass) {
  if (p.q != nullptr || p.k != nullptr || p.v != nullptr || p.dout != nullptr)
    return "q_bf16 is set, so the f32 operand pointers q, k, v, dout must be null (a call "
           "reads either f32 or bf16 operands)";
  if (p.k_bf16 == nullptr || p.v_bf16 == nullptr)
    return "q_bf16 is set but k_bf16 or v_bf16 is null: bf16 calls read all three as bf16";
  if (pass == AttentionPass::backward && p.dout_bf16 == nullptr)
    return "dout_bf16 must not be null for the bf16 backward";
  if (p.head_dim % 2 != 0)
    return "the bf16 kernel needs an even head_dim (it multiplies bf16 pairs along D); found " +
           num(p.head_dim) + " (use f32 operands)";
  if (p.isa != KernelIsa::automatic && p.isa != KernelIsa::avx512)
    return std::string("the bf16 kernel runs on the avx512 path only; isa '") +
           kernel_isa_name(p.isa) + "' was forced";
  if (!attention_flash_bf16_supported())
    return "bf16 operands need a CPU with AVX512-BF16 (and an x86-64 build); this one has "
           "none: use f32 operands";
  return {};
}

// Packed segments: Tq <= Tk (queries are positions of the keys' rows), f32 operands only, and
// every row non-decreasing (contiguous segments; the tiles find a segment's ends by binary
// search). O(B * Tk), against O(B * H * Tq * Tk * D) for the call.
std::string segment_ids_error(const AttentionParams& p) {
  if (p.segment_ids == nullptr) return {};
  if (p.q_len > p.kv_len)
    return "segment_ids need q_len <= kv_len (queries at the last q_len key positions); found "
           "q_len " +
           num(p.q_len) + ", kv_len " + num(p.kv_len);
  if (p.q_bf16 != nullptr)
    return "segment_ids are not supported with bf16 operands (the bf16 kernel has no segment "
           "mask); use f32 operands for packed sequences";
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const std::int32_t* seg = p.segment_ids + b * p.kv_len;
    for (std::int64_t j = 1; j < p.kv_len; ++j) {
      if (seg[j] < seg[j - 1])
        return "segment_ids must be non-decreasing along each row (each segment one contiguous "
               "run); row " +
               num(b) + " has " + num(seg[j - 1]) + " at position " + num(j - 1) + " then " +
               num(seg[j]);
    }
  }
  return {};
}

}  // namespace

AttentionStrides contiguous_attention_strides(std::int64_t heads, std::int64_t seq_len,
                                              std::int64_t head_dim) {
  return AttentionStrides{heads * seq_len * head_dim, seq_len * head_dim, head_dim};
}

const char* kernel_isa_name(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::automatic:
      return "automatic";
    case KernelIsa::generic:
      return "generic";
    case KernelIsa::avx2:
      return "avx2";
    case KernelIsa::avx512:
      return "avx512";
  }
  return "unknown";
}

bool attention_flash_bf16_supported() {
#if PATCHBAY_KERNELS_X86_VARIANTS
  static const bool supported =
      cpu_supports(KernelIsa::avx512) && __builtin_cpu_supports("avx512bf16");
  return supported;
#else
  return false;
#endif
}

bool kernel_isa_supported(KernelIsa isa) { return cpu_supports(isa); }

KernelIsa attention_flash_resolved_isa() {
  static const KernelIsa resolved = cpu_supports(KernelIsa::avx512) ? KernelIsa::avx512
                                    : cpu_supports(KernelIsa::avx2) ? KernelIsa::avx2
                                                                    : KernelIsa::generic;
  return resolved;
}

std::string attention_params_error(const AttentionParams& p, AttentionPass pass) {
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.q_len < 1 || p.kv_len < 1 ||
      p.head_dim < 1) {
    return "attention shapes must all be >= 1; found batch " + num(p.batch) + ", heads " +
           num(p.heads) + ", kv_heads " + num(p.kv_heads) + ", q_len " + num(p.q_len) +
           ", kv_len " + num(p.kv_len) + ", head_dim " + num(p.head_dim);
  }
  if (p.heads % p.kv_heads != 0) {
    return "heads (" + num(p.heads) + ") must be a multiple of kv_heads (" + num(p.kv_heads) +
           ") for grouped-query attention";
  }
  if (!std::isfinite(p.scale)) return "scale must be finite (usually 1/sqrt(head_dim))";
  if (p.window < 0) {
    return "window must be >= 0 (0 = unlimited, else keys within window positions); found " +
           num(p.window);
  }
  if (p.alibi_slopes != nullptr) {
    for (std::int64_t h = 0; h < p.heads; ++h) {
      if (!std::isfinite(p.alibi_slopes[h])) {
        return "alibi_slopes[" + num(h) + "] must be finite; found " +
               std::to_string(p.alibi_slopes[h]);
      }
    }
  }
  if (std::string e = segment_ids_error(p); !e.empty()) return e;
  if (p.workspace != nullptr && reinterpret_cast<std::uintptr_t>(p.workspace) % 64 != 0)
    return "workspace must be 64-byte aligned (or null: the kernel allocates its own)";
  if (p.num_threads < 0)
    return "num_threads must be >= 0 (0 = OpenMP default); found " + num(p.num_threads);
  if (!cpu_supports(p.isa)) {
    return std::string("isa '") + kernel_isa_name(p.isa) +
           "' was forced but this CPU does not support it; use KernelIsa::automatic";
  }
  const bool bf16 = p.q_bf16 != nullptr;
  if (bf16) {
    if (std::string e = bf16_operands_error(p, pass); !e.empty()) return e;
  } else if (p.k_bf16 != nullptr || p.v_bf16 != nullptr || p.dout_bf16 != nullptr) {
    return "k_bf16 / v_bf16 / dout_bf16 are set but q_bf16 is null: set all of q_bf16, k_bf16, "
           "v_bf16 (and dout_bf16 for the backward) for bf16 operands, or none";
  }
  struct Operand {
    const char* name;
    const void* data;
    const AttentionStrides& strides;
  };
  const Operand forward_operands[] = {
      {bf16 ? "q_bf16" : "q", bf16 ? static_cast<const void*>(p.q_bf16) : p.q, p.q_strides},
      {bf16 ? "k_bf16" : "k", bf16 ? static_cast<const void*>(p.k_bf16) : p.k, p.k_strides},
      {bf16 ? "v_bf16" : "v", bf16 ? static_cast<const void*>(p.v_bf16) : p.v, p.v_strides},
      {"out", p.out, p.out_strides}};
  for (const Operand& o : forward_operands) {
    if (std::string e = operand_error(o.name, o.data, o.strides); !e.empty()) return e;
  }
  if (p.lse == nullptr) return "lse must not be null (forward writes it, backward reads it)";
  if (pass == AttentionPass::backward) {
    const Operand backward_operands[] = {
        {bf16 ? "dout_bf16" : "dout", bf16 ? static_cast<const void*>(p.dout_bf16) : p.dout,
         p.dout_strides},
        {"dq", p.dq, p.dq_strides},
        {"dk", p.dk, p.dk_strides},
        {"dv", p.dv, p.dv_strides}};
    for (const Operand& o : backward_operands) {
      if (std::string e = operand_error(o.name, o.data, o.strides); !e.empty()) return e;
    }
  }
  return {};
}

}  // namespace patchbay::kernels
