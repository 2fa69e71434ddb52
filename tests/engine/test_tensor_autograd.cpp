// Tensor basics (dtype conversions, views, allocator stats) and the autograd machinery
// (accumulation, no-grad, detach, custom ops), using add as the example op.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <thread>

#include "common/error.hpp"
#include "test_util.hpp"

using namespace patchbay::engine;
using namespace patchbay::engine::testing;

TEST_CASE("bf16 and f16 conversions round to nearest even") {
  CHECK(f32_to_bf16(1.0f) == 0x3f80);
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1+2^-7: ties to even (1.0).
  CHECK(f32_to_bf16(1.00390625f) == 0x3f80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6: rounds up to even.
  CHECK(f32_to_bf16(1.01171875f) == 0x3f82);
  CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(f32_to_f16(1.0f) == 0x3c00);
  CHECK(f32_to_f16(65504.0f) == 0x7bff);
  CHECK(f32_to_f16(65520.0f) == 0x7c00);               // rounds to inf
  CHECK(f32_to_f16(1.0f + 1.0f / 2048.0f) == 0x3c00);  // halfway, ties to even
  CHECK(f32_to_f16(1.0f + 3.0f / 2048.0f) == 0x3c02);
  CHECK(f32_to_f16(5.9604645e-8f) == 0x0001);  // smallest subnormal
  CHECK(f32_to_f16(2.98e-8f) == 0x0000);       // below half the smallest subnormal
  CHECK(f32_to_f16(-2.0f) == 0xc000);
  for (uint32_t h = 0; h < 0x7c00; h += 7)
    CHECK(f32_to_f16(f16_to_f32(static_cast<uint16_t>(h))) == h);
}

TEST_CASE("views share storage and index correctly") {
  Tensor x = Tensor::from_vector({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor t = x.transpose(0, 1);
  CHECK(t.shape() == Shape{3, 2});
  CHECK(!t.is_contiguous());
  CHECK(t.to_vector() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(x.slice(1, 1, 3).to_vector() == std::vector<float>{1, 2, 4, 5});
  CHECK(x.slice(1, 0, 3, 2).to_vector() == std::vector<float>{0, 2, 3, 5});
  CHECK(x.narrow(0, 1, 1).to_vector() == std::vector<float>{3, 4, 5});
  CHECK(x.reshape({3, -1}).shape() == Shape{3, 2});
  CHECK(t.reshape({6}).to_vector() == std::vector<float>{0, 3, 1, 4, 2, 5});  // copy
  CHECK_THROWS_AS(t.view({6}), patchbay::Error);
  Tensor e = Tensor::from_vector({1, 2}, {2, 1}).expand({2, 3});
  CHECK(e.strides()[1] == 0);
  CHECK(e.to_vector() == std::vector<float>{1, 1, 1, 2, 2, 2});
  CHECK(x.to(DType::kBF16).to(DType::kF32).to_vector() == x.to_vector());
  CHECK(x.to(DType::kF16).to(DType::kI64).to(DType::kF32).to_vector() == x.to_vector());
  Tensor z = Tensor::empty({0, 4});
  CHECK(z.numel() == 0);
  CHECK(add(z, Tensor::empty({1, 4})).shape() == Shape{0, 4});
}

TEST_CASE("caching allocator reuses blocks and tracks current and peak bytes") {
  reset_peak(cpu());
  MemoryStats before = memory_stats(cpu());
  {
    Tensor a = Tensor::empty({1000});  // 4000 bytes -> 4032-byte class
    MemoryStats during = memory_stats(cpu());
    CHECK(during.current_bytes == before.current_bytes + 4032);
    CHECK(reinterpret_cast<uintptr_t>(a.data_ptr()) % 64 == 0);
  }
  MemoryStats after = memory_stats(cpu());
  CHECK(after.current_bytes == before.current_bytes);
  CHECK(after.peak_bytes >= before.current_bytes + 4032);
  CHECK(after.cached_bytes >= 4032);
  reset_peak(cpu());
  CHECK(memory_stats(cpu()).peak_bytes == after.current_bytes);
}

TEST_CASE("gradients accumulate across backward calls and zero_grad clears them") {
  Tensor a = Tensor::from_vector({1, 2, 3}, {3}).set_requires_grad(true);
  Tensor b = Tensor::from_vector({10}, {1}).set_requires_grad(true);
  backward(sum(add(a, b)));
  CHECK(a.grad().to_vector() == std::vector<float>{1, 1, 1});
  CHECK(b.grad().to_vector() == std::vector<float>{3});  // broadcast dim summed
  backward(sum(add(a, b)));
  CHECK(a.grad().to_vector() == std::vector<float>{2, 2, 2});
  a.zero_grad();
  CHECK(!a.grad().defined());
  // A tensor used twice gets both contributions.
  backward(sum(add(a, a)));
  CHECK(a.grad().to_vector() == std::vector<float>{2, 2, 2});
}

TEST_CASE("no-grad guard and detach stop recording") {
  Tensor a = Tensor::from_vector({1, 2}, {2}).set_requires_grad(true);
  {
    NoGradGuard guard;
    Tensor y = add(a, a);
    CHECK(!y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
  }
  CHECK(grad_enabled());
  Tensor d = a.detach();
  CHECK(!d.requires_grad());
  CHECK(d.data_ptr() == a.data_ptr());
  Tensor y = add(a, d);
  CHECK(y.requires_grad());
  backward(sum(y));
  CHECK(a.grad().to_vector() == std::vector<float>{1, 1});
  CHECK_THROWS_AS(backward(sum(d)), patchbay::Error);
}

TEST_CASE("backward with an explicit seed and graph release") {
  Tensor a = Tensor::from_vector({1, 2}, {2}).set_requires_grad(true);
  Tensor y = add(a, a);
  backward(y, Tensor::from_vector({3, 5}, {2}), /*keep_graph=*/true);
  CHECK(a.grad().to_vector() == std::vector<float>{6, 10});
  backward(y, Tensor::from_vector({1, 1}, {2}));
  CHECK(a.grad().to_vector() == std::vector<float>{8, 12});
  CHECK_THROWS_AS(backward(y, Tensor::from_vector({1, 1}, {2})), patchbay::Error);
  CHECK_THROWS_AS(backward(add(a, a)), patchbay::Error);  // non-scalar without seed
}

namespace {
// y = x^3 with a hand-written backward, to test the custom-op path.
class Cube final : public CustomOp {
 public:
  std::string name() const override { return "cube"; }
  std::vector<Tensor> forward(CustomOpContext& ctx, const std::vector<Tensor>& in) override {
    CHECK(!grad_enabled());
    ctx.save_for_backward({in[0]});
    return {mul(mul(in[0], in[0]), in[0])};
  }
  std::vector<Tensor> backward(CustomOpContext& ctx, const std::vector<Tensor>& g) override {
    const Tensor& x = ctx.saved_tensors()[0];
    return {mul(g[0], mul_scalar(mul(x, x), 3.0))};
  }
};
}  // namespace

TEST_CASE("custom op forward and backward") {
  Tensor x = Tensor::from_vector({1, -2, 0.5f}, {3}).set_requires_grad(true);
  auto op = std::make_shared<Cube>();
  std::vector<Tensor> y = apply_custom_op(op, {x});
  CHECK(y[0].to_vector() == std::vector<float>{1, -8, 0.125f});
  CHECK(y[0].grad_fn() != nullptr);
  backward(sum(y[0]));
  CHECK(x.grad().to_vector() == std::vector<float>{3, 12, 0.75f});
  check_gradients([&](const std::vector<Tensor>& in) { return apply_custom_op(op, in)[0]; },
                  {random_tensor({4}, 3, -1, 1, true)}, "custom cube");
}

TEST_CASE("add: forward vs reference, broadcasting, non-contiguous, gradients") {
  Tensor a = random_tensor({2, 3, 4}, 1), b = random_tensor({3, 1}, 2);
  check_close(
      add(a, b),
      ref::broadcast_binary(to_array(a), to_array(b), [](double x, double y) { return x + y; }),
      1e-6, 1e-6, "add broadcast");
  Tensor at = a.transpose(0, 2);  // [4, 3, 2], strided
  Tensor c = random_tensor({4, 1, 2}, 3);
  check_close(
      add(at, c),
      ref::broadcast_binary(to_array(at), to_array(c), [](double x, double y) { return x + y; }),
      1e-6, 1e-6, "add strided");
  CHECK_THROWS_AS(add(a, random_tensor({2}, 4)), patchbay::Error);
  CHECK_THROWS_AS(add(a, a.to(DType::kBF16)), patchbay::Error);
  check_gradients([](const std::vector<Tensor>& in) { return add(in[0], in[1]); },
                  {random_tensor({2, 3}, 5, -1, 1, true), random_tensor({3}, 6, -1, 1, true)},
                  "add");
}

TEST_CASE("generator is deterministic and independent of chunking") {
  Generator g1(42), g2(42);
  Tensor a = randn({1000}, g1);
  Tensor b1 = randn({500}, g2);
  Tensor b2 = randn({500}, g2);
  std::vector<float> va = a.to_vector(), vb1 = b1.to_vector(), vb2 = b2.to_vector();
  CHECK(std::vector<float>(va.begin(), va.begin() + 500) == vb1);
  CHECK(std::vector<float>(va.begin() + 500, va.end()) == vb2);
  double m = 0, s = 0;
  for (float v : va) m += v;
  m /= 1000;
  for (float v : va) s += (v - m) * (v - m);
  s = std::sqrt(s / 1000);
  CHECK(std::fabs(m) < 0.15);
  CHECK(std::fabs(s - 1.0) < 0.1);
}

TEST_CASE("grad mode is thread-local") {
  NoGradGuard guard;
  CHECK(!grad_enabled());
  bool other_thread_enabled = false;
  std::thread t([&] { other_thread_enabled = grad_enabled(); });
  t.join();
  CHECK(other_thread_enabled);
}

TEST_CASE("f16 and bf16 element-wise ops round the f32 result once") {
  Tensor a = random_tensor({16}, 20, -4, 4), b = random_tensor({16}, 21, -4, 4);
  for (DType dt : {DType::kF16, DType::kBF16}) {
    Tensor ah = a.to(dt), bh = b.to(dt);
    Tensor sum16 = add(ah, bh);
    CHECK(sum16.dtype() == dt);
    // Exactly the rounding of the f32 sum of the rounded inputs.
    Tensor expect = add(ah.to(DType::kF32), bh.to(DType::kF32)).to(dt);
    CHECK(sum16.to_vector() == expect.to_vector());
  }
}

TEST_CASE("arange, full and fill on views") {
  Tensor r = arange(0, 5);
  CHECK(r.dtype() == DType::kI64);
  CHECK(r.to_vector() == std::vector<float>{0, 1, 2, 3, 4});
  CHECK(arange(1, 2, 0.25, DType::kF32).to_vector() == std::vector<float>{1, 1.25f, 1.5f, 1.75f});
  CHECK(arange(3, 0, -1).to_vector() == std::vector<float>{3, 2, 1});
  CHECK(arange(0, 0).numel() == 0);
  Tensor m = zeros({3, 4});
  Tensor column = m.slice(1, 1, 2);  // strided view
  fill_(column, 7);
  CHECK(m.to_vector() == std::vector<float>{0, 7, 0, 0, 0, 7, 0, 0, 0, 7, 0, 0});
  CHECK(full({2}, 2.5, DType::kBF16).to_vector() == std::vector<float>{2.5f, 2.5f});
}

// ---- the embedding's add-into backward (AddIntoFn) ----

namespace {

// loss = sum(embedding(w_emb, ids) * a) + sum(matmul(x, w_head^T) * b); w_emb and w_head may be
// the same tensor (tied, as GPT-2's wte). Returns the backward's peak of live bytes above the
// bytes live before it.
size_t tied_loss_backward(const Tensor& w_emb, const Tensor& w_head, const Tensor& ids,
                          const Tensor& a, const Tensor& x, const Tensor& b) {
  Tensor loss = sum(embedding(w_emb, ids) * a) + sum(matmul(x, w_head, false, true) * b);
  const size_t before = memory_stats(cpu()).current_bytes;
  reset_peak(cpu());
  backward(loss);
  return memory_stats(cpu()).peak_bytes - before;
}

}  // namespace

TEST_CASE("a tied embedding adds its rows into the head's gradient, without a [V, D] buffer") {
  const int64_t V = 20000, D = 64;  // the table's gradient: 5 MiB; everything else far smaller
  const Tensor ids = Tensor::from_vector({3, 17, 3, 19999, 0, 17, 17, 512}, {2, 4}, DType::kI64);
  const Tensor a = random_tensor({2, 4, D}, 11);
  const Tensor x = random_tensor({4, D}, 12);
  const Tensor b = random_tensor({4, V}, 13);
  const Tensor init = random_tensor({V, D}, 10);
  const size_t table_bytes = static_cast<size_t>(V * D) * sizeof(float);

  // Reference: two separate leaves with the same values, their gradients added afterwards.
  Tensor w_emb = init.clone(), w_head = init.clone();
  w_emb.set_requires_grad(true);
  w_head.set_requires_grad(true);
  tied_loss_backward(w_emb, w_head, ids, a, x, b);
  const std::vector<float> emb_grad = w_emb.grad().to_vector();
  const std::vector<float> head_grad = w_head.grad().to_vector();

  Tensor tied = init.clone();
  tied.set_requires_grad(true);
  const size_t peak = tied_loss_backward(tied, tied, ids, a, x, b);
  const std::vector<float> got = tied.grad().to_vector();
  std::vector<double> actual(got.begin(), got.end()), expected(got.size());
  for (size_t i = 0; i < got.size(); ++i) expected[i] = double(emb_grad[i]) + head_grad[i];
  check_close(actual, expected, 1e-6, 1e-6, "tied gradient");
  // The head's dW (one table) is the only [V, D] buffer: a zero-filled embedding gradient
  // next to it would put the peak at two tables.
  CHECK(peak < table_bytes * 3 / 2);

  // A second backward accumulates into the leaf's .grad: rows added in place as well, giving
  // twice the gradient.
  const size_t second_peak = tied_loss_backward(tied, tied, ids, a, x, b);
  const std::vector<float> twice = tied.grad().to_vector();
  for (size_t i = 0; i < got.size(); ++i) actual[i] = twice[i], expected[i] = 2.0 * double(got[i]);
  check_close(actual, expected, 1e-6, 1e-6, "accumulated tied gradient");
  CHECK(second_peak < table_bytes * 3 / 2);
}

TEST_CASE("an embedding whose table has no gradient yet builds it densely, as before") {
  const Tensor ids = Tensor::from_vector({1, 4, 1}, {3}, DType::kI64);
  Tensor w = random_tensor({6, 2}, 21, -1.0, 1.0, /*requires_grad=*/true);
  backward(sum(embedding(w, ids) * Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2})));
  // Row 1 gets tokens 0 and 2, row 4 token 1; the others nothing.
  CHECK(w.grad().to_vector() == std::vector<float>{0, 0, 1 + 5, 2 + 6, 0, 0, 0, 0, 3, 4, 0, 0});
  // A second pass adds into that gradient in place (the add-into form): the sum doubles.
  backward(sum(embedding(w, ids) * Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2})));
  CHECK(w.grad().to_vector() == std::vector<float>{0, 0, 12, 16, 0, 0, 0, 0, 6, 8, 0, 0});
}

// Slices of one tensor (q, k, v on rows of a fused weight): after the first slice's backward
// has made the input's gradient, the others add into their windows in place (slice's add-into
// form) instead of each making a zero-filled gradient of the whole input.
TEST_CASE("slices add their gradients into the input's running gradient in place") {
  // Leaf [4, 3] with windows that overlap and step: rows 0-1, rows 1-3 by 2, column 2.
  Tensor w = Tensor::from_vector({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {4, 3});
  w.set_requires_grad(true);
  const Tensor ga = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor gb = Tensor::from_vector({10, 20, 30, 40, 50, 60}, {3, 2}).transpose(0, 1);  // strided
  const Tensor gc = Tensor::from_vector({100, 200, 300, 400}, {4, 1});
  auto loss = [&] {
    return sum(w.slice(0, 0, 2) * ga) + sum(w.slice(0, 1, 4, 2) * gb) + sum(w.slice(1, 2, 3) * gc);
  };
  // Row r, column c of the gradient: ga where r < 2, gb's row (r - 1) / 2 for r = 1, 3, gc[r]
  // in column 2.
  const std::vector<float> once = {1,  2,  3 + 100,  4 + 10, 5 + 30, 6 + 50 + 200,
                                   0,  0,  300,      20,     40,     60 + 400};
  backward(loss());
  CHECK(w.grad().to_vector() == once);
  backward(loss());  // into the leaf's .grad from the start: every slice adds in place
  std::vector<float> twice(once);
  for (float& v : twice) v *= 2;
  CHECK(w.grad().to_vector() == twice);

  // A non-leaf input (the pending-gradient path): x = 2 w', sliced three ways.
  Tensor w2 = Tensor::from_vector({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {4, 3});
  w2.set_requires_grad(true);
  const Tensor x = w2 * 2.0;
  backward(sum(x.slice(0, 0, 2) * ga) + sum(x.slice(0, 1, 4, 2) * gb) +
           sum(x.slice(1, 2, 3) * gc));
  std::vector<float> doubled(once);
  for (float& v : doubled) v *= 2;
  CHECK(w2.grad().to_vector() == doubled);
}

TEST_CASE("three row slices of a large leaf make one gradient of its size, not three") {
  const int64_t rows = 3 * 2048, cols = 256;  // the gradient: 6 MiB
  const size_t grad_bytes = static_cast<size_t>(rows * cols) * sizeof(float);
  Tensor w = random_tensor({rows, cols}, 31, -1.0, 1.0, /*requires_grad=*/true);
  const Tensor x = random_tensor({4, cols}, 32);
  Tensor loss;
  for (int64_t part = 0; part < 3; ++part) {
    const Tensor y = matmul(x, w.slice(0, part * rows / 3, (part + 1) * rows / 3), false, true);
    loss = loss.defined() ? loss + sum(y) : sum(y);
  }
  const size_t before = memory_stats(cpu()).current_bytes;
  reset_peak(cpu());
  backward(loss);
  const size_t peak = memory_stats(cpu()).peak_bytes - before;
  // Column j of x summed, in every row of w.
  const std::vector<float> xv = x.to_vector();
  std::vector<double> col_sum(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t j = 0; j < cols; ++j) col_sum[static_cast<size_t>(j)] += xv[static_cast<size_t>(r * cols + j)];
  const std::vector<float> got = w.grad().to_vector();
  std::vector<double> actual(got.begin(), got.end()), expected(got.size());
  for (size_t i = 0; i < got.size(); ++i) expected[i] = col_sum[i % static_cast<size_t>(cols)];
  check_close(actual, expected, 1e-5, 1e-5, "sliced leaf gradient");
  // Before: each slice's backward made a zero-filled [rows, cols] gradient (3 of them, two
  // alive while being added). Now one, plus the slices' own [rows / 3, cols] gradients.
  CHECK(peak < grad_bytes * 7 / 4);
}
