// Plain references of sorted-chunk attention (sorted_chunk_attention.hpp): the definition pair
// by pair, in double: every query slot's window and mask, its softmax, the occurrences of a
// position combined by their log-sum-exp; the backward from the combined softmax, p = exp(score
// - lse_i), dS = p (dout_i . v_j - dout_i . out_i).
// bf16 operands (s.bf16): the same over bf16-rounded q, k, v and dout, with the kernel's rounding
// points written out plainly: a slot's weight exp(score - its max) rounded where it multiplies
// v (its sum unrounded), and in the backward p rounded where it multiplies dout and dS where it
// multiplies q and k.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "patchbay/kernels/bf16_rounding.hpp"
#include "patchbay/kernels/sorted_chunk_attention.hpp"

namespace patchbay::kernels {
namespace {

// x[0, n) as the kernel reads it: rounded to bf16 when bf16, else as is.
std::vector<float> operand(const float* x, std::int64_t n, bool bf16) {
  std::vector<float> out(x, x + n);
  if (bf16)
    for (float& e : out) e = round_to_bf16(e);
  return out;
}

// A product factor as the kernel reads it.
double factor(double x, bool bf16) { return bf16 ? double(round_to_bf16(float(x))) : x; }

// One row's plan and rows, with the visible pairs of every query slot.
struct ReferenceRow {
  const SortedChunkAttentionShape& s;
  const float *q, *k, *v;
  const std::int32_t *position, *group;
  std::int64_t rounds = 0;
  std::vector<std::vector<std::int64_t>> occurrence;  // [T] -> slots

  ReferenceRow(const SortedChunkAttentionShape& shape, const float* q_, const float* k_,
               const float* v_, const std::int32_t* position_, const std::int32_t* group_)
      : s(shape), q(q_), k(k_), v(v_), position(position_), group(group_) {
    occurrence.resize(std::size_t(s.length));
    for (std::int64_t slot = 0; slot < s.slots; ++slot)
      if (position[slot] >= 0) occurrence[std::size_t(position[slot])].push_back(slot);
    rounds = s.length > 0 ? std::int64_t(occurrence[0].size()) : 0;
  }

  std::int64_t count(std::int64_t i, std::int64_t j) const {
    std::int64_t n = 0;
    for (std::int64_t r = 0; r < rounds; ++r) {
      const std::int64_t si = occurrence[std::size_t(i)][std::size_t(r)];
      const std::int64_t sj = occurrence[std::size_t(j)][std::size_t(r)];
      const std::int64_t ci = si / s.chunk_len, cj = sj / s.chunk_len;
      if (group[si] == group[sj] && (cj == ci || cj + 1 == ci)) ++n;
    }
    return n;
  }

  double dot(const float* a, const float* b) const {
    double sum = 0;
    for (std::int64_t e = 0; e < s.head_dim; ++e) sum += double(a[e]) * double(b[e]);
    return sum;
  }

  // Calls visit(j, score) for every visible key of query slot `slot` (position i >= 0).
  template <class Visit>
  void pairs(std::int64_t slot, const Visit& visit) const {
    const std::int64_t c = s.chunk_len, s0 = slot / c * c;
    const std::int64_t i = position[slot];
    const bool previous =
        s0 > 0 && position[s0 - c] >= 0 && position[s0] >= 0 && group[s0 - c] == group[s0];
    for (std::int64_t u = previous ? s0 - c : s0; u < s0 + c; ++u) {
      const std::int64_t j = position[u];
      if (j < 0 || group[u] != group[slot] || (s.causal && j > i)) continue;
      double score = double(s.scale) * dot(q + i * s.head_dim, k + j * s.head_dim);
      if (j == i)
        score += s.self_bias;
      else if (s.dedup && rounds > 1)
        score -= std::log(double(count(i, j)));
      visit(j, score);
    }
  }

  // out [T][D] and lse [T] in double.
  void forward(std::vector<double>& out, std::vector<double>& lse) const {
    const std::int64_t d = s.head_dim;
    out.assign(std::size_t(s.length * d), 0.0);
    lse.assign(std::size_t(s.length), -std::numeric_limits<double>::infinity());
    for (std::int64_t i = 0; i < s.length; ++i) {
      std::vector<double> slot_lse;
      std::vector<std::vector<double>> slot_out;
      for (std::int64_t slot : occurrence[std::size_t(i)]) {
        double mx = -std::numeric_limits<double>::infinity();
        pairs(slot, [&](std::int64_t, double score) { mx = std::max(mx, score); });
        double sum = 0;
        std::vector<double> o(std::size_t(d), 0.0);
        pairs(slot, [&](std::int64_t j, double score) {
          const double w = std::exp(score - mx), w_product = factor(w, s.bf16);
          sum += w;
          for (std::int64_t e = 0; e < d; ++e) o[std::size_t(e)] += w_product * v[j * d + e];
        });
        for (double& x : o) x /= sum;
        slot_lse.push_back(mx + std::log(sum));
        slot_out.push_back(o);
      }
      if (slot_lse.empty()) continue;
      double mx = -std::numeric_limits<double>::infinity();
      for (double l : slot_lse) mx = std::max(mx, l);
      double total = 0;
      for (double l : slot_lse) total += std::exp(l - mx);
      lse[std::size_t(i)] = mx + std::log(total);
      for (std::size_t n = 0; n < slot_lse.size(); ++n) {
        const double w = std::exp(slot_lse[n] - lse[std::size_t(i)]);
        for (std::int64_t e = 0; e < d; ++e)
          out[std::size_t(i * d + e)] += w * slot_out[n][std::size_t(e)];
      }
    }
  }
};

}  // namespace

void sorted_chunk_attention_reference_forward(const SortedChunkAttentionShape& s, const float* q,
                                              const float* k, const float* v,
                                              const std::int32_t* slot_position,
                                              const std::int32_t* slot_group, float* out,
                                              float* lse) {
  const std::int64_t td = s.length * s.head_dim;
  for (std::int64_t r = 0; r < s.rows; ++r) {
    const std::vector<float> qr = operand(q + r * td, td, s.bf16),
                             kr = operand(k + r * td, td, s.bf16),
                             vr = operand(v + r * td, td, s.bf16);
    const ReferenceRow row(s, qr.data(), kr.data(), vr.data(), slot_position + r * s.slots,
                           slot_group + r * s.slots);
    std::vector<double> o, l;
    row.forward(o, l);
    for (std::int64_t n = 0; n < td; ++n) out[r * td + n] = float(o[std::size_t(n)]);
    for (std::int64_t t = 0; t < s.length; ++t) lse[r * s.length + t] = float(l[std::size_t(t)]);
  }
}

void sorted_chunk_attention_reference_backward(const SortedChunkAttentionShape& s, const float* q,
                                               const float* k, const float* v,
                                               const std::int32_t* slot_position,
                                               const std::int32_t* slot_group, const float* dout,
                                               float* dq, float* dk, float* dv) {
  const std::int64_t td = s.length * s.head_dim, d = s.head_dim;
  for (std::int64_t r = 0; r < s.rows; ++r) {
    const std::vector<float> qr = operand(q + r * td, td, s.bf16),
                             kr = operand(k + r * td, td, s.bf16),
                             vr = operand(v + r * td, td, s.bf16),
                             gr = operand(dout + r * td, td, s.bf16);
    const ReferenceRow row(s, qr.data(), kr.data(), vr.data(), slot_position + r * s.slots,
                           slot_group + r * s.slots);
    std::vector<double> o, l;
    row.forward(o, l);
    std::vector<double> gq(std::size_t(td), 0.0), gk(gq), gv(gq);
    const float* g = gr.data();
    for (std::int64_t i = 0; i < s.length; ++i) {
      double delta = 0;
      for (std::int64_t e = 0; e < d; ++e)
        delta += double(g[i * d + e]) * o[std::size_t(i * d + e)];
      for (std::int64_t slot : row.occurrence[std::size_t(i)]) {
        row.pairs(slot, [&](std::int64_t j, double score) {
          const double p = std::exp(score - l[std::size_t(i)]);
          const double dp = row.dot(g + i * d, row.v + j * d);
          const double ds = factor(p * (dp - delta), s.bf16) * double(s.scale);
          const double p_product = factor(p, s.bf16);
          for (std::int64_t e = 0; e < d; ++e) {
            gv[std::size_t(j * d + e)] += p_product * g[i * d + e];
            gq[std::size_t(i * d + e)] += ds * row.k[j * d + e];
            gk[std::size_t(j * d + e)] += ds * row.q[i * d + e];
          }
        });
      }
    }
    for (std::int64_t n = 0; n < td; ++n) {
      dq[r * td + n] = float(gq[std::size_t(n)]);
      dk[r * td + n] = float(gk[std::size_t(n)]);
      dv[r * td + n] = float(gv[std::size_t(n)]);
    }
  }
}

}  // namespace patchbay::kernels
