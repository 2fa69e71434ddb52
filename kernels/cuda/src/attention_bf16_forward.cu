// bf16 tensor-core flash attention forward (attention_bf16.hpp); pieces and work split in
// attention_bf16_tiles.cuh, arithmetic in math/flash_bf16.hpp (shared with the CPU twin).
// Per key tile, each warp: S = Q_w K^T on tensor cores into shared f32; on CUDA cores, mask,
// scale, the online-softmax step per row (two lanes a row), P rounded to bf16 and the f32
// output accumulator rows rescaled; then O_w += P V on tensor cores (the accumulator lives in
// shared memory between tiles, since rescaling needs rows). A block visits the key tiles from
// its first row's segment start up to its last row (causality); the diagonal tile is masked.
#include <cmath>

#include "attention_bf16_tiles.cuh"
#include "patchbay/kernels/cuda/attention_bf16.hpp"

namespace patchbay::kernels::cuda {
namespace {

using namespace detail::flash;

template <int D>
constexpr int forward_shared_bytes() {
  return 3 * carved_bytes(Dims<D>::kTileElems * 2) +                   // Q, K, V tiles
         carved_bytes(kWarps * kFlashWarpRows * kScoreLd * 4) +        // S slices
         carved_bytes(kWarps * kFlashWarpRows * kProbLd * 2) +         // P slices
         carved_bytes(kWarps * kFlashWarpRows * Dims<D>::kOutLd * 4);  // O slices
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    attention_bf16_forward_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                  float* out, float* lse, int64_t steps, float scale,
                                  const int32_t* segments, int64_t heads) {
  constexpr int kLd = Dims<D>::kLd, kOutLd = Dims<D>::kOutLd;
  extern __shared__ __align__(128) unsigned char shared[];
  SharedCarver carve(shared);
  bf16* q_tile = carve.take<bf16>(Dims<D>::kTileElems);
  bf16* k_tile = carve.take<bf16>(Dims<D>::kTileElems);
  bf16* v_tile = carve.take<bf16>(Dims<D>::kTileElems);
  float* scores = carve.take<float>(kWarps * kFlashWarpRows * kScoreLd);
  bf16* probs = carve.take<bf16>(kWarps * kFlashWarpRows * kProbLd);
  float* accum = carve.take<float>(kWarps * kFlashWarpRows * kOutLd);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r = lane / 2, parity = lane % 2;  // this lane's row of the warp; its columns are
                                              // parity, parity + 2, ... (attention_bf16_tiles)
  float* s_w = scores + warp * kFlashWarpRows * kScoreLd;
  bf16* p_w = probs + warp * kFlashWarpRows * kProbLd;
  float* o_w = accum + warp * kFlashWarpRows * kOutLd;
  const int64_t head = int64_t(blockIdx.y) * steps * D;
  const int64_t first_row = heaviest_first_block() * kFlashRows;
  const int64_t query = first_row + warp * kFlashWarpRows + r;
  const int32_t* seg = segment_row(segments, heads, steps);
  const int64_t first_key = seg != nullptr && query < steps ? math::segment_begin(seg, query) : 0;
  const int64_t tile_begin =
      seg != nullptr ? math::segment_begin(seg, first_row) / kFlashTile * kFlashTile : 0;
  const int64_t last_row = min(first_row + kFlashRows, steps) - 1;

  load_rows<D>(q_tile, q + head, first_row, steps);
  for (int c = 0; c < D / 2; ++c) o_w[r * kOutLd + 2 * c + parity] = 0.0f;
  float running_max = -INFINITY, running_sum = 0.0f;  // same in both lanes of a row

  for (int64_t key0 = tile_begin; key0 <= last_row; key0 += kFlashTile) {
    __syncthreads();  // every warp is done with the previous K, V tiles
    load_rows<D>(k_tile, k + head, key0, steps);
    load_rows<D>(v_tile, v + head, key0, steps);
    __syncthreads();
    product_rows_by_rows_t<D>(q_tile + warp * kFlashWarpRows * kLd, k_tile, s_w);
    __syncwarp();
    float* s_row = s_w + r * kScoreLd + parity;
    float tile_max = -INFINITY;
    for (int c = 0; c < 64; c += 2) {
      const int64_t key = key0 + parity + c;
      const bool visible = math::flash_visible(query, key, first_key, steps);
      const float x = visible ? s_row[c] * scale : -INFINITY;
      s_row[c] = x;
      tile_max = fmaxf(tile_max, x);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const math::FlashStep step = math::flash_online_step(running_max, tile_max);
    float partial = 0.0f;
    bf16* p_row = p_w + r * kProbLd + parity;
    for (int c = 0; c < 64; c += 2) {
      const int64_t key = key0 + parity + c;
      const float p = math::flash_probability(s_row[c], step.max,
                                              math::flash_visible(query, key, first_key, steps));
      partial += p;
      p_row[c] = to_bf16(p);
    }
    partial += __shfl_xor_sync(0xffffffffu, partial, 1);
    running_sum = running_sum * step.correction + partial;
    running_max = step.max;
    float* o_row = o_w + r * kOutLd + parity;
    for (int c = 0; c < D; c += 2) o_row[c] *= step.correction;
    __syncwarp();
    FragC acc[D / 16];
#pragma unroll
    for (int n = 0; n < D / 16; ++n)
      wmma::load_matrix_sync(acc[n], o_w + n * 16, kOutLd, wmma::mem_row_major);
    accumulate_probs_by_rows<D>(acc, p_w, v_tile);
#pragma unroll
    for (int n = 0; n < D / 16; ++n)
      wmma::store_matrix_sync(o_w + n * 16, acc[n], kOutLd, wmma::mem_row_major);
    __syncwarp();
  }
  if (query >= steps) return;
  const float inverse_sum = 1.0f / running_sum;
  const float* o_row = o_w + r * kOutLd + parity;
  float* out_row = out + head + query * D + parity;
  for (int c = 0; c < D; c += 2) out_row[c] = o_row[c] * inverse_sum;
  if (parity == 0)
    lse[int64_t(blockIdx.y) * steps + query] = math::flash_lse(running_max, running_sum);
}

template <int D>
cudaError_t launch_forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, float* out,
                           float* lse, int64_t batch_heads, int64_t steps, float scale,
                           cudaStream_t stream, const int32_t* segments, int64_t heads) {
  constexpr int bytes = forward_shared_bytes<D>();
  if (const cudaError_t s = cudaFuncSetAttribute(
          attention_bf16_forward_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
      s != cudaSuccess)
    return s;
  const dim3 grid(static_cast<unsigned>((steps + kFlashRows - 1) / kFlashRows),
                  static_cast<unsigned>(batch_heads));
  attention_bf16_forward_kernel<D>
      <<<grid, kThreads, bytes, stream>>>(q, k, v, out, lse, steps, scale, segments, heads);
  return cudaGetLastError();
}

}  // namespace

cudaError_t causal_attention_bf16_forward(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                          float* out, float* lse, int64_t batch_heads,
                                          int64_t steps, int64_t head_dim, float scale,
                                          cudaStream_t stream, const int32_t* segments,
                                          int64_t heads) {
  if (batch_heads <= 0 || steps <= 0) return cudaSuccess;
  if (const cudaError_t s = detail::flash_bf16_check(batch_heads, head_dim, heads, {q, k, v});
      s != cudaSuccess)
    return s;
  if (head_dim == 64)
    return launch_forward<64>(q, k, v, out, lse, batch_heads, steps, scale, stream, segments,
                              heads);
  return launch_forward<128>(q, k, v, out, lse, batch_heads, steps, scale, stream, segments, heads);
}

}  // namespace patchbay::kernels::cuda
