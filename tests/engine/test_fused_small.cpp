// The small-model speed work (issue 18): the fused bias + activation op against its plain
// kernel reference, against the composed ops (add, then gelu_tanh / relu) forward and
// backward, and by finite differences; through the C ops table (version 7), with its refusal
// of an unfused activation; and the sum over leading dims (a bias's or a position table's
// gradient), which now skips the transposing copy, against the reference.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "common/error.hpp"
#include "engine/ops_table.hpp"
#include "patchbay/kernels/bias_activation.hpp"
#include "test_util.hpp"

using namespace patchbay::engine;
using namespace patchbay::engine::testing;
namespace kern = patchbay::kernels;

namespace {

std::vector<double> as_doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

Tensor composed(const Tensor& x, const Tensor& b, FusedActivation act) {
  return act == FusedActivation::kRelu ? relu(add(x, b)) : gelu_tanh(add(x, b));
}

}  // namespace

TEST_CASE("bias_activation kernels match the double-precision reference") {
  for (auto kind : {kern::BiasActivationKind::kGeluTanh, kern::BiasActivationKind::kRelu}) {
    // 70 columns: one full block of 64 and a ragged one; 300 rows cross the thread threshold.
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 5}, {300, 70}, {1, 200}}) {
      const std::vector<float> x = random_tensor({rows, cols}, 1, -6, 6).to_vector();
      const std::vector<float> b = random_tensor({cols}, 2, -1, 1).to_vector();
      const std::vector<float> g = random_tensor({rows, cols}, 3, -1, 1).to_vector();
      std::vector<float> y(x.size()), y_ref(x.size()), dx(x.size()), dx_ref(x.size());
      std::vector<float> db(static_cast<size_t>(cols)), db_ref(static_cast<size_t>(cols));
      kern::bias_activation_forward(kind, x.data(), b.data(), y.data(), rows, cols);
      kern::bias_activation_reference_forward(kind, x.data(), b.data(), y_ref.data(), rows, cols);
      kern::bias_activation_backward(kind, x.data(), b.data(), g.data(), dx.data(), db.data(), rows, cols);
      kern::bias_activation_reference_backward(kind, x.data(), b.data(), g.data(), dx_ref.data(), db_ref.data(),
                                               rows, cols);
      check_close(as_doubles(y), as_doubles(y_ref), 1e-6, 1e-7, "forward");
      check_close(as_doubles(dx), as_doubles(dx_ref), 1e-5, 1e-6, "backward dx");
      check_close(as_doubles(db), as_doubles(db_ref), 1e-5, 1e-5, "backward dbias");
    }
  }
}

TEST_CASE("bias_activation equals add then the activation, forward and gradients") {
  for (FusedActivation act : {FusedActivation::kGeluTanh, FusedActivation::kRelu}) {
    Tensor x = random_tensor({4, 6, 70}, 11, -4, 4, true);
    Tensor b = random_tensor({70}, 12, -1, 1, true);
    Tensor x2 = x.detach(), b2 = b.detach();
    x2.set_requires_grad(true);
    b2.set_requires_grad(true);
    Tensor w = random_tensor({4, 6, 70}, 13, 0.5, 1.5);
    Tensor fused = bias_activation(x, b, act);
    Tensor plain = composed(x2, b2, act);
    // The composed GELU loses digits in 1 + tanh(u) for negative inputs (absolute error up to
    // ~|x| 6e-8); the fused one does not (checked against the double reference above).
    check_close(as_doubles(fused.to_vector()), as_doubles(plain.to_vector()), 1e-5, 1e-6, "forward");
    backward(sum(mul(fused, w)));
    backward(sum(mul(plain, w)));
    check_close(as_doubles(x.grad().to_vector()), as_doubles(x2.grad().to_vector()), 1e-4, 1e-5, "dx");
    check_close(as_doubles(b.grad().to_vector()), as_doubles(b2.grad().to_vector()), 1e-4, 1e-4, "dbias");
  }
}

TEST_CASE("bias_activation gradients by finite differences") {
  // x away from ReLU's kink: |x + b| >= 0.1 after the shift below.
  Tensor x = random_tensor({5, 9}, 21, 0.2, 2.0, true);
  Tensor b = random_tensor({9}, 22, -0.05, 0.05, true);
  check_gradients([](const std::vector<Tensor>& in) { return bias_activation(in[0], in[1], FusedActivation::kGeluTanh); },
                  {x, b}, "bias_activation gelu_tanh");
  check_gradients([](const std::vector<Tensor>& in) { return bias_activation(in[0], in[1], FusedActivation::kRelu); },
                  {x, b}, "bias_activation relu");
  Tensor xn = random_tensor({5, 9}, 23, -3, 3, true);
  check_gradients([](const std::vector<Tensor>& in) { return bias_activation(in[0], in[1], FusedActivation::kGeluTanh); },
                  {xn, b}, "bias_activation gelu_tanh, both signs");
}

TEST_CASE("bias_activation refuses mismatched shapes, and through the ops table unfused activations") {
  CHECK_THROWS_AS(bias_activation(random_tensor({2, 3}, 1), random_tensor({4}, 2), FusedActivation::kRelu),
                  patchbay::Error);
  const pb_ops_table* t = host_ops_table();
  REQUIRE(t->version >= 7);
  REQUIRE((t->bias_activation != nullptr));
  pb_tensor* x = ops_table_wrap(random_tensor({2, 3}, 1, -1, 1));
  pb_tensor* b = ops_table_wrap(random_tensor({3}, 2, -1, 1));
  pb_tensor* out = nullptr;
  pb_status* ok = t->bias_activation(x, b, PB_UNARY_GELU_TANH, &out);
  CHECK(ok == nullptr);
  CHECK(ops_table_tensor(out).shape() == Shape{2, 3});
  t->release(out);
  out = nullptr;
  pb_status* refused = t->bias_activation(x, b, PB_UNARY_SILU, &out);
  REQUIRE(refused != nullptr);
  CHECK(std::string(t->status_message(refused)).find("PB_UNARY_GELU_TANH") != std::string::npos);
  t->status_free(refused);
  t->release(x);
  t->release(b);
}

TEST_CASE("sum over leading dims (bias gradients) matches the reference, other dims unchanged") {
  Tensor x = random_tensor({3, 5, 7}, 31);
  const ref::Array xa = to_array(x);
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{0}, {0, 1}, {1}, {2}, {1, 2}, {0, 2}}) {
    check_close(sum(x, dims, false), ref::reduce(xa, dims, false, "sum"), 1e-6, 1e-6, "sum");
  }
  // [rows, cols] with many rows: the column-block path with threads.
  Tensor tall = random_tensor({4000, 130}, 32);
  check_close(sum(tall, {0}, true), ref::reduce(to_array(tall), {0}, true, "sum"), 1e-5, 1e-5, "tall sum");
  // Keep dim 0 of [A, B], reduce dim 1: not a leading reduction.
  Tensor wide = random_tensor({6, 9}, 33);
  check_close(sum(wide, {1}, false), ref::reduce(to_array(wide), {1}, false, "sum"), 1e-6, 1e-6, "row sum");
  // The backward of a broadcast bias add goes through it.
  Tensor a = random_tensor({4, 3, 8}, 34, -1, 1, true);
  Tensor bias = random_tensor({8}, 35, -1, 1, true);
  check_gradients([](const std::vector<Tensor>& in) { return add(in[0], in[1]); }, {a, bias}, "add bias");
}

TEST_CASE("gradient accumulation (in place when private) gives the sums and leaves held grads alone") {
  Tensor x = random_tensor({3, 70000}, 41, -1, 1, true);  // above the threaded size
  Tensor w = random_tensor({3, 70000}, 42, -1, 1);
  // x feeds two paths: its grad is w + 2x·w summed from two backward contributions.
  backward(sum(add(mul(x, w), mul(mul(x, x), w))));
  const std::vector<float> xv = x.detach().to_vector(), wv = w.to_vector();
  std::vector<double> expected(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) expected[i] = wv[i] + 2.0 * xv[i] * wv[i];
  check_close(as_doubles(x.grad().to_vector()), expected, 1e-5, 1e-6, "two paths");
  // A second backward accumulates into .grad; a grad tensor held by the caller keeps its values.
  Tensor held = x.grad();
  const std::vector<float> before = held.to_vector();
  backward(sum(mul(x, w)));
  CHECK(held.to_vector() == before);
  for (size_t i = 0; i < xv.size(); ++i) expected[i] += wv[i];
  check_close(as_doubles(x.grad().to_vector()), expected, 1e-5, 1e-6, "accumulated over two backward calls");
  // Not held: the next backward may add in place, and the sum is still right.
  held = Tensor();
  backward(sum(mul(x, w)));
  for (size_t i = 0; i < xv.size(); ++i) expected[i] += wv[i];
  check_close(as_doubles(x.grad().to_vector()), expected, 1e-5, 1e-6, "accumulated in place");
}
