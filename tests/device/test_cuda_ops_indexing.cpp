// The CUDA dispatch entries of gather, scatter_add, sort, argsort and top-k
// (core/cuda/cuda_kernels_indexing.cpp) against the CPU kernels on a real GPU, forward and
// backward through autograd, bit for bit: scatter_add's sums come in the CPU's order and ties
// in sort / top-k in the CPU's order (lower position first, NaN past +inf, -0 equal to +0).
// An out-of-range index is refused on the GPU with the CPU's words. Without a usable GPU every
// case returns at once and says the GPU checks were skipped.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "cuda_op_check.hpp"
#include "engine/ops.hpp"
#include "engine/ops_indexing.hpp"

namespace {

using namespace patchbay::engine;
using namespace patchbay::cuda_op_check;

// Random ids in [0, limit) of the given integer dtype.
Tensor random_index(const Shape& shape, int64_t limit, DType dtype, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<int64_t> pick(0, limit - 1);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = pick(random);
  return Tensor::from_data(ids.data(), shape, DType::kI64).to(dtype);
}

// Many ties and every special value the order must place.
Tensor tie_heavy(const Shape& shape, uint64_t seed) {
  const float pool[] = {-1.5f, -0.0f, 0.0f, 1.0f, 2.5f, INFINITY, -INFINITY, NAN, 1e-30f, 7.0f};
  std::mt19937_64 random(seed);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> values(static_cast<size_t>(n));
  for (auto& v : values) v = pool[random() % 10];
  return Tensor::from_vector(values, shape);
}

void check_same_indices(const Tensor& gpu, const Tensor& cpu_indices, const std::string& what) {
  CAPTURE(what);
  const Tensor host = gpu.to(cpu()).contiguous();
  const Tensor want = cpu_indices.contiguous();
  REQUIRE(host.shape() == want.shape());
  CHECK(std::memcmp(host.data<int64_t>(), want.data<int64_t>(),
                    static_cast<size_t>(want.numel()) * sizeof(int64_t)) == 0);
}

}  // namespace

TEST_CASE("gather and scatter_add on the GPU: the CPU's bits, forward and backward") {
  if (!gpu_usable()) return;
  for (const DType index_dtype : {DType::kI32, DType::kI64}) {
    const Tensor input = random_f32({6, 40, 5}, 21);
    check_op(
        "gather along dim 1", {input, random_index({4, 300, 5}, 40, index_dtype, 22)},
        [](auto& in) { return gather(in[0], 1, in[1]); }, 0, 0);
    check_op(
        "gather along the last dim", {input, random_index({6, 40, 9}, 5, index_dtype, 23)},
        [](auto& in) { return gather(in[0], -1, in[1]); }, 0, 0);
    // Hundreds of additions per slot, in magnitudes where another order changes the bits.
    check_op(
        "scatter_add along dim 0 (MoE combine shape)",
        {random_f32({16, 64}, 24), random_index({512, 64}, 16, index_dtype, 25),
         random_f32({512, 64}, 26, -1e3, 1e3)},
        [](auto& in) { return scatter_add(in[0], 0, in[1], in[2]); }, 0, 0);
    check_op(
        "scatter_add along dim 1, src larger than the index",
        {random_f32({3, 7, 4}, 27), random_index({2, 50, 4}, 7, index_dtype, 28),
         random_f32({3, 51, 4}, 29)},
        [](auto& in) { return scatter_add(in[0], 1, in[1], in[2]); }, 0, 0);
  }
}

TEST_CASE("gather and scatter_add on the GPU record an out-of-range index for the next read") {
  if (!gpu_usable()) return;
  const Tensor input = random_f32({4, 3}, 31).to(kGpu);
  const std::vector<int64_t> ids = {0, 2, 7, 1};
  const Tensor index = Tensor::from_data(ids.data(), {4, 1}, DType::kI64).to(kGpu);
  Tensor gathered;
  CHECK_NOTHROW(gathered = gather(input, 1, index));  // no wait for the check
  CHECK(message_of_next_read(gathered).find("gather: index value 7 at flat position 2") !=
        std::string::npos);
  Tensor scattered;
  CHECK_NOTHROW(scattered = scatter_add(input, 1, index, random_f32({4, 1}, 32).to(kGpu)));
  CHECK(message_of_next_read(scattered).find("expected 0 <= index < 3 (the size of dim 1)") !=
        std::string::npos);
}

TEST_CASE("sort, argsort and top-k on the GPU: the CPU's order on ties, NaN and zeros") {
  if (!gpu_usable()) return;
  struct Case {
    Shape shape;
    int64_t dim;
  };
  // A tile, several tiles (global passes), a vocabulary row, a sort along a leading dim.
  const Case cases[] = {{{5, 7}, -1}, {{3, 3000}, -1}, {{2, 50257}, -1}, {{300, 4}, 0}};
  uint64_t seed = 40;
  for (const auto& c : cases) {
    const Tensor x = tie_heavy(c.shape, ++seed);
    const int64_t length = x.size(c.dim);
    for (const bool descending : {false, true}) {
      const std::string what = "sort " + x.str() + " dim " + std::to_string(c.dim) +
                               (descending ? " descending" : " ascending");
      const ValuesIndices want = sort(x, c.dim, descending);
      const ValuesIndices got = sort(x.to(kGpu), c.dim, descending);
      check_close(got.values, want.values, 0, 0, what + " values");
      check_same_indices(got.indices, want.indices, what + " indices");
      check_same_indices(argsort(x.to(kGpu), c.dim, descending), want.indices, what + " argsort");
      for (const int64_t k : {int64_t{1}, std::min<int64_t>(length, 50), length}) {
        const std::string top = "topk k=" + std::to_string(k) + " of " + what;
        const ValuesIndices want_top = topk(x, k, c.dim, descending);
        const ValuesIndices got_top = topk(x.to(kGpu), k, c.dim, descending);
        check_close(got_top.values, want_top.values, 0, 0, top + " values");
        check_same_indices(got_top.indices, want_top.indices, top + " indices");
      }
    }
  }
}

TEST_CASE("sort and top-k gradients (selection backward) on the GPU equal the CPU's") {
  if (!gpu_usable()) return;
  check_op(
      "sort values, gradient back to the positions", {random_f32({8, 300}, 51)},
      [](auto& in) { return sort(in[0], -1, true).values; }, 0, 0);
  check_op(
      "top-k along dim 0", {random_f32({100, 6}, 52)},
      [](auto& in) { return topk(in[0], 10, 0, true).values; }, 0, 0);
  check_op(
      "top-k smallest of a vocabulary row", {random_f32({4, 50257}, 53)},
      [](auto& in) { return topk(in[0], 40, -1, false).values; }, 0, 0);
}
