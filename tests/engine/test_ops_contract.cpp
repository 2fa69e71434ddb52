// The ops contract of sdk/include/patchbay/ops.h, one check per statement that a plugin may
// rely on, through the C table (patchbay::Ops / patchbay::Tensor over host_ops_table()), as a
// plugin sees it: masked_fill's mask semantics against a naive loop, dtype and broadcasting
// rules, which ops alias their input, reductions' shapes and max's gradient, to_dtype's
// rounding, softmax with -inf, slice clamping.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/ops_table.hpp"
#include "patchbay/tensor.hpp"

namespace {

using patchbay::Tensor;

const patchbay::Ops& ops() {
  static const patchbay::Ops instance(patchbay::engine::host_ops_table());
  return instance;
}

const float kInf = std::numeric_limits<float>::infinity();

std::vector<float> random_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// The status code a failing table call returns (PB_STATUS_OK when it succeeds).
template <class Call>
pb_status_code code_of(Call&& call) {
  try {
    call();
    return PB_STATUS_OK;
  } catch (const patchbay::PluginError& e) {
    return e.code();
  }
}

// Writes `values` into t's elements through the table (t may be a strided view).
void write(const Tensor& t, const std::vector<float>& values) {
  const pb_ops_table* table = t.ops();
  REQUIRE(table->copy_from_host(t.handle(), values.data(), values.size() * sizeof(float)) == nullptr);
}

}  // namespace

TEST_CASE("masked_fill: non-zero mask elements fill, of any mask dtype, against a naive loop") {
  const int64_t b = 3, t = 5;
  const std::vector<float> x = random_values(b * t, 1);
  std::vector<int64_t> mask_ids(b * t);
  for (size_t i = 0; i < mask_ids.size(); ++i) mask_ids[i] = (i * 7 % 3 == 0) ? (i % 2 ? -4 : 1) : 0;
  std::vector<float> expected(x);
  for (size_t i = 0; i < x.size(); ++i)
    if (mask_ids[i] != 0) expected[i] = 9.5f;
  const Tensor xt = ops().from_vector(x, {b, t});
  const Tensor mask_i64 = ops().from_vector(mask_ids, {b, t});
  for (const pb_dtype dtype : {PB_DTYPE_I64, PB_DTYPE_I32, PB_DTYPE_F32, PB_DTYPE_BF16, PB_DTYPE_F16}) {
    CAPTURE(static_cast<int>(dtype));
    CHECK(xt.masked_fill(mask_i64.to(dtype), 9.5).to_vector() == expected);
  }
  CHECK(xt.to_vector() == x);  // x is not written
}

TEST_CASE("masked_fill: a NaN mask element counts as non-zero") {
  const Tensor x = ops().from_vector(std::vector<float>{1, 2, 3}, {3});
  const Tensor mask = ops().from_vector(std::vector<float>{0, std::nanf(""), 0}, {3});
  CHECK(x.masked_fill(mask, -1.0).to_vector() == std::vector<float>{1, -1, 3});
}

TEST_CASE("masked_fill: the mask broadcasts to x but never grows it") {
  const Tensor x = ops().from_vector(random_values(2 * 3 * 4, 2), {2, 3, 4});
  const Tensor row = ops().from_vector(std::vector<int64_t>{1, 0, 0, 1}, {4});  // [4] over [2, 3, 4]
  const std::vector<float> y = x.masked_fill(row, 0.0).to_vector(), xv = x.to_vector();
  for (size_t i = 0; i < xv.size(); ++i) CHECK(y[i] == (i % 4 == 0 || i % 4 == 3 ? 0.0f : xv[i]));
  const Tensor per_row = ops().from_vector(std::vector<int64_t>{0, 1, 0}, {3, 1});  // [3, 1]
  const std::vector<float> z = x.masked_fill(per_row, 7.0).to_vector();
  for (size_t i = 0; i < xv.size(); ++i) CHECK(z[i] == ((i / 4) % 3 == 1 ? 7.0f : xv[i]));
  const Tensor bigger = ops().zeros({5, 2, 3, 4}, PB_DTYPE_I64);
  CHECK(code_of([&] { (void)x.masked_fill(bigger, 0.0); }) == PB_STATUS_INVALID_ARGUMENT);
  const Tensor ints = ops().zeros({4}, PB_DTYPE_I64);
  CHECK(code_of([&] { (void)ints.masked_fill(row, 0.0); }) == PB_STATUS_INVALID_ARGUMENT);  // x float
}

TEST_CASE("masked_fill: -inf is allowed and softmax gives the filled entries probability 0") {
  const Tensor scores = ops().from_vector(std::vector<float>{0.5f, 1.0f, -0.5f, 2.0f}, {1, 4});
  const Tensor future = ops().from_vector(std::vector<int64_t>{0, 0, 1, 1}, {1, 4});
  const std::vector<float> p = scores.masked_fill(future, -kInf).softmax().to_vector();
  CHECK(p[2] == 0.0f);
  CHECK(p[3] == 0.0f);
  CHECK(p[0] + p[1] == doctest::Approx(1.0));
  CHECK(p[1] / p[0] == doctest::Approx(std::exp(0.5)));
  // A row whose every entry is -inf is NaN (IEEE): masks must leave one entry per row.
  const Tensor all = ops().from_vector(std::vector<int64_t>{1, 1, 1, 1}, {1, 4});
  for (const float v : scores.masked_fill(all, -kInf).softmax().to_vector()) CHECK(std::isnan(v));
}

TEST_CASE("masked_fill: the gradient is zero where the mask fills, passed through elsewhere") {
  Tensor x = ops().from_vector(random_values(6, 3), {2, 3});
  x.requires_grad(true);
  const Tensor mask = ops().from_vector(std::vector<int64_t>{1, 0, 0, 0, 0, 1}, {2, 3});
  const Tensor weights = ops().from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  (x.masked_fill(mask, 100.0) * weights).sum().backward();
  CHECK(x.grad().to_vector() == std::vector<float>{0, 2, 3, 4, 5, 0});
}

TEST_CASE("binary ops: one dtype (no promotion), float only, PyTorch broadcasting") {
  const Tensor a = ops().from_vector(random_values(2 * 3, 4), {2, 1, 3});
  const Tensor b = ops().from_vector(random_values(4, 5), {4, 1});
  const Tensor sum = a + b;
  CHECK(sum.shape() == std::vector<int64_t>{2, 4, 3});
  const std::vector<float> av = a.to_vector(), bv = b.to_vector(), sv = sum.to_vector();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) CHECK(sv[(i * 4 + j) * 3 + k] == av[i * 3 + k] + bv[j]);
  CHECK(code_of([&] { (void)(a + b.to(PB_DTYPE_BF16)); }) == PB_STATUS_INVALID_ARGUMENT);
  CHECK((a.to(PB_DTYPE_BF16) + b.to(PB_DTYPE_BF16)).dtype() == PB_DTYPE_BF16);
  const Tensor ids = ops().zeros({3}, PB_DTYPE_I64);
  CHECK(code_of([&] { (void)(ids + ids); }) == PB_STATUS_INVALID_ARGUMENT);
  CHECK(code_of([&] { (void)ids.exp(); }) == PB_STATUS_INVALID_ARGUMENT);
  const Tensor c = ops().zeros({3, 2});
  CHECK(code_of([&] { (void)(a + c); }) == PB_STATUS_INVALID_ARGUMENT);  // 3 vs 2 in the last dim
}

TEST_CASE("matmul: batch dims broadcast, a 2-D b serves every batch, transpose flags") {
  const Tensor a = ops().from_vector(random_values(2 * 3 * 4, 6), {2, 3, 4});
  const Tensor w = ops().from_vector(random_values(5 * 4, 7), {5, 4});  // [N, K], used transposed
  const Tensor y = a.matmul(w, false, true);
  CHECK(y.shape() == std::vector<int64_t>{2, 3, 5});
  const std::vector<float> av = a.to_vector(), wv = w.to_vector(), yv = y.to_vector();
  for (int bi = 0; bi < 2; ++bi)
    for (int m = 0; m < 3; ++m)
      for (int n = 0; n < 5; ++n) {
        double ref = 0;
        for (int k = 0; k < 4; ++k) ref += double(av[(bi * 3 + m) * 4 + k]) * wv[n * 4 + k];
        CHECK(yv[(bi * 3 + m) * 5 + n] == doctest::Approx(ref).epsilon(1e-5));
      }
  CHECK(code_of([&] { (void)a.matmul(w); }) == PB_STATUS_INVALID_ARGUMENT);  // K 4 vs 5
}

TEST_CASE("aliasing: views share storage with their input, other ops do not") {
  const Tensor base = ops().zeros({2, 4});
  write(base.slice(1, 1, 3), {1, 2, 3, 4});  // columns 1..2 of both rows
  CHECK(base.to_vector() == std::vector<float>{0, 1, 2, 0, 0, 3, 4, 0});
  write(base.transpose(0, 1).slice(0, 0, 1), {-1, -2});  // column 0 through a transpose
  CHECK(base.to_vector() == std::vector<float>{-1, 1, 2, 0, -2, 3, 4, 0});
  write(base.view({8}).slice(0, 7, 8), {9});
  CHECK(base.to_vector()[7] == 9.0f);
  write(base.to(PB_DTYPE_F32).slice(0, 0, 1), {5, 5, 5, 5});  // to_dtype, same dtype: x itself
  CHECK(base.to_vector()[0] == 5.0f);
  // Fresh storage: reshape of a non-contiguous view copies, as do arithmetic and contiguous().
  const Tensor copied = base.transpose(0, 1).reshape({8});
  write(copied, std::vector<float>(8, 0.0f));
  CHECK(base.to_vector()[0] == 5.0f);
  const Tensor sum = base + 0.0;
  write(sum, std::vector<float>(8, 0.0f));
  CHECK(base.to_vector()[0] == 5.0f);
}

TEST_CASE("reductions: shapes with and without keepdim, negative dims, max's gradient") {
  const Tensor x = ops().from_vector(std::vector<float>{1, 3, 3, 0, 2, 1}, {2, 3});
  CHECK(x.sum().dim() == 0);
  CHECK(x.sum().item() == 10.0);
  CHECK(x.mean({-1}, true).shape() == std::vector<int64_t>{2, 1});
  CHECK(x.max({0}).shape() == std::vector<int64_t>{3});
  Tensor leaf = ops().from_vector(std::vector<float>{1, 3, 3, 0, 2, 1}, {2, 3});
  leaf.requires_grad(true);
  leaf.max({1}).sum().backward();
  CHECK(leaf.grad().to_vector() == std::vector<float>{0, 1, 0, 0, 1, 0});  // first maximal element
}

TEST_CASE("to_dtype: floats round to nearest even, integers truncate toward zero") {
  // bf16 keeps 8 significant bits: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 -> 1 (even);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6 -> 1 + 2^-6 (even).
  const Tensor x = ops().from_vector(std::vector<float>{1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -1.7f, 2.9f}, {4});
  const std::vector<float> bf = x.to(PB_DTYPE_BF16).to_vector();
  CHECK(bf[0] == 1.0f);
  CHECK(bf[1] == 1.0f + 1.0f / 64);
  const std::vector<float> ints = x.to(PB_DTYPE_I32).to_vector();
  CHECK(ints[2] == -1.0f);
  CHECK(ints[3] == 2.0f);
}

TEST_CASE("slice: negative bounds count from the end and clamp; step must be positive") {
  const Tensor x = ops().from_vector(std::vector<float>{0, 1, 2, 3, 4, 5}, {6});
  CHECK(x.slice(0, -2, 100).to_vector() == std::vector<float>{4, 5});
  CHECK(x.slice(0, -100, 2).to_vector() == std::vector<float>{0, 1});
  CHECK(x.slice(0, 1, 6, 2).to_vector() == std::vector<float>{1, 3, 5});
  CHECK(x.slice(0, 4, 2).numel() == 0);
  CHECK(code_of([&] { (void)x.slice(0, 0, 6, 0); }) == PB_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("dropout: off in eval mode (the input itself), and keeps E[x] in training") {
  const Tensor x = ops().ones({20000});
  patchbay::Generator gen(ops().table(), 11);
  const Tensor same = x.dropout(0.3, gen, false);
  write(same.slice(0, 0, 1), {4});
  CHECK(x.to_vector()[0] == 4.0f);  // aliases
  const std::vector<float> kept = ops().ones({20000}).dropout(0.3, gen, true).to_vector();
  double mean = 0;
  int zeros = 0;
  for (const float v : kept) {
    mean += v;
    zeros += v == 0.0f;
    CHECK((v == 0.0f || v == doctest::Approx(1.0 / 0.7)));
  }
  CHECK(mean / 20000 == doctest::Approx(1.0).epsilon(0.03));
  CHECK(zeros / 20000.0 == doctest::Approx(0.3).epsilon(0.05));
}
