// The fused linear layer (ops table version 10): linear(x, W, b, act) = act(x · Wᵀ + b).
// Its decoding path (skinny matmul with the bias and activation as epilogue) against the
// composed ops it replaces, for f32 and bf16 weights, with and without bias, every
// activation; where a gradient is recorded or bf16 autocast is on, the very same ops (bit for
// bit, gradients included) and finite differences; through the C ops table, with its refusal
// of an unfused activation; and the SDK wrapper's fallback on a host without the field.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/ops_table.hpp"
#include "patchbay/tensor.hpp"
#include "test_util.hpp"

using namespace patchbay::engine;
using namespace patchbay::engine::testing;

namespace {

std::vector<double> doubles(const Tensor& t) {
  const std::vector<float> v = t.to(DType::kF32).to_vector();
  return {v.begin(), v.end()};
}

// What the layers computed before the fused op: matmul, then the bias add fused with the
// activation (bias_activation), or the add, or the activation alone.
Tensor composed(const Tensor& x, const Tensor& w, const Tensor& b, LinearActivation act) {
  const Tensor y = matmul(x, w, false, true);
  if (b.defined()) {
    if (act == LinearActivation::kNone) return add(y, b);
    return bias_activation(
        y, b, act == LinearActivation::kRelu ? FusedActivation::kRelu : FusedActivation::kGeluTanh);
  }
  if (act == LinearActivation::kRelu) return relu(y);
  if (act == LinearActivation::kGeluTanh) return gelu_tanh(y);
  return y;
}

const LinearActivation kActivations[] = {LinearActivation::kNone, LinearActivation::kRelu,
                                         LinearActivation::kGeluTanh};

}  // namespace

TEST_CASE("linear's decoding path equals the composed ops (f32 and bf16 weights, bias or none)") {
  NoGradGuard no_grad;
  // [1, 1, 300] as a decoding step; [3, 300] as a beam; W 700 x 300 f32 = 840 KB: threaded.
  for (const Shape& x_shape : {Shape{1, 1, 300}, Shape{3, 300}}) {
    for (DType w_dtype : {DType::kF32, DType::kBF16}) {
      for (bool with_bias : {true, false}) {
        for (LinearActivation act : kActivations) {
          if (!with_bias && act != LinearActivation::kNone) continue;  // composed anyway
          const Tensor x = random_tensor(x_shape, 1, -1, 1);
          const Tensor w = random_tensor({700, 300}, 2, -0.1, 0.1).to(w_dtype);
          const Tensor b = with_bias ? random_tensor({700}, 3, -1, 1) : Tensor();
          const Tensor got = linear(x, w, b, act);
          Shape want_shape(x_shape.begin(), x_shape.end() - 1);
          want_shape.push_back(700);
          CHECK(got.shape() == want_shape);
          CHECK(got.dtype() == DType::kF32);
          // The same products summed in the same kernel; the epilogue's bias add is the
          // composed add and its GELU the vectorised one of bias_activation.
          check_close(doubles(got), doubles(composed(x, w, b, act)), 1e-6, 1e-6,
                      "linear vs composed");
        }
      }
    }
  }
}

TEST_CASE("linear records gradients as the composed ops do, bit for bit") {
  for (LinearActivation act : kActivations) {
    const Tensor x = random_tensor({1, 1, 40}, 4, -1, 1).set_requires_grad(true);
    const Tensor w = random_tensor({24, 40}, 5, -0.3, 0.3).set_requires_grad(true);
    const Tensor b = random_tensor({24}, 6, -1, 1).set_requires_grad(true);
    const Tensor g = random_tensor({1, 1, 24}, 7, -1, 1);
    const Tensor fused = linear(x, w, b, act);
    backward(fused, g);
    const std::vector<double> dx = doubles(x.grad()), dw = doubles(w.grad()),
                              db = doubles(b.grad());
    const Tensor x2 = x.detach().set_requires_grad(true), w2 = w.detach().set_requires_grad(true),
                 b2 = b.detach().set_requires_grad(true);
    const Tensor plain = composed(x2, w2, b2, act);
    backward(plain, g);
    CHECK(doubles(fused) == doubles(plain));
    CHECK(dx == doubles(x2.grad()));
    CHECK(dw == doubles(w2.grad()));
    CHECK(db == doubles(b2.grad()));
  }
  // The finite differences run with gradients off, i.e. through the decoding path (2 rows):
  // it and the recorded ops' backward must describe the same function.
  check_gradients(
      [](const std::vector<Tensor>& in) {
        return linear(in[0], in[1], in[2], LinearActivation::kGeluTanh);
      },
      {random_tensor({2, 6}, 8, -1, 1).set_requires_grad(true),
       random_tensor({5, 6}, 9, -1, 1).set_requires_grad(true),
       random_tensor({5}, 10, -1, 1).set_requires_grad(true)},
      "linear gelu_tanh");
}

TEST_CASE("linear under bf16 autocast is the autocast matmul and its bias ops") {
  NoGradGuard no_grad;
  const Tensor x = random_tensor({1, 64}, 11, -1, 1);
  const Tensor w = random_tensor({48, 64}, 12, -1, 1);
  const Tensor b = random_tensor({48}, 13, -1, 1);
  AutocastGuard bf16(DType::kBF16);
  CHECK(doubles(linear(x, w, b, LinearActivation::kGeluTanh)) ==
        doubles(composed(x, w, b, LinearActivation::kGeluTanh)));
}

TEST_CASE("linear: bad shapes get matmul's and the bias add's errors") {
  NoGradGuard no_grad;
  CHECK_THROWS_WITH_AS(linear(random_tensor({1, 5}, 1), random_tensor({4, 6}, 2), Tensor()),
                       doctest::Contains("inner dims differ"), patchbay::Error);
  CHECK_THROWS_AS(linear(random_tensor({1, 6}, 1), random_tensor({4, 6}, 2), random_tensor({5}, 3)),
                  patchbay::Error);
}

TEST_CASE("linear through the ops table, its refusal of an unfused activation, the SDK fallback") {
  const pb_ops_table* t = host_ops_table();
  REQUIRE(t->version >= 10);
  REQUIRE(patchbay::has_linear(t));
  patchbay::Ops ops(t);
  const patchbay::Tensor x(t, ops_table_wrap(random_tensor({1, 1, 32}, 14, -1, 1)));
  const patchbay::Tensor w(t, ops_table_wrap(random_tensor({20, 32}, 15, -1, 1)));
  const patchbay::Tensor b(t, ops_table_wrap(random_tensor({20}, 16, -1, 1)));
  const pb_unary_op gelu = PB_UNARY_GELU_TANH;
  const patchbay::Tensor y = patchbay::linear(x, w, b, &gelu);
  CHECK(y.shape() == std::vector<int64_t>{1, 1, 20});
  const std::vector<float> through_table = y.to_vector();

  pb_tensor* out = nullptr;
  const pb_unary_op silu = PB_UNARY_SILU;
  pb_status* refused = t->linear(x.handle(), w.handle(), b.handle(), &silu, &out);
  REQUIRE(refused != nullptr);
  CHECK(std::string(t->status_message(refused)).find("PB_UNARY_GELU_TANH") != std::string::npos);
  t->status_free(refused);

  // A version-9 host (the table ends before `linear`): the wrapper composes, same values.
  pb_ops_table old = *t;
  old.struct_size = offsetof(pb_ops_table, linear);
  old.version = 9;
  CHECK_FALSE(patchbay::has_linear(&old));
  const patchbay::Tensor x9(&old, ops_table_wrap(random_tensor({1, 1, 32}, 14, -1, 1)));
  const patchbay::Tensor w9(&old, ops_table_wrap(random_tensor({20, 32}, 15, -1, 1)));
  const patchbay::Tensor b9(&old, ops_table_wrap(random_tensor({20}, 16, -1, 1)));
  const std::vector<float> composed_by_sdk = patchbay::linear(x9, w9, b9, &gelu).to_vector();
  check_close(std::vector<double>(through_table.begin(), through_table.end()),
              std::vector<double>(composed_by_sdk.begin(), composed_by_sdk.end()), 1e-6, 1e-6,
              "table vs SDK composition");
}
