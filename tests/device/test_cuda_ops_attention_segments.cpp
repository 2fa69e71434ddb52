// Packed segment ids in the CUDA attention kernels (core/cuda/cuda_kernels_attention.cpp):
// the tiled causal kernels and the general ones (grouped KV heads, a window, bidirectional, a
// KV cache) against the CPU kernel's segment masks, forward and backward through autograd.
// Segments of lengths 1 to ~70, so tiles hold several segments and segments span tiles.
// Skipped with the probe's reason without a GPU.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "cuda_op_check.hpp"
#include "engine/ops.hpp"

namespace {

using namespace patchbay::engine;
using namespace patchbay::cuda_op_check;

// Non-decreasing ids [batch, length] with runs of 1..max_run positions.
Tensor packed_segments(int64_t batch, int64_t length, int max_run, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<int64_t> ids(static_cast<size_t>(batch * length));
  for (int64_t b = 0; b < batch; ++b) {
    int64_t id = 0, left = 1 + int64_t(random() % uint64_t(max_run));
    for (int64_t j = 0; j < length; ++j, --left) {
      if (left == 0) {
        ++id;
        left = 1 + int64_t(random() % uint64_t(max_run));
      }
      ids[size_t(b * length + j)] = id;
    }
  }
  return Tensor::from_data(ids.data(), {batch, length}, DType::kI64);
}

void check_segmented(const std::string& what, const Shape& q_shape, const Shape& kv_shape,
                     AttentionOptions options, bool ids_on_gpu, uint64_t seed) {
  const Tensor ids = options.segment_ids;
  check_op(
      what,
      {random_f32(q_shape, seed), random_f32(kv_shape, seed + 1), random_f32(kv_shape, seed + 2)},
      [options, ids, ids_on_gpu](auto& in) {
        AttentionOptions o = options;
        if (ids_on_gpu && in[0].device() == kGpu) o.segment_ids = ids.to(kGpu);
        return scaled_dot_product_attention(in[0], in[1], in[2], o);
      },
      1e-4, 1e-5);
}

}  // namespace

TEST_CASE("attention with packed segments on the GPU equals the CPU kernel's masks") {
  if (!gpu_usable()) return;
  AttentionOptions causal;
  causal.causal = true;
  causal.segment_ids = packed_segments(2, 200, 70, 1);
  check_segmented("tiled causal kernel, D = 64", {2, 4, 200, 64}, {2, 4, 200, 64}, causal, false,
                  10);
  causal.segment_ids = packed_segments(1, 130, 5, 2);
  check_segmented("tiled causal kernel, D = 128, short segments, ids on the GPU", {1, 2, 130, 128},
                  {1, 2, 130, 128}, causal, true, 20);
  AttentionOptions window = causal;
  window.window = 16;
  window.segment_ids = packed_segments(2, 90, 40, 3);
  check_segmented("general kernel: grouped KV heads and a window", {2, 4, 90, 48}, {2, 2, 90, 48},
                  window, false, 30);
  AttentionOptions both_ways;
  both_ways.segment_ids = packed_segments(2, 77, 30, 4);
  check_segmented("general kernel: bidirectional", {2, 2, 77, 32}, {2, 2, 77, 32}, both_ways, false,
                  40);
  AttentionOptions cache = causal;
  cache.segment_ids = packed_segments(2, 40, 12, 5);
  check_segmented("general kernel: 5 queries at the end of 40 keys", {2, 2, 5, 64}, {2, 2, 40, 64},
                  cache, false, 50);
}

TEST_CASE("attention on the GPU refuses decreasing segment ids with the CPU's words") {
  if (!gpu_usable()) return;
  AttentionOptions o;
  o.causal = true;
  const std::vector<int64_t> ids = {0, 0, 1, 0};
  o.segment_ids = Tensor::from_data(ids.data(), {1, 4}, DType::kI64);
  const Tensor x = random_f32({1, 1, 4, 32}, 60).to(kGpu);
  CHECK_THROWS_WITH_AS(scaled_dot_product_attention(x, x, x, o),
                       doctest::Contains("non-decreasing"), patchbay::Error);
}
