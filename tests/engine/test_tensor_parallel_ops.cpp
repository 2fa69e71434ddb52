// The tensor-parallel pair through the C ops table (version 9), in one process: without a
// group both are the identity; with an installed all-reduce (here a stand-in for two ranks
// holding the same values: the sum doubles) g sums forward and passes the gradient through,
// f passes forward (aliasing x) and sums the gradient.
#include <doctest/doctest.h>

#include <vector>

#include "engine/ops_table.hpp"
#include "engine/tensor_parallel.hpp"
#include "patchbay/tensor.hpp"
#include "patchbay/tensor_parallel.hpp"

namespace {

namespace eng = patchbay::engine;

const pb_ops_table* table() { return eng::host_ops_table(); }

// Two ranks with equal tensors: their sum is twice the tensor.
void doubling(eng::Tensor& t) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] *= 2.0f;
}

}  // namespace

TEST_CASE("tp_copy_to_region / tp_reduce_from_region: identity without a group") {
  REQUIRE(table()->version >= 9);
  REQUIRE(patchbay::has_tensor_parallel_ops(table()));
  patchbay::Ops ops(table());
  patchbay::Tensor x = ops.from_vector(std::vector<float>{1, 2, 3}, {3}).requires_grad(true);
  patchbay::Tensor y = patchbay::tp_reduce_from_region(patchbay::tp_copy_to_region(x));
  CHECK(y.to_vector() == std::vector<float>{1, 2, 3});
  (y * 3.0).sum().backward();
  CHECK(x.grad().to_vector() == std::vector<float>{3, 3, 3});
}

TEST_CASE("with an installed all-reduce: g sums forward, f sums backward") {
  eng::set_tensor_parallel_all_reduce(doubling);
  patchbay::Ops ops(table());
  patchbay::Tensor x = ops.from_vector(std::vector<float>{1, 2, 3}, {3}).requires_grad(true);
  patchbay::Tensor summed = patchbay::tp_reduce_from_region(x);
  CHECK(summed.to_vector() == std::vector<float>{2, 4, 6});
  CHECK(x.to_vector() == std::vector<float>{1, 2, 3});  // x itself is not written
  (summed * 5.0).sum().backward();
  CHECK(x.grad().to_vector() == std::vector<float>{5, 5, 5});  // g's backward: identity

  patchbay::Tensor w = ops.from_vector(std::vector<float>{4, 5}, {2}).requires_grad(true);
  patchbay::Tensor copied = patchbay::tp_copy_to_region(w);
  CHECK(copied.data<float>() == w.data<float>());  // forward aliases w
  (copied * 7.0).sum().backward();
  CHECK(w.grad().to_vector() == std::vector<float>{14, 14});  // f's backward: summed (doubled)
  eng::set_tensor_parallel_all_reduce({});
  CHECK(!eng::tensor_parallel_installed());
}
