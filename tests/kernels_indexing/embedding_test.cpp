// Embedding gather kernels: forward and backward against the references (bit-exact: both
// copy, and both add each weight row's contributions in token order), a known answer for
// repeated ids, and the range check.
#include "patchbay/kernels/embedding.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "patchbay/kernels/index_check.hpp"
#include "random_fill.hpp"

namespace pk = patchbay::kernels;
using pk::testing::random_floats;
using pk::testing::random_ids;

TEST_CASE_TEMPLATE("embedding forward and backward match the reference", Index, int32_t, int64_t) {
  // count * dim above the threading threshold so the OpenMP paths run.
  const int64_t vocab = 97, dim = 130, count = 300;
  const auto weights = random_floats(size_t(vocab * dim), 1);
  const auto ids = random_ids<Index>(size_t(count), vocab, 2);

  std::vector<float> out(size_t(count * dim), -1.0f), expected(out.size());
  pk::embedding_forward(weights.data(), vocab, dim, ids.data(), count, out.data());
  pk::embedding_forward_reference(weights.data(), vocab, dim, ids.data(), count, expected.data());
  CHECK(out == expected);

  // Backward accumulates: start both from the same non-zero gradient.
  const auto grad_out = random_floats(size_t(count * dim), 3);
  auto grad_weights = random_floats(size_t(vocab * dim), 4);
  auto grad_expected = grad_weights;
  pk::embedding_backward(grad_out.data(), ids.data(), count, vocab, dim, grad_weights.data());
  pk::embedding_backward_reference(grad_out.data(), ids.data(), count, vocab, dim,
                                   grad_expected.data());
  CHECK(grad_weights == grad_expected);
}

TEST_CASE("embedding backward sums repeated ids and leaves unused rows alone") {
  const int64_t vocab = 4, dim = 2;
  const std::vector<int64_t> ids = {2, 0, 2};
  const std::vector<float> grad_out = {1, 2, 10, 20, 100, 200};
  std::vector<float> grad_weights(size_t(vocab * dim), 0.0f);
  pk::embedding_backward(grad_out.data(), ids.data(), 3, vocab, dim, grad_weights.data());
  CHECK(grad_weights == std::vector<float>{10, 20, 0, 0, 101, 202, 0, 0});
}

TEST_CASE_TEMPLATE("first_index_out_of_range reports the first bad position", Index, int32_t,
                   int64_t) {
  const std::vector<Index> good = {0, 3, 4, 1};
  CHECK(pk::first_index_out_of_range(good.data(), 4, 5) == -1);
  const std::vector<Index> too_large = {0, 5, 7};
  CHECK(pk::first_index_out_of_range(too_large.data(), 3, 5) == 1);
  const std::vector<Index> negative = {1, 2, -1, 9};
  CHECK(pk::first_index_out_of_range(negative.data(), 4, 5) == 2);
}
