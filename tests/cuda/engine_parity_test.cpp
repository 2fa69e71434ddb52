// CI test that the CPU twins of kernels/cuda compute what the CPU engine computes, where the
// GPU path must reproduce the engine's numbers: the random fills (so CPU and GPU runs start
// from the same initial weights) and the f32 -> bf16 rounding. Built with the engine (main
// project only); with the GPU tests (kernel vs twin) this closes the chain kernel = engine.
#include <doctest.h>

#include <cstring>
#include <random>
#include <vector>

#include "engine/dtype.hpp"
#include "engine/generator.hpp"
#include "engine/ops.hpp"
#include "patchbay/kernels/cuda/math/bf16.hpp"
#include "patchbay/kernels/cuda/random_reduce_rows_reference.hpp"

namespace engine = patchbay::engine;
namespace cuda = patchbay::kernels::cuda;

TEST_CASE(
    "random fills: the twin's Philox layout equals the engine's randn and uniform, bit for bit") {
  engine::Generator generator(987654321);
  (void)engine::uniform({13}, generator);  // advance the counter: a fill that starts mid-stream
  const uint64_t first_block = generator.offset();
  const engine::Tensor normal = engine::randn({1001}, generator);
  const uint64_t uniform_block = generator.offset();
  const engine::Tensor uniform = engine::uniform({777}, generator, -0.5, 2.0);

  std::vector<float> expected_normal(1001), expected_uniform(777);
  cuda::random_fill_f32_reference(expected_normal.data(), 1001, first_block, generator.seed(), true,
                                  0.0, 1.0);
  cuda::random_fill_f32_reference(expected_uniform.data(), 777, uniform_block, generator.seed(),
                                  false, -0.5, 2.0);
  CHECK(std::memcmp(normal.data<float>(), expected_normal.data(), 1001 * sizeof(float)) == 0);
  CHECK(std::memcmp(uniform.data<float>(), expected_uniform.data(), 777 * sizeof(float)) == 0);
}

TEST_CASE("bf16 rounding: the math header equals the engine's f32_to_bf16 on random patterns") {
  std::mt19937 bits(5);
  for (int i = 0; i < 100000; ++i) {
    const uint32_t pattern = bits();
    float value;
    std::memcpy(&value, &pattern, sizeof value);
    REQUIRE(cuda::math::bf16_from_float(value) == engine::f32_to_bf16(value));
  }
}
