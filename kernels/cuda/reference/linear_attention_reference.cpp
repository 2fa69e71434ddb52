// CPU twin of the chunked causal product (linear_attention_reference.hpp): per row, chunks of
// kChunk steps of the sweep; scores = mask(A_c B_c^T), out = A_c S + scores C_c, S += B_c^T C_c,
// each sum in the kernel's order.
#include "patchbay/kernels/cuda/linear_attention_reference.hpp"

#include <algorithm>
#include <vector>

namespace patchbay::kernels::cuda {
namespace {

constexpr int64_t kChunk = 32;  // = kLinearChunk of linear_attention.hpp

}  // namespace

void causal_product_f32_reference(const float* a, const float* b, const float* c, float* out,
                                  int64_t rows, int64_t length, int64_t a_dim, int64_t c_dim,
                                  bool reverse) {
  std::vector<float> state(static_cast<size_t>(a_dim * c_dim));
  std::vector<float> scores(static_cast<size_t>(kChunk * kChunk));
  auto position = [&](int64_t t) { return reverse ? length - 1 - t : t; };
  for (int64_t r = 0; r < rows; ++r) {
    const float* ar = a + r * length * a_dim;
    const float* br = b + r * length * a_dim;
    const float* cr = c + r * length * c_dim;
    float* outr = out + r * length * c_dim;
    std::fill(state.begin(), state.end(), 0.0f);
    for (int64_t t0 = 0; t0 < length; t0 += kChunk) {
      const int64_t steps = std::min(kChunk, length - t0);
      for (int64_t l = 0; l < steps; ++l)
        for (int64_t j = 0; j <= l; ++j) {
          float s = 0.0f;
          for (int64_t e = 0; e < a_dim; ++e)
            s += ar[position(t0 + l) * a_dim + e] * br[position(t0 + j) * a_dim + e];
          scores[size_t(l * kChunk + j)] = s;
        }
      for (int64_t l = 0; l < steps; ++l)
        for (int64_t m = 0; m < c_dim; ++m) {
          float inter = 0.0f;
          for (int64_t e = 0; e < a_dim; ++e)
            inter += ar[position(t0 + l) * a_dim + e] * state[size_t(e * c_dim + m)];
          float intra = 0.0f;
          for (int64_t j = 0; j <= l; ++j)
            intra += scores[size_t(l * kChunk + j)] * cr[position(t0 + j) * c_dim + m];
          outr[position(t0 + l) * c_dim + m] = inter + intra;
        }
      for (int64_t e = 0; e < a_dim; ++e)
        for (int64_t m = 0; m < c_dim; ++m) {
          float s = 0.0f;
          for (int64_t l = 0; l < steps; ++l)
            s += br[position(t0 + l) * a_dim + e] * cr[position(t0 + l) * c_dim + m];
          state[size_t(e * c_dim + m)] += s;
        }
    }
  }
}

void causal_linear_attention_backward_f32_reference(const float* q, const float* k, const float* v,
                                                    const float* dout, float* dq, float* dk,
                                                    float* dv, int64_t rows, int64_t length,
                                                    int64_t key_dim, int64_t value_dim) {
  causal_product_f32_reference(dout, v, k, dq, rows, length, value_dim, key_dim, false);
  causal_product_f32_reference(k, q, dout, dv, rows, length, key_dim, value_dim, true);
  causal_product_f32_reference(v, dout, q, dk, rows, length, value_dim, key_dim, true);
}

}  // namespace patchbay::kernels::cuda
