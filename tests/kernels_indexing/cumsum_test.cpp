// Cumulative-sum kernels: known answers, agreement with the O(n²) reference over shapes
// that take every code path (outer slices, one slice with blocked lines, in place), and
// the backward pass checked by the adjoint identity <g, cumsum(x)> = <cumsum_backward(g), x>.
#include "patchbay/kernels/cumsum.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "random_fill.hpp"

namespace pk = patchbay::kernels;
using pk::testing::dot;
using pk::testing::random_floats;

TEST_CASE("cumsum known answers forward and reverse") {
  const std::vector<float> x = {1, 2, 3, 4};
  std::vector<float> out(4);
  pk::cumsum_forward(x.data(), 1, 4, 1, false, out.data());
  CHECK(out == std::vector<float>{1, 3, 6, 10});
  pk::cumsum_forward(x.data(), 1, 4, 1, true, out.data());
  CHECK(out == std::vector<float>{10, 9, 7, 4});
  // Along dim 0 of a [2, 2] matrix: inner = 2.
  pk::cumsum_forward(x.data(), 1, 2, 2, false, out.data());
  CHECK(out == std::vector<float>{1, 2, 4, 6});
}

TEST_CASE("cumsum matches the reference on every code path") {
  struct Case {
    int64_t outer, length, inner;
  };
  // [outer>1, small inner], [outer>1, inner over one block], [one slice, many lines,
  // threaded blocks], [a long single line].
  const Case cases[] = {{37, 50, 3}, {3, 20, 700}, {1, 40, 1500}, {1, 5000, 1}};
  for (const Case& c : cases) {
    CAPTURE(c.outer);
    CAPTURE(c.length);
    CAPTURE(c.inner);
    const auto x = random_floats(size_t(c.outer * c.length * c.inner), 41);
    for (bool reverse : {false, true}) {
      std::vector<float> out(x.size()), expected(x.size());
      pk::cumsum_forward(x.data(), c.outer, c.length, c.inner, reverse, out.data());
      pk::cumsum_forward_reference(x.data(), c.outer, c.length, c.inner, reverse, expected.data());
      // Both sum in double and round once; only summation order differs.
      double worst = 0.0;
      for (size_t i = 0; i < x.size(); ++i)
        worst = std::max(worst, std::abs(double(out[i]) - double(expected[i])));
      CHECK(worst < 1e-4);

      auto in_place = x;
      pk::cumsum_forward(in_place.data(), c.outer, c.length, c.inner, reverse, in_place.data());
      CHECK(in_place == out);
    }
  }
}

TEST_CASE("cumsum backward is the adjoint of forward") {
  const int64_t outer = 4, length = 33, inner = 5;
  const auto x = random_floats(size_t(outer * length * inner), 51);
  const auto g = random_floats(x.size(), 52);
  for (bool reverse : {false, true}) {
    std::vector<float> y(x.size()), grad_x(x.size());
    pk::cumsum_forward(x.data(), outer, length, inner, reverse, y.data());
    pk::cumsum_backward(g.data(), outer, length, inner, reverse, grad_x.data());
    CHECK(dot(g, y) == doctest::Approx(dot(grad_x, x)).epsilon(1e-5));
  }
}
