// The device-side index check (index_checks.hpp): one block of kThreads threads; each thread
// keeps the lowest bad position and the count of its strided slice, a warp then a block
// reduction combines them, and thread 0 writes the record and the mean factors.
#include "patchbay/kernels/cuda/index_checks.hpp"

namespace patchbay::kernels::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

struct Scan {
  long long first_bad;  // lowest bad position, `count` when none
  long long counted;
};

__device__ Scan warp_reduce(Scan s) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const long long other_bad = __shfl_down_sync(0xffffffffu, s.first_bad, offset);
    const long long other_counted = __shfl_down_sync(0xffffffffu, s.counted, offset);
    s.first_bad = other_bad < s.first_bad ? other_bad : s.first_bad;
    s.counted += other_counted;
  }
  return s;
}

template <class Index>
__global__ void __launch_bounds__(kThreads)
    check_indices_kernel(const Index* values, int64_t count, math::IndexCheck check,
                         math::IndexErrorRecord* record, float* mean_factors) {
  Scan s{count, 0};
  for (int64_t i = threadIdx.x; i < count; i += kThreads) {
    const auto value = static_cast<int64_t>(values[i]);
    if (math::index_is_bad(value, check) && i < s.first_bad) s.first_bad = i;
    s.counted += math::index_is_counted(value, check) ? 1 : 0;
  }
  __shared__ Scan partial[kWarps];
  s = warp_reduce(s);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x >= 32) return;
  s = threadIdx.x < kWarps ? partial[threadIdx.x] : Scan{count, 0};
  s = warp_reduce(s);
  if (threadIdx.x != 0) return;
  if (s.first_bad < count)
    math::record_index_error(record, check, static_cast<int64_t>(values[s.first_bad]), s.first_bad,
                             count);
  if (mean_factors != nullptr) math::mean_factors_of_count(s.counted, mean_factors);
}

}  // namespace

template <class Index>
cudaError_t check_indices(const Index* values, int64_t count, const math::IndexCheck& check,
                          math::IndexErrorRecord* record, float* mean_factors,
                          cudaStream_t stream) {
  if (count == 0 && mean_factors == nullptr) return cudaSuccess;
  check_indices_kernel<Index>
      <<<1, kThreads, 0, stream>>>(values, count, check, record, mean_factors);
  return cudaGetLastError();
}

template cudaError_t check_indices<int32_t>(const int32_t*, int64_t, const math::IndexCheck&,
                                            math::IndexErrorRecord*, float*, cudaStream_t);
template cudaError_t check_indices<int64_t>(const int64_t*, int64_t, const math::IndexCheck&,
                                            math::IndexErrorRecord*, float*, cudaStream_t);

}  // namespace patchbay::kernels::cuda
