// The chunked causal linear attention kernels (causal_linear_attention.hpp): validation of the
// forced code path, the ISA dispatch, one scratch block per thread and OpenMP over the rows.
// The products themselves are the chunk kernels of causal_linear_chunks_body.inc (one build per
// ISA), described in causal_linear_chunks.hpp. With bf16 operands each thread rounds its row's
// q, k, v (and dout) into a buffer of its own (T (2 E + 2 M) floats) before the row runs.
#include "patchbay/kernels/causal_linear_attention.hpp"

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "causal_linear_chunks.hpp"

namespace patchbay::kernels {
namespace {

namespace lc = linear_chunks;

std::int64_t padded(std::int64_t x) { return (x + lc::kStrip - 1) / lc::kStrip * lc::kStrip; }

// Floats of one thread's ChunkScratch (every part a multiple of 16 floats).
std::int64_t scratch_floats(std::int64_t e_dim, std::int64_t m_dim) {
  const std::int64_t ep = padded(e_dim), mp = padded(m_dim), c = lc::kChunk;
  return ep * c + mp * c + 2 * c * ep + 2 * c * mp + 2 * c * c + c * ep + c * mp + 3 * ep * mp;
}

lc::ChunkScratch carve(float* base, std::int64_t e_dim, std::int64_t m_dim) {
  const std::int64_t ep = padded(e_dim), mp = padded(m_dim), c = lc::kChunk;
  auto take = [&base](std::int64_t n) {
    float* p = base;
    base += n;
    return p;
  };
  lc::ChunkScratch s{};
  s.k_t = take(ep * c);
  s.v_t = take(mp * c);
  s.q_pad = take(c * ep);
  s.k_pad = take(c * ep);
  s.v_pad = take(c * mp);
  s.do_pad = take(c * mp);
  s.scores = take(c * c);
  s.grads = take(c * c);
  s.out_e = take(c * ep);
  s.out_m = take(c * mp);
  s.state = take(ep * mp);
  s.state_t = take(mp * ep);
  s.state_b = take(ep * mp);
  return s;
}

lc::ChunkKernels kernels_for(KernelIsa isa) {
  if (isa == KernelIsa::automatic) isa = attention_flash_resolved_isa();
  switch (isa) {
#if PATCHBAY_KERNELS_X86_VARIANTS
    case KernelIsa::avx512:
      return lc::chunk_kernels_avx512();
    case KernelIsa::avx2:
      return lc::chunk_kernels_avx2();
#endif
    default:
      return lc::chunk_kernels_generic();
  }
}

bool big_enough(const CausalLinearAttentionShape& s) {
  return s.rows > 1 && s.rows * s.length * s.key_dim * s.value_dim > (1 << 14);
}

void check(const CausalLinearAttentionShape& s) {
  if (const std::string e = causal_linear_attention_error(s); !e.empty())
    throw std::invalid_argument(e);
}

// With bf16 operands: p's inputs replaced by rounded copies in `inputs` ([T][2 E + 2 M]), made
// by the ISA build's vector rounding (a scalar loop here cost a third of the forward at E 64).
void round_inputs(const lc::ChunkKernels& kernels, lc::RowProblem& p, std::vector<float>& inputs) {
  const std::int64_t qk = p.length * p.key_dim, vo = p.length * p.value_dim;
  inputs.resize(static_cast<std::size_t>(2 * qk + 2 * vo));
  float* base = inputs.data();
  auto rounded = [&](const float* src, std::int64_t n, float* dst) -> const float* {
    if (src == nullptr) return nullptr;  // an input the pass does not read
    kernels.round_bf16(src, n, dst);
    return dst;
  };
  p.q = rounded(p.q, qk, base);
  p.k = rounded(p.k, qk, base + qk);
  p.v = rounded(p.v, vo, base + 2 * qk);
  p.dout = rounded(p.dout, vo, base + 2 * qk + vo);
}

// Runs the forward or backward pass of `kernels` on every row, rows in parallel.
template <class Fill>
void run_rows(const CausalLinearAttentionShape& s, const lc::ChunkKernels& kernels, bool backward,
              const Fill& fill) {
  const std::int64_t floats = scratch_floats(s.key_dim, s.value_dim);
  const auto pass = backward ? kernels.backward_row : kernels.forward_row;
#pragma omp parallel if (big_enough(s))
  {
    std::vector<float> scratch(static_cast<std::size_t>(floats)), inputs;
    const lc::ChunkScratch chunk_scratch = carve(scratch.data(), s.key_dim, s.value_dim);
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < s.rows; ++r) {
      lc::RowProblem p;
      p.length = s.length;
      p.key_dim = s.key_dim;
      p.value_dim = s.value_dim;
      p.bf16 = s.bf16;
      fill(r, p);
      if (s.bf16) round_inputs(kernels, p, inputs);
      pass(p, chunk_scratch);
    }
  }
}

}  // namespace

std::string causal_linear_attention_error(const CausalLinearAttentionShape& s) {
  if (s.rows < 0 || s.length < 0 || s.key_dim < 1 || s.value_dim < 1)
    return "causal linear attention expects rows >= 0, length >= 0, key_dim >= 1 and value_dim >= "
           "1; found rows " +
           std::to_string(s.rows) + ", length " + std::to_string(s.length) + ", key_dim " +
           std::to_string(s.key_dim) + ", value_dim " + std::to_string(s.value_dim);
  if (!kernel_isa_supported(s.isa))
    return std::string("causal linear attention: isa '") + kernel_isa_name(s.isa) +
           "' was forced but this CPU does not support it; use KernelIsa::automatic";
  return {};
}

void causal_linear_attention_forward(const CausalLinearAttentionShape& s, const float* q,
                                     const float* k, const float* v, float* out) {
  check(s);
  const std::int64_t qk = s.length * s.key_dim, vo = s.length * s.value_dim;
  run_rows(s, kernels_for(s.isa), false, [&](std::int64_t r, lc::RowProblem& p) {
    p.q = q + r * qk;
    p.k = k + r * qk;
    p.v = v + r * vo;
    p.out = out + r * vo;
  });
}

void causal_linear_attention_backward(const CausalLinearAttentionShape& s, const float* q,
                                      const float* k, const float* v, const float* dout, float* dq,
                                      float* dk, float* dv) {
  check(s);
  const std::int64_t qk = s.length * s.key_dim, vo = s.length * s.value_dim;
  run_rows(s, kernels_for(s.isa), true, [&](std::int64_t r, lc::RowProblem& p) {
    p.q = q + r * qk;
    p.k = k + r * qk;
    p.v = v + r * vo;
    p.dout = dout + r * vo;
    p.dq = dq + r * qk;
    p.dk = dk + r * qk;
    p.dv = dv + r * vo;
  });
}

}  // namespace patchbay::kernels
