// matmul (transposes, broadcast batch dims, bf16), softmax / log-softmax, layer norm and
// RMS norm: forward against the double references, backward against finite differences,
// bf16 against a tolerance derived from bf16 rounding of the inputs.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "common/error.hpp"
#include "test_util.hpp"

using namespace patchbay::engine;
using namespace patchbay::engine::testing;

TEST_CASE("matmul with transposes and broadcast batch dims") {
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const Case cases[] = {{{3, 4}, {4, 5}, false, false},    {{4, 3}, {4, 5}, true, false},
                        {{3, 4}, {5, 4}, false, true},     {{4, 3}, {5, 4}, true, true},
                        {{2, 3, 4}, {4, 5}, false, false}, {{2, 1, 3, 4}, {3, 5, 4}, false, true},
                        {{4, 3}, {2, 4, 5}, true, false},  {{0, 4}, {4, 5}, false, false},
                        {{3, 0}, {0, 5}, false, false},
                        // Stacked rows x one matrix (one GEMM over the flattened rows).
                        {{2, 3, 4}, {5, 4}, false, true},  {{2, 2, 3, 4}, {4, 5}, false, false}};
  uint64_t seed = 600;
  for (const Case& c : cases) {
    std::string what = "matmul " + shape_str(c.a) + (c.ta ? "^T" : "") + " @ " + shape_str(c.b) +
                       (c.tb ? "^T" : "");
    Tensor a = random_tensor(c.a, seed++), b = random_tensor(c.b, seed++);
    check_close(matmul(a, b, c.ta, c.tb), ref::matmul(to_array(a), to_array(b), c.ta, c.tb), 1e-5,
                1e-5, what);
    if (shape_numel(c.a) > 0 && shape_numel(c.b) > 0)
      check_gradients(
          [&](const std::vector<Tensor>& in) { return matmul(in[0], in[1], c.ta, c.tb); },
          {random_tensor(c.a, seed++, -1, 1, true), random_tensor(c.b, seed++, -1, 1, true)}, what);
  }
  // Non-contiguous operand.
  Tensor a = random_tensor({4, 3}, 650).transpose(0, 1), b = random_tensor({4, 2}, 651);
  check_close(matmul(a, b), ref::matmul(to_array(a), to_array(b), false, false), 1e-5, 1e-5,
              "matmul strided");
  CHECK_THROWS_AS(matmul(random_tensor({2, 3}, 1), random_tensor({2, 3}, 2)), patchbay::Error);
}

TEST_CASE("matmul in bf16 stays within the bf16 rounding error of its inputs") {
  const int64_t m = 16, k = 64, n = 24;
  Tensor a = random_tensor({m, k}, 700), b = random_tensor({k, n}, 701);
  Tensor out = matmul(a.to(DType::kBF16), b.to(DType::kBF16));
  CHECK(out.dtype() == DType::kBF16);
  // Reference on the bf16-rounded inputs in double; remaining error: f32 accumulation plus one
  // bf16 rounding of the output (2^-8 relative) -> bound |err| <= 2^-8 |ref| + k * 2^-24 *
  // sum|a||b|.
  ref::Array ar = to_array(a.to(DType::kBF16)), br = to_array(b.to(DType::kBF16));
  ref::Array expect = ref::matmul(ar, br, false, false);
  ref::Array abs_sum =
      ref::matmul(ref::unary(ar, [](double v) { return std::fabs(v); }),
                  ref::unary(br, [](double v) { return std::fabs(v); }), false, false);
  std::vector<float> got = out.to_vector();
  for (size_t i = 0; i < got.size(); ++i) {
    double bound = std::ldexp(1.0, -8) * std::fabs(expect.values[i]) + 1e-5 * abs_sum.values[i];
    CHECK_MESSAGE(std::fabs(got[i] - expect.values[i]) <= bound, "element " << i);
  }
  // Against the unrounded f32 inputs the error is dominated by input rounding: each product
  // has relative error <= 2 * 2^-9, so |err| <= (2^-8 + 2^-8) sum|a||b|.
  ref::Array exact = ref::matmul(to_array(a), to_array(b), false, false);
  for (size_t i = 0; i < got.size(); ++i)
    CHECK(std::fabs(got[i] - exact.values[i]) <= std::ldexp(1.0, -7) * abs_sum.values[i] + 1e-6);
  // bf16 backward runs and produces bf16 grads of the right shape.
  Tensor ab = a.to(DType::kBF16).set_requires_grad(true),
         bb = b.to(DType::kBF16).set_requires_grad(true);
  backward(sum(matmul(ab, bb)));
  CHECK(ab.grad().dtype() == DType::kBF16);
  CHECK(bb.grad().shape() == Shape{k, n});
}

TEST_CASE("softmax and log-softmax over the last dim") {
  Tensor x = random_tensor({3, 7}, 800, -3, 3);
  check_close(softmax(x), ref::softmax_last(to_array(x), false), 1e-5, 1e-7, "softmax");
  check_close(log_softmax(x), ref::softmax_last(to_array(x), true), 1e-5, 1e-6, "log_softmax");
  Tensor xt = random_tensor({7, 3}, 801, -3, 3).transpose(0, 1);
  check_close(softmax(xt), ref::softmax_last(to_array(xt), false), 1e-5, 1e-7, "softmax strided");
  check_gradients([](const std::vector<Tensor>& in) { return softmax(in[0]); },
                  {random_tensor({2, 5}, 802, -2, 2, true)}, "softmax");
  check_gradients([](const std::vector<Tensor>& in) { return log_softmax(in[0]); },
                  {random_tensor({2, 5}, 803, -2, 2, true)}, "log_softmax");
  CHECK(softmax(Tensor::empty({0, 4})).shape() == Shape{0, 4});
  // Large logits stay finite.
  Tensor big = Tensor::from_vector({1000, 0, -1000}, {1, 3});
  std::vector<float> s = softmax(big).to_vector();
  CHECK(s[0] == doctest::Approx(1.0));
  CHECK(s[2] == 0.0f);
  // bf16 input: error bounded by bf16 output rounding on top of the rounded input's result.
  Tensor xb = x.to(DType::kBF16);
  ref::Array expect = ref::softmax_last(to_array(xb), false);
  check_close(softmax(xb), expect, std::ldexp(1.0, -8), 1e-6, "softmax bf16");
}

TEST_CASE("layer norm and rms norm") {
  const int64_t c = 6;
  Tensor x = random_tensor({2, 3, c}, 900, -2, 2);
  Tensor g = random_tensor({c}, 901, 0.5, 1.5), b = random_tensor({c}, 902, -0.5, 0.5);
  std::vector<float> gv = g.to_vector(), bv = b.to_vector();
  ref::Values gd(gv.begin(), gv.end()), bd(bv.begin(), bv.end());
  check_close(layer_norm(x, g, b, 1e-5), ref::layer_norm_last(to_array(x), gd, bd, 1e-5), 1e-4,
              1e-5, "layer_norm");
  check_close(layer_norm(x, g, Tensor(), 1e-5), ref::layer_norm_last(to_array(x), gd, {}, 1e-5),
              1e-4, 1e-5, "layer_norm no bias");
  check_close(rms_norm(x, g, 1e-6), ref::rms_norm_last(to_array(x), gd, 1e-6), 1e-5, 1e-6,
              "rms_norm");
  check_gradients(
      [](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2], 1e-5); },
      {random_tensor({3, c}, 903, -2, 2, true), random_tensor({c}, 904, 0.5, 1.5, true),
       random_tensor({c}, 905, -1, 1, true)},
      "layer_norm");
  check_gradients(
      [](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1], 1e-6); },
      {random_tensor({3, c}, 906, -2, 2, true), random_tensor({c}, 907, 0.5, 1.5, true)},
      "rms_norm");
  CHECK_THROWS_AS(layer_norm(x, random_tensor({c + 1}, 1), Tensor()), patchbay::Error);
}

// Large inputs take the oneDNN path, small ones the plain loops (checked above against finite
// differences). Rows are independent for these ops, so the gradient of the first rows of a
// large input must equal the gradient of those rows run alone.
TEST_CASE("oneDNN paths (large inputs) agree with references and with the loop paths") {
  const int64_t rows = 1024, cols = 32;  // 32768 elements: above the oneDNN threshold
  Tensor x = random_tensor({rows, cols}, 1500, -2, 2);
  Tensor gain = random_tensor({cols}, 1501, 0.5, 1.5),
         bias = random_tensor({cols}, 1502, -0.5, 0.5);
  std::vector<float> gv = gain.to_vector(), bv = bias.to_vector();
  check_close(softmax(x), ref::softmax_last(to_array(x), false), 1e-5, 1e-7, "softmax large");
  check_close(log_softmax(x), ref::softmax_last(to_array(x), true), 1e-5, 1e-5,
              "log_softmax large");
  check_close(layer_norm(x, gain, bias),
              ref::layer_norm_last(to_array(x), ref::Values(gv.begin(), gv.end()),
                                   ref::Values(bv.begin(), bv.end()), 1e-5),
              1e-4, 1e-4, "layer_norm large");
  check_close(gelu_erf(x), ref::unary(to_array(x), ref::gelu_erf), 1e-5, 1e-5, "gelu_erf large");
  check_close(silu(x), ref::unary(to_array(x), ref::silu), 1e-5, 1e-5, "silu large");

  using RowOp = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<const char*, RowOp>> ops = {
      {"softmax", [](const Tensor& t) { return softmax(t); }},
      {"log_softmax", [](const Tensor& t) { return log_softmax(t); }},
      {"layer_norm", [&](const Tensor& t) { return layer_norm(t, gain, bias); }},
      {"gelu_tanh", [](const Tensor& t) { return gelu_tanh(t); }},
      {"relu", [](const Tensor& t) { return relu(t); }},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
      {"exp", [](const Tensor& t) { return exp(t); }}};
  Tensor w = random_tensor({rows, cols}, 1503, 0.5, 1.5);
  for (const auto& [name, op] : ops) {
    Tensor big = x.clone().set_requires_grad(true);
    backward(sum(mul(op(big), w)));
    Tensor small = x.narrow(0, 0, 4).clone().set_requires_grad(true);
    backward(sum(mul(op(small), w.narrow(0, 0, 4))));
    ref::Array expect = to_array(small.grad());
    check_close(big.grad().narrow(0, 0, 4), expect, 1e-4, 1e-5,
                std::string(name) + " large-vs-small grad");
  }
  // matmul above the loop threshold, gradients against reference products.
  Tensor a = random_tensor({48, 64}, 1504).set_requires_grad(true),
         b = random_tensor({64, 40}, 1505).set_requires_grad(true);
  Tensor dc = random_tensor({48, 40}, 1506);
  Tensor c = matmul(a, b);
  check_close(c, ref::matmul(to_array(a), to_array(b), false, false), 1e-5, 1e-5, "matmul large");
  backward(c, dc);
  check_close(a.grad(), ref::matmul(to_array(dc), to_array(b), false, true), 1e-5, 1e-5,
              "matmul large dA");
  check_close(b.grad(), ref::matmul(to_array(a), to_array(dc), true, false), 1e-5, 1e-5,
              "matmul large dB");
}
