// The CUDA dispatch entries of causal_linear_attention and its backward
// (core/cuda/cuda_kernels_linear_attention.cpp) against the CPU kernels on a real GPU: forward
// and the gradients of q, k and v through autograd, at the shapes attention_linear and
// attention_performer make ([B, H, T, E] with E = head dim or the Performer's feature count),
// f32 with a tolerance for the two kernels' different summation orders. Skipped with the
// probe's reason without a GPU.
#include <doctest/doctest.h>

#include "cuda_op_check.hpp"
#include "engine/ops.hpp"
#include "engine/ops/causal_linear_attention.hpp"

namespace {

using namespace patchbay::engine;
using namespace patchbay::cuda_op_check;

}  // namespace

TEST_CASE("causal linear attention on the GPU: forward and gradients equal the CPU's") {
  if (!gpu_usable()) return;
  struct Case {
    Shape qk, v;
  };
  const Case cases[] = {{{2, 3, 33, 8}, {2, 3, 33, 5}},        // ragged: chunk + 1, odd dims
                        {{2, 4, 256, 64}, {2, 4, 256, 64}},    // attention_linear, head dim 64
                        {{1, 2, 200, 256}, {1, 2, 200, 64}}};  // Performer: 256 features
  uint64_t seed = 60;
  for (const auto& c : cases) {
    // Positive features, as the feature maps produce (elu + 1, exp of random projections).
    check_op(
        "causal_linear_attention " + shape_str(c.qk),
        {random_f32(c.qk, ++seed, 0.0, 0.5), random_f32(c.qk, ++seed, 0.0, 0.5),
         random_f32(c.v, ++seed)},
        [](auto& in) { return causal_linear_attention(in[0], in[1], in[2]); }, 1e-4, 1e-4);
  }
}
