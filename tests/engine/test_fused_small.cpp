// The small-model speed work (issue 18): the fused bias + activation op against its plain
// kernel reference, against the composed ops (add, then gelu_tanh / relu) forward and
// backward, and by finite differences; through the C ops table (version 7), with its refusal
// of an unfused activation; and the sum over leading dims (a bias's or a position table's
// gradient), which now skips the transposing copy, against the reference.
#include <doctest/doctest.h>
#include <omp.h>

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
      kern::bias_activation_backward(kind, x.data(), b.data(), g.data(), dx.data(), db.data(), rows,
                                     cols);
      kern::bias_activation_reference_backward(kind, x.data(), b.data(), g.data(), dx_ref.data(),
                                               db_ref.data(), rows, cols);
      check_close(as_doubles(y), as_doubles(y_ref), 1e-6, 1e-7, "forward");
      check_close(as_doubles(dx), as_doubles(dx_ref), 1e-5, 1e-6, "backward dx");
      check_close(as_doubles(db), as_doubles(db_ref), 1e-5, 1e-5, "backward dbias");
    }
  }
}

TEST_CASE("bias_activation's backward gives the same bits on 1, 2 and 3 threads") {
  // 200 columns: four 64-column blocks (the last ragged), split unevenly over the threads;
  // each column's bias gradient must still be summed by one thread in row order.
  const int64_t rows = 300, cols = 200;
  const std::vector<float> x = random_tensor({rows, cols}, 4, -6, 6).to_vector();
  const std::vector<float> b = random_tensor({cols}, 5, -1, 1).to_vector();
  const std::vector<float> g = random_tensor({rows, cols}, 6, -1, 1).to_vector();
  const int saved = omp_get_max_threads();
  for (auto kind : {kern::BiasActivationKind::kGeluTanh, kern::BiasActivationKind::kRelu}) {
    std::vector<std::vector<float>> dx(3, std::vector<float>(x.size()));
    std::vector<std::vector<float>> db(3, std::vector<float>(cols));
    for (int threads = 1; threads <= 3; ++threads) {
      omp_set_num_threads(threads);
      kern::bias_activation_backward(kind, x.data(), b.data(), g.data(), dx[threads - 1].data(),
                                     db[threads - 1].data(), rows, cols);
    }
    CHECK(dx[0] == dx[1]);
    CHECK(dx[0] == dx[2]);
    CHECK(db[0] == db[1]);
    CHECK(db[0] == db[2]);
    std::vector<float> dx_ref(x.size()), db_ref(cols);
    kern::bias_activation_reference_backward(kind, x.data(), b.data(), g.data(), dx_ref.data(),
                                             db_ref.data(), rows, cols);
    check_close(as_doubles(db[2]), as_doubles(db_ref), 1e-5, 1e-5, "backward dbias, 3 threads");
  }
  omp_set_num_threads(saved);
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
    check_close(as_doubles(fused.to_vector()), as_doubles(plain.to_vector()), 1e-5, 1e-6,
                "forward");
    backward(sum(mul(fused, w)));
    backward(sum(mul(plain, w)));
    check_close(as_doubles(x.grad().to_vector()), as_doubles(x2.grad().to_vector()), 1e-4, 1e-5,
                "dx");
    check_close(as_doubles(b.grad().to_vector()), as_doubles(b2.grad().to_vector()), 1e-4, 1e-4,
                "dbias");
  }
}

TEST_CASE("bias_activation gradients by finite differences") {
  // x away from ReLU's kink: |x + b| >= 0.1 after the shift below.
  Tensor x = random_tensor({5, 9}, 21, 0.2, 2.0, true);
  Tensor b = random_tensor({9}, 22, -0.05, 0.05, true);
  check_gradients(
      [](const std::vector<Tensor>& in) {
        return bias_activation(in[0], in[1], FusedActivation::kGeluTanh);
      },
      {x, b}, "bias_activation gelu_tanh");
  check_gradients(
      [](const std::vector<Tensor>& in) {
        return bias_activation(in[0], in[1], FusedActivation::kRelu);
      },
      {x, b}, "bias_activation relu");
  Tensor xn = random_tensor({5, 9}, 23, -3, 3, true);
  check_gradients(
      [](const std::vector<Tensor>& in) {
        return bias_activation(in[0], in[1], FusedActivation::kGeluTanh);
      },
      {xn, b}, "bias_activation gelu_tanh, both signs");
}

TEST_CASE(
    "bias_activation refuses mismatched shapes, and through the ops table unfused activations") {
  CHECK_THROWS_AS(
      bias_activation(random_tensor({2, 3}, 1), random_tensor({4}, 2), FusedActivation::kRelu),
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
  check_close(sum(tall, {0}, true), ref::reduce(to_array(tall), {0}, true, "sum"), 1e-5, 1e-5,
              "tall sum");
  // Keep dim 0 of [A, B], reduce dim 1: not a leading reduction.
  Tensor wide = random_tensor({6, 9}, 33);
  check_close(sum(wide, {1}, false), ref::reduce(to_array(wide), {1}, false, "sum"), 1e-6, 1e-6,
              "row sum");
  // The backward of a broadcast bias add goes through it.
  Tensor a = random_tensor({4, 3, 8}, 34, -1, 1, true);
  Tensor bias = random_tensor({8}, 35, -1, 1, true);
  check_gradients([](const std::vector<Tensor>& in) { return add(in[0], in[1]); }, {a, bias},
                  "add bias");
}

TEST_CASE(
    "gradient accumulation (in place when private) gives the sums and leaves held grads alone") {
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
  check_close(as_doubles(x.grad().to_vector()), expected, 1e-5, 1e-6,
              "accumulated over two backward calls");
  // Not held: the next backward may add in place, and the sum is still right.
  held = Tensor();
  backward(sum(mul(x, w)));
  for (size_t i = 0; i < xv.size(); ++i) expected[i] += wv[i];
  check_close(as_doubles(x.grad().to_vector()), expected, 1e-5, 1e-6, "accumulated in place");
}

// add_layer_norm (residual add + layer norm in one op, used by pre-norm blocks): both outputs
// against the double reference (h = x + r, layer_norm_last(h)) and against add() then
// layer_norm() forward and gradients (with and without gain/bias; rows > 256 so the backward's
// column sums span several row blocks, and one block of 256 rows split over the threads), and
// by finite differences with both outputs used.
TEST_CASE("add_layer_norm equals add then layer_norm, forward and gradients") {
  struct Case {
    Shape shape;
    bool affine;
  };
  for (const Case& c : {Case{{4, 6, 70}, true}, Case{{3, 200, 32}, true}, Case{{5, 16}, false},
                        Case{{2, 128, 200}, true}}) {
    const int64_t cols = c.shape.back();
    const std::string what = shape_str(c.shape) + (c.affine ? " affine" : " plain");
    Tensor x = random_tensor(c.shape, 31, -2, 2, true), r = random_tensor(c.shape, 32, -2, 2, true);
    Tensor g = c.affine ? random_tensor({cols}, 33, 0.5, 1.5, true) : Tensor();
    Tensor b = c.affine ? random_tensor({cols}, 34, -1, 1, true) : Tensor();
    auto twin = [](const Tensor& t) {
      if (!t.defined()) return Tensor();
      Tensor u = t.detach();
      u.set_requires_grad(true);
      return u;
    };
    Tensor x2 = twin(x), r2 = twin(r), g2 = twin(g), b2 = twin(b);
    auto [h, y] = add_layer_norm(x, r, g, b, 1e-5);
    Tensor h2 = add(x2, r2), y2 = layer_norm(h2, g2, b2, 1e-5);
    // Double reference.
    ref::Array hx = to_array(x), hr = to_array(r);
    for (size_t i = 0; i < hx.values.size(); ++i) hx.values[i] += hr.values[i];
    ref::Values gv(cols, 1.0), bv(cols, 0.0);
    if (c.affine) {
      std::vector<float> gf = g.to_vector(), bf = b.to_vector();
      gv.assign(gf.begin(), gf.end());
      bv.assign(bf.begin(), bf.end());
    }
    check_close(h, hx, 1e-6, 1e-6, what + " h");
    check_close(y, ref::layer_norm_last(hx, gv, bv, 1e-5), 1e-4, 1e-5, what + " y");
    // Gradients with both outputs in the loss, against the composition.
    Tensor wh = random_tensor(c.shape, 35, 0.5, 1.5), wy = random_tensor(c.shape, 36, -1.5, 1.5);
    backward(add(sum(mul(h, wh)), sum(mul(y, wy))));
    backward(add(sum(mul(h2, wh)), sum(mul(y2, wy))));
    check_close(as_doubles(x.grad().to_vector()), as_doubles(x2.grad().to_vector()), 1e-4, 1e-5,
                what + " dx");
    check_close(as_doubles(r.grad().to_vector()), as_doubles(r2.grad().to_vector()), 1e-4, 1e-5,
                what + " dr");
    if (c.affine) {
      check_close(as_doubles(g.grad().to_vector()), as_doubles(g2.grad().to_vector()), 1e-4, 1e-4,
                  what + " dgain");
      check_close(as_doubles(b.grad().to_vector()), as_doubles(b2.grad().to_vector()), 1e-4, 1e-4,
                  what + " dbias");
    }
  }
  // Finite differences of both outputs (their weighted sum through check_gradients' weights).
  check_gradients(
      [](const std::vector<Tensor>& in) {
        auto [h, y] = add_layer_norm(in[0], in[1], in[2], in[3], 1e-5);
        return add(mul_scalar(h, 0.5), y);
      },
      {random_tensor({3, 7}, 41, -2, 2, true), random_tensor({3, 7}, 42, -2, 2, true),
       random_tensor({7}, 43, 0.5, 1.5, true), random_tensor({7}, 44, -1, 1, true)},
      "add_layer_norm");
  // Only y used: the unused h still gets its (zero) gradient and x, r get the norm's.
  check_gradients(
      [](const std::vector<Tensor>& in) {
        return add_layer_norm(in[0], in[1], in[2], Tensor(), 1e-5).second;
      },
      {random_tensor({4, 9}, 45, -2, 2, true), random_tensor({4, 9}, 46, -2, 2, true),
       random_tensor({9}, 47, 0.5, 1.5, true)},
      "add_layer_norm, y only, no bias");
  CHECK_THROWS(
      add_layer_norm(random_tensor({2, 4}, 48), random_tensor({2, 5}, 49), Tensor(), Tensor()));
}

// add_layer_norm's backward at one row block (<= 256 rows) with enough work for threads: the
// rows' dh and the columns' gain/bias sums are split over the threads separately; the
// gradients must be the same bits on 1, 2 and 3 threads (and at 300 rows, two row blocks).
TEST_CASE("add_layer_norm's backward gives the same bits on 1, 2 and 3 threads") {
  const int saved = omp_get_max_threads();
  for (const Shape& shape : {Shape{2, 128, 200}, Shape{300, 130}}) {
    std::vector<std::vector<float>> grads[3];
    for (int threads = 1; threads <= 3; ++threads) {
      omp_set_num_threads(threads);
      Tensor x = random_tensor(shape, 51, -2, 2, true), r = random_tensor(shape, 52, -2, 2, true);
      Tensor g = random_tensor({shape.back()}, 53, 0.5, 1.5, true);
      Tensor b = random_tensor({shape.back()}, 54, -1, 1, true);
      auto [h, y] = add_layer_norm(x, r, g, b, 1e-5);
      backward(add(sum(mul(h, random_tensor(shape, 55, 0.5, 1.5))),
                   sum(mul(y, random_tensor(shape, 56, -1.5, 1.5)))));
      for (const Tensor* t : {&x, &r, &g, &b}) grads[threads - 1].push_back(t->grad().to_vector());
    }
    for (size_t i = 0; i < grads[0].size(); ++i) {
      CAPTURE(shape_str(shape));
      CAPTURE(i);
      CHECK(grads[0][i] == grads[1][i]);
      CHECK(grads[0][i] == grads[2][i]);
    }
  }
  omp_set_num_threads(saved);
}

// add()'s row-broadcast fast path (a bias [N] or a position table [T, C] over rows, either
// operand, and plain contiguous sums split into chunks) against element-by-element sums;
// shapes it does not cover (a broadcast middle dim, a transposed operand) take the general
// path and agree too.
TEST_CASE("add fast path for contiguous and row-broadcast operands equals elementwise sums") {
  struct Case {
    Shape a, b;
  };
  const Case cases[] = {{{4, 6, 70}, {70}},       {{70}, {4, 6, 70}},    {{2, 5, 8}, {5, 8}},
                        {{3, 40000}, {3, 40000}}, {{2, 70000}, {70000}}, {{4, 6, 70}, {4, 1, 70}},
                        {{1, 1, 9}, {3, 1, 9}},   {{5, 1}, {5, 7}}};
  uint64_t seed = 60;
  for (const Case& c : cases) {
    Tensor a = random_tensor(c.a, seed++), b = random_tensor(c.b, seed++);
    const Shape out_shape = broadcast_shapes(c.a, c.b);
    Tensor out = add(a, b);
    REQUIRE(out.shape() == out_shape);
    // Expected: index each operand through its expanded strides.
    std::vector<float> va = a.contiguous().to_vector(), vb = b.contiguous().to_vector();
    Tensor ea = a.expand(out_shape), eb = b.expand(out_shape);
    std::vector<double> expected(static_cast<size_t>(out.numel()));
    for (int64_t i = 0; i < out.numel(); ++i) {
      int64_t rem = i, oa = 0, ob = 0;
      for (size_t d = out_shape.size(); d-- > 0;) {
        const int64_t idx = rem % out_shape[d];
        rem /= out_shape[d];
        oa += idx * ea.strides()[d];
        ob += idx * eb.strides()[d];
      }
      expected[static_cast<size_t>(i)] = static_cast<double>(va[oa]) + vb[ob];
    }
    check_close(as_doubles(out.to_vector()), expected, 1e-7, 1e-7,
                "add " + shape_str(c.a) + " + " + shape_str(c.b));
  }
  // A transposed (non-contiguous) operand.
  Tensor t = random_tensor({70, 6}, 70).transpose(0, 1), u = random_tensor({6, 70}, 71);
  std::vector<float> vt = t.contiguous().to_vector(), vu = u.to_vector();
  std::vector<double> expected(vt.size());
  for (size_t i = 0; i < vt.size(); ++i) expected[i] = static_cast<double>(vt[i]) + vu[i];
  check_close(as_doubles(add(t, u).to_vector()), expected, 1e-7, 1e-7, "add transposed");
}
