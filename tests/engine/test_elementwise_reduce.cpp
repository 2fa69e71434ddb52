// Element-wise, activation, reduction, shape, concat/stack, masking and dropout ops: forward
// against the naive references and backward against central finite differences.
#include <doctest/doctest.h>

#include <cmath>

#include "common/error.hpp"
#include "test_util.hpp"

using namespace patchbay::engine;
using namespace patchbay::engine::testing;

namespace {
using UnaryOp = Tensor (*)(const Tensor&);
struct UnaryCase {
  const char* name;
  UnaryOp op;
  double (*reference)(double);
  double low, high;  // input range keeping the function smooth and defined
};
double ref_rsqrt(double x) { return 1.0 / std::sqrt(x); }
double ref_relu(double x) { return x > 0 ? x : 0; }
double ref_neg(double x) { return -x; }
double ref_abs(double x) { return std::fabs(x); }
double ref_exp(double x) { return std::exp(x); }
double ref_log(double x) { return std::log(x); }
double ref_sqrt(double x) { return std::sqrt(x); }
double ref_tanh(double x) { return std::tanh(x); }
}  // namespace

TEST_CASE("unary ops and activations: forward and gradient") {
  const UnaryCase cases[] = {
      {"neg", &neg, ref_neg, -2, 2},
      {"abs", &abs, ref_abs, 0.1, 2},  // away from the kink
      {"exp", &exp, ref_exp, -2, 2},
      {"log", &log, ref_log, 0.5, 3},
      {"sqrt", &sqrt, ref_sqrt, 0.5, 3},
      {"rsqrt", &rsqrt, ref_rsqrt, 0.5, 3},
      {"tanh", &tanh, ref_tanh, -2, 2},
      {"sigmoid", &sigmoid, ref::sigmoid, -3, 3},
      {"relu", &relu, ref_relu, 0.1, 2},
      {"gelu_tanh", &gelu_tanh, ref::gelu_tanh, -3, 3},
      {"gelu_erf", &gelu_erf, ref::gelu_erf, -3, 3},
      {"silu", &silu, ref::silu, -3, 3},
  };
  uint64_t seed = 100;
  for (const UnaryCase& c : cases) {
    Tensor x = random_tensor({3, 5}, seed++, c.low, c.high);
    check_close(c.op(x), ref::unary(to_array(x), c.reference), 1e-5, 1e-5,
                std::string(c.name) + " forward");
    // non-contiguous input
    Tensor xt = random_tensor({5, 3}, seed++, c.low, c.high).transpose(0, 1);
    check_close(c.op(xt), ref::unary(to_array(xt), c.reference), 1e-5, 1e-5,
                std::string(c.name) + " strided");
    check_gradients([&](const std::vector<Tensor>& in) { return c.op(in[0]); },
                    {random_tensor({2, 4}, seed++, c.low, c.high, true)}, c.name);
  }
  // relu gradient on negative side is 0
  Tensor x = Tensor::from_vector({-1, 2}, {2}).set_requires_grad(true);
  backward(sum(relu(x)));
  CHECK(x.grad().to_vector() == std::vector<float>{0, 1});
}

TEST_CASE("scalar ops") {
  Tensor x = random_tensor({4}, 7, 0.5, 2);
  check_close(pow_scalar(x, 2.5),
              ref::unary(to_array(x), [](double v) { return std::pow(v, 2.5); }), 1e-5, 1e-6,
              "pow");
  check_close(add_scalar(x, 3), ref::unary(to_array(x), [](double v) { return v + 3; }), 1e-6, 1e-6,
              "add_scalar");
  check_close(x * 3.0, ref::unary(to_array(x), [](double v) { return v * 3; }), 1e-6, 1e-6,
              "mul_scalar");
  check_gradients([](const std::vector<Tensor>& in) { return pow_scalar(in[0], 3.0); },
                  {random_tensor({5}, 8, 0.5, 2, true)}, "pow_scalar");
  check_gradients(
      [](const std::vector<Tensor>& in) { return add_scalar(mul_scalar(in[0], -2), 1); },
      {random_tensor({5}, 9, -1, 1, true)}, "scalar chain");
}

TEST_CASE("binary ops broadcast both ways and differentiate") {
  struct Case {
    const char* name;
    Tensor (*op)(const Tensor&, const Tensor&);
    double (*ref)(double, double);
  };
  const Case cases[] = {
      {"sub", &sub, [](double a, double b) { return a - b; }},
      {"mul", &mul, [](double a, double b) { return a * b; }},
      {"div", &div, [](double a, double b) { return a / b; }},
  };
  const std::vector<std::pair<Shape, Shape>> shapes = {{{2, 3}, {2, 3}},    {{2, 3}, {3}},
                                                       {{2, 1, 4}, {3, 1}}, {{1}, {2, 2}},
                                                       {{}, {3}},           {{0, 3}, {3}}};
  uint64_t seed = 200;
  for (const Case& c : cases)
    for (const auto& [sa, sb] : shapes) {
      Tensor a = random_tensor(sa, seed++, 0.5, 2), b = random_tensor(sb, seed++, 0.5, 2);
      std::string what = std::string(c.name) + " " + shape_str(sa) + " x " + shape_str(sb);
      check_close(c.op(a, b), ref::broadcast_binary(to_array(a), to_array(b), c.ref), 1e-6, 1e-6,
                  what);
      if (shape_numel(sa) > 0)
        check_gradients(
            [&](const std::vector<Tensor>& in) { return c.op(in[0], in[1]); },
            {random_tensor(sa, seed++, 0.5, 2, true), random_tensor(sb, seed++, 0.5, 2, true)},
            what);
    }
  CHECK_THROWS_AS(mul(random_tensor({2, 3}, 1), random_tensor({2}, 2)), patchbay::Error);
}

TEST_CASE("reductions over dims with keepdim") {
  Tensor x = random_tensor({2, 3, 4}, 300);
  const std::vector<std::vector<int64_t>> dim_sets = {{}, {0}, {-1}, {0, 2}, {1}};
  for (const auto& dims : dim_sets)
    for (bool keep : {false, true}) {
      std::string what = "dims " + shape_str(dims) + (keep ? " keep" : "");
      check_close(sum(x, dims, keep), ref::reduce(to_array(x), dims, keep, "sum"), 1e-5, 1e-6,
                  "sum " + what);
      check_close(mean(x, dims, keep), ref::reduce(to_array(x), dims, keep, "mean"), 1e-5, 1e-6,
                  "mean " + what);
      check_close(max(x, dims, keep), ref::reduce(to_array(x), dims, keep, "max"), 0, 0,
                  "max " + what);
      check_gradients([&](const std::vector<Tensor>& in) { return sum(in[0], dims, keep); },
                      {random_tensor({2, 3, 4}, 301, -1, 1, true)}, "sum grad " + what);
      check_gradients([&](const std::vector<Tensor>& in) { return mean(in[0], dims, keep); },
                      {random_tensor({2, 3, 4}, 302, -1, 1, true)}, "mean grad " + what);
      check_gradients([&](const std::vector<Tensor>& in) { return max(in[0], dims, keep); },
                      {random_tensor({2, 3, 4}, 303, -1, 1, true)}, "max grad " + what);
    }
  // Strided input and zero-size reduction.
  Tensor xt = x.permute({2, 0, 1});
  check_close(sum(xt, {1}), ref::reduce(to_array(xt), {1}, false, "sum"), 1e-5, 1e-6,
              "sum strided");
  CHECK(sum(Tensor::empty({0, 3}), {0}).to_vector() == std::vector<float>{0, 0, 0});
  CHECK_THROWS_AS(max(Tensor::empty({0, 3}), {0}), patchbay::Error);
}

TEST_CASE("shape ops: permute, slice, concat, stack with gradients") {
  Tensor x = random_tensor({2, 3, 4}, 400);
  check_close(permute(x, {2, 0, 1}).contiguous(), ref::permute(to_array(x), {2, 0, 1}), 0, 0,
              "permute");
  Tensor a = random_tensor({2, 3}, 401), b = random_tensor({2, 1}, 402),
         c = random_tensor({2, 2}, 403);
  check_close(concat({a, b, c}, 1), ref::concat({to_array(a), to_array(b), to_array(c)}, 1), 0, 0,
              "concat");
  Tensor s = stack({a, a}, 0);
  CHECK(s.shape() == Shape{2, 2, 3});
  check_gradients(
      [](const std::vector<Tensor>& in) {
        Tensor p = permute(in[0], {1, 0, 2}).reshape({3, 8});
        Tensor sl = p.slice(1, 1, 7, 2);                // [3, 3]
        return concat({sl, in[1].transpose(0, 1)}, 0);  // [3+3, 3]
      },
      {random_tensor({2, 3, 4}, 404, -1, 1, true), random_tensor({3, 3}, 405, -1, 1, true)},
      "view chain");
  check_gradients(
      [](const std::vector<Tensor>& in) {
        return stack({in[0], in[1]}, 1);
      },
      {random_tensor({2, 3}, 406, -1, 1, true), random_tensor({2, 3}, 407, -1, 1, true)}, "stack");
  check_gradients(
      [](const std::vector<Tensor>& in) {
        return in[0].unsqueeze(1).expand({3, 4, 2});
      },
      {random_tensor({3, 2}, 408, -1, 1, true)}, "expand");
  check_gradients(
      [](const std::vector<Tensor>& in) { return in[0].to(DType::kBF16).to(DType::kF32); },
      {random_tensor({3}, 409, -1, 1, true)}, "to dtype", 1e-2, 5e-2, 5e-2);
}

TEST_CASE("masked_fill and dropout") {
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor mask = Tensor::from_vector({1, 0, 1}, {3}, DType::kI32);
  CHECK(masked_fill(x, mask, -9).to_vector() == std::vector<float>{-9, 2, -9, -9, 5, -9});
  check_gradients([&](const std::vector<Tensor>& in) { return masked_fill(in[0], mask, 0.5); },
                  {random_tensor({2, 3}, 500, -1, 1, true)}, "masked_fill");
  Generator gen(7);
  Tensor big = ones({10000});
  Tensor d = dropout(big, 0.25, gen);
  std::vector<float> v = d.to_vector();
  int zeros_count = 0;
  for (float e : v) {
    CHECK((e == 0.0f || std::fabs(e - 1.0f / 0.75f) < 1e-6));
    zeros_count += e == 0.0f;
  }
  CHECK(zeros_count > 2200);
  CHECK(zeros_count < 2800);
  Generator gen_a(11), gen_b(11);
  CHECK(dropout(big, 0.5, gen_a).to_vector() == dropout(big, 0.5, gen_b).to_vector());
  CHECK(dropout(big, 0.5, gen_a, /*training=*/false).data_ptr() == big.data_ptr());
  Tensor xg = random_tensor({50}, 501, -1, 1, true);
  Generator g1(3);
  Tensor y = dropout(xg, 0.5, g1);
  backward(sum(y));
  std::vector<float> gy = xg.grad().to_vector(), yv = y.to_vector(), xv = xg.to_vector();
  for (size_t i = 0; i < gy.size(); ++i) CHECK(gy[i] == doctest::Approx(yv[i] == 0.0f ? 0.0 : 2.0));
}
