// Embedding gather kernels and their references (see embedding.hpp).
//
// Forward: rows are independent, so threads split the tokens; each row copy is a
// contiguous memcpy of dim floats.
// Backward: a parallel scatter-add would race on repeated ids. Instead each thread owns a
// contiguous band of vocabulary rows and scans all ids, adding only the tokens whose id
// falls in its band. Every thread reads the ids (count integers, cheap next to count*dim
// floats of gradient), writes are race-free, and each row sums in token order, so the
// result is bit-identical for any thread count.
#include "patchbay/kernels/embedding.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>

namespace patchbay::kernels {

template <class Index>
void embedding_forward(const float* weights, int64_t vocab, int64_t dim, const Index* ids,
                       int64_t count, float* out) {
  (void)vocab;
  const auto row_bytes = static_cast<size_t>(dim) * sizeof(float);
#pragma omp parallel for schedule(static) if (count * dim > (1 << 15))
  for (int64_t t = 0; t < count; ++t) {
    std::memcpy(out + t * dim, weights + static_cast<int64_t>(ids[t]) * dim, row_bytes);
  }
}

template <class Index>
void embedding_backward(const float* grad_out, const Index* ids, int64_t count, int64_t vocab,
                        int64_t dim, float* grad_weights) {
  const bool parallel = count * dim > (1 << 15);
#pragma omp parallel if (parallel)
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t thread = omp_get_thread_num();
    const int64_t band = (vocab + threads - 1) / threads;
    const int64_t band_begin = std::min(vocab, thread * band);
    const int64_t band_end = std::min(vocab, band_begin + band);
    for (int64_t t = 0; t < count; ++t) {
      const auto id = static_cast<int64_t>(ids[t]);
      if (id < band_begin || id >= band_end) continue;
      float* dst = grad_weights + id * dim;
      const float* src = grad_out + t * dim;
#pragma omp simd
      for (int64_t d = 0; d < dim; ++d) dst[d] += src[d];
    }
  }
}

template <class Index>
void embedding_forward_reference(const float* weights, int64_t vocab, int64_t dim, const Index* ids,
                                 int64_t count, float* out) {
  (void)vocab;
  for (int64_t t = 0; t < count; ++t)
    for (int64_t d = 0; d < dim; ++d) out[t * dim + d] = weights[int64_t(ids[t]) * dim + d];
}

template <class Index>
void embedding_backward_reference(const float* grad_out, const Index* ids, int64_t count,
                                  int64_t vocab, int64_t dim, float* grad_weights) {
  (void)vocab;
  for (int64_t t = 0; t < count; ++t)
    for (int64_t d = 0; d < dim; ++d)
      grad_weights[int64_t(ids[t]) * dim + d] += grad_out[t * dim + d];
}

#define PATCHBAY_INSTANTIATE_EMBEDDING(Index)                                                     \
  template void embedding_forward<Index>(const float*, int64_t, int64_t, const Index*, int64_t,   \
                                         float*);                                                 \
  template void embedding_backward<Index>(const float*, const Index*, int64_t, int64_t, int64_t,  \
                                          float*);                                                \
  template void embedding_forward_reference<Index>(const float*, int64_t, int64_t, const Index*,  \
                                                   int64_t, float*);                              \
  template void embedding_backward_reference<Index>(const float*, const Index*, int64_t, int64_t, \
                                                    int64_t, float*);
PATCHBAY_INSTANTIATE_EMBEDDING(int32_t)
PATCHBAY_INSTANTIATE_EMBEDDING(int64_t)
#undef PATCHBAY_INSTANTIATE_EMBEDDING

}  // namespace patchbay::kernels
