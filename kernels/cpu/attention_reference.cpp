// Naive attention reference: full score matrix, double precision, straight from the formulas
// in attention_flash.hpp (causal mask, sliding window, ALiBi bias and packed segments applied per
// entry). Parallel over (batch, kv head) only so that the dk/dv sums over the query heads of a
// group stay sequential and race free. Speed is not a goal; clarity is.
#include "patchbay/kernels/attention_reference.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

namespace patchbay::kernels {
namespace {

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

std::size_t count(std::int64_t n) { return static_cast<std::size_t>(n); }

int thread_count(const AttentionParams& p) {
  return p.num_threads > 0 ? p.num_threads : omp_get_max_threads();
}

const float* row(const float* base, const AttentionStrides& s, std::int64_t b, std::int64_t h,
                 std::int64_t t) {
  return base + b * s.batch + h * s.head + t * s.seq;
}
float* row(float* base, const AttentionStrides& s, std::int64_t b, std::int64_t h, std::int64_t t) {
  return base + b * s.batch + h * s.head + t * s.seq;
}

// Absolute position of query i: the queries are the last Tq of the Tk positions.
std::int64_t position(const AttentionParams& p, std::int64_t i) { return i + (p.kv_len - p.q_len); }

bool visible(const AttentionParams& p, std::int64_t b, std::int64_t i, std::int64_t j) {
  const std::int64_t pos = position(p, i);
  if (p.segment_ids != nullptr &&
      p.segment_ids[b * p.kv_len + j] != p.segment_ids[b * p.kv_len + pos])
    return false;  // packed sequences: another segment
  if (p.causal && j > pos) return false;
  if (p.window > 0 && j <= pos - p.window) return false;
  if (p.window > 0 && !p.causal && j >= pos + p.window) return false;
  return true;
}

// ALiBi: -slope_h * |pos(i) - j| (0 without slopes).
double bias(const AttentionParams& p, std::int64_t h, std::int64_t i, std::int64_t j) {
  if (p.alibi_slopes == nullptr) return 0.0;
  return -double(p.alibi_slopes[h]) * double(std::llabs(position(p, i) - j));
}

// Fills probs[Tq*Tk] with P for (b, h) (0 on masked entries and on fully masked rows) and
// lse[Tq] with the row log-sum-exp (-inf for fully masked rows).
void probabilities(const AttentionParams& p, std::int64_t b, std::int64_t h, double* probs,
                   double* lse) {
  const std::int64_t hk = h / (p.heads / p.kv_heads);
  const std::int64_t tq = p.q_len, tk = p.kv_len, d = p.head_dim;
  for (std::int64_t i = 0; i < tq; ++i) {
    const float* qi = row(p.q, p.q_strides, b, h, i);
    double* prow = probs + i * tk;
    double row_max = kMinusInf;
    for (std::int64_t j = 0; j < tk; ++j) {
      if (!visible(p, b, i, j)) {
        prow[j] = kMinusInf;
        continue;
      }
      const float* kj = row(p.k, p.k_strides, b, hk, j);
      double dot = 0.0;
      for (std::int64_t x = 0; x < d; ++x) dot += double(qi[x]) * double(kj[x]);
      prow[j] = dot * double(p.scale) + bias(p, h, i, j);
      row_max = std::max(row_max, prow[j]);
    }
    if (row_max == kMinusInf) {  // no visible key: output 0, lse -inf
      std::fill(prow, prow + tk, 0.0);
      lse[i] = kMinusInf;
      continue;
    }
    double sum = 0.0;
    for (std::int64_t j = 0; j < tk; ++j) sum += std::exp(prow[j] - row_max);
    lse[i] = row_max + std::log(sum);
    for (std::int64_t j = 0; j < tk; ++j) prow[j] = std::exp(prow[j] - lse[i]);
  }
}

}  // namespace

std::size_t attention_reference_workspace_bytes(const AttentionParams& p, AttentionPass pass) {
  const auto threads = static_cast<std::size_t>(thread_count(p));
  const auto tq = static_cast<std::size_t>(p.q_len), tk = static_cast<std::size_t>(p.kv_len);
  const auto d = static_cast<std::size_t>(p.head_dim);
  // forward: probs[Tq*Tk] + lse[Tq] + acc[D]; backward adds dprobs[Tq*Tk], out[Tq*D], dk/dv[Tk*D].
  std::size_t per_thread = tq * tk + tq;
  per_thread += pass == AttentionPass::forward ? d : tq * tk + tq * d + 2 * tk * d + tq;
  return threads * per_thread * sizeof(double);
}

constexpr const char* kNoBf16Operands =
    "the reference reads f32 operands only: widen the bf16 values to f32 (exactly) and pass "
    "them as q, k, v, dout";

std::string attention_reference_forward(const AttentionParams& p) {
  // First: the reference's own limit holds on every CPU (the parameter check would name the
  // missing AVX512-BF16 instead on a CPU without it).
  if (p.q_bf16 != nullptr) return kNoBf16Operands;
  if (std::string e = attention_params_error(p, AttentionPass::forward); !e.empty()) return e;
  const std::int64_t group = p.heads / p.kv_heads;
  const std::int64_t tq = p.q_len, tk = p.kv_len, d = p.head_dim;
#pragma omp parallel num_threads(thread_count(p))
  {
    std::vector<double> probs(static_cast<std::size_t>(tq * tk)), lse(static_cast<std::size_t>(tq));
    std::vector<double> acc(static_cast<std::size_t>(d));
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t bh = 0; bh < p.batch * p.heads; ++bh) {
      const std::int64_t b = bh / p.heads, h = bh % p.heads, hk = h / group;
      probabilities(p, b, h, probs.data(), lse.data());
      for (std::int64_t i = 0; i < tq; ++i) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::int64_t j = 0; j < tk; ++j) {
          const double pij = probs[std::size_t(i * tk + j)];
          const float* vj = row(p.v, p.v_strides, b, hk, j);
          for (std::int64_t x = 0; x < d; ++x) acc[std::size_t(x)] += pij * double(vj[x]);
        }
        float* oi = row(p.out, p.out_strides, b, h, i);
        for (std::int64_t x = 0; x < d; ++x) oi[x] = float(acc[std::size_t(x)]);
        p.lse[(b * p.heads + h) * tq + i] = float(lse[std::size_t(i)]);
      }
    }
  }
  return {};
}

std::string attention_reference_backward(const AttentionParams& p) {
  // First: the reference's own limit holds on every CPU (the parameter check would name the
  // missing AVX512-BF16 instead on a CPU without it).
  if (p.q_bf16 != nullptr) return kNoBf16Operands;
  if (std::string e = attention_params_error(p, AttentionPass::backward); !e.empty()) return e;
  const std::int64_t group = p.heads / p.kv_heads;
  const std::int64_t tq = p.q_len, tk = p.kv_len, d = p.head_dim;
  const double scale = p.scale;
#pragma omp parallel num_threads(thread_count(p))
  {
    std::vector<double> probs(count(tq * tk)), dprobs(count(tq * tk));
    std::vector<double> lse(count(tq)), out(count(tq * d)), delta(count(tq));
    std::vector<double> dk(count(tk * d)), dv(count(tk * d));
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t bhk = 0; bhk < p.batch * p.kv_heads; ++bhk) {
      const std::int64_t b = bhk / p.kv_heads, hk = bhk % p.kv_heads;
      std::fill(dk.begin(), dk.end(), 0.0);
      std::fill(dv.begin(), dv.end(), 0.0);
      for (std::int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        probabilities(p, b, h, probs.data(), lse.data());
        // out = P V and delta_i = <dout_i, out_i>, both recomputed in double.
        std::fill(out.begin(), out.end(), 0.0);
        for (std::int64_t i = 0; i < tq; ++i) {
          double* oi = out.data() + i * d;
          for (std::int64_t j = 0; j < tk; ++j) {
            const double pij = probs[std::size_t(i * tk + j)];
            const float* vj = row(p.v, p.v_strides, b, hk, j);
            for (std::int64_t x = 0; x < d; ++x) oi[x] += pij * double(vj[x]);
          }
          const float* doi = row(p.dout, p.dout_strides, b, h, i);
          delta[std::size_t(i)] = 0.0;
          for (std::int64_t x = 0; x < d; ++x) delta[std::size_t(i)] += oi[x] * double(doi[x]);
        }
        // dP = dout V^T; dS = P * (dP - delta) stored over dprobs.
        for (std::int64_t i = 0; i < tq; ++i) {
          const float* doi = row(p.dout, p.dout_strides, b, h, i);
          for (std::int64_t j = 0; j < tk; ++j) {
            const float* vj = row(p.v, p.v_strides, b, hk, j);
            double dp = 0.0;
            for (std::int64_t x = 0; x < d; ++x) dp += double(doi[x]) * double(vj[x]);
            const double pij = probs[std::size_t(i * tk + j)];
            dprobs[std::size_t(i * tk + j)] = pij * (dp - delta[std::size_t(i)]);
          }
        }
        // dq = scale dS K (written), dk += scale dS^T Q, dv += P^T dout.
        for (std::int64_t i = 0; i < tq; ++i) {
          const float* qi = row(p.q, p.q_strides, b, h, i);
          const float* doi = row(p.dout, p.dout_strides, b, h, i);
          float* dqi = row(p.dq, p.dq_strides, b, h, i);
          double* dq_row = out.data();  // out[0..D) is free again once delta is known
          std::fill(dq_row, dq_row + d, 0.0);
          for (std::int64_t j = 0; j < tk; ++j) {
            const double ds = dprobs[std::size_t(i * tk + j)], pij = probs[std::size_t(i * tk + j)];
            const float* kj = row(p.k, p.k_strides, b, hk, j);
            for (std::int64_t x = 0; x < d; ++x) {
              dq_row[x] += ds * double(kj[x]);
              dk[std::size_t(j * d + x)] += scale * ds * double(qi[x]);
              dv[std::size_t(j * d + x)] += pij * double(doi[x]);
            }
          }
          for (std::int64_t x = 0; x < d; ++x) dqi[x] = float(scale * dq_row[x]);
        }
      }
      for (std::int64_t j = 0; j < tk; ++j) {
        float* dkj = row(p.dk, p.dk_strides, b, hk, j);
        float* dvj = row(p.dv, p.dv_strides, b, hk, j);
        for (std::int64_t x = 0; x < d; ++x) {
          dkj[x] = float(dk[std::size_t(j * d + x)]);
          dvj[x] = float(dv[std::size_t(j * d + x)]);
        }
      }
    }
  }
  return {};
}

}  // namespace patchbay::kernels
