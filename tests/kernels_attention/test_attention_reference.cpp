// The reference itself, checked without the flash kernel: its backward against central
// finite differences of its forward (loss = sum(out * dout)), on a causal GQA shape with
// Tq < Tk so the bottom-right mask and the group sums are both exercised.
#include <doctest/doctest.h>

#include <cmath>

#include "attention_test_tensors.hpp"
#include "patchbay/kernels/attention_reference.hpp"

namespace pk = patchbay::kernels;
using pk::testing::AttentionShape;
using pk::testing::AttentionTensors;

namespace {

double loss(AttentionTensors& t) {
  REQUIRE(pk::attention_reference_forward(t.params).empty());
  const pk::AttentionParams& p = t.params;
  double sum = 0;
  for (std::int64_t h = 0; h < p.heads; ++h)
    for (std::int64_t i = 0; i < p.q_len; ++i)
      for (std::int64_t x = 0; x < p.head_dim; ++x) sum += double(t.at("out", 0, h, i, x)) * t.at("dout", 0, h, i, x);
  return sum;
}

}  // namespace

TEST_CASE("reference backward matches finite differences of the reference forward") {
  AttentionTensors t(AttentionShape{1, 4, 2, 5, 9, 8, true, false}, 3);
  REQUIRE(pk::attention_reference_backward(t.params).empty());
  const double eps = 1e-2;
  struct Probe {
    const char* input;
    const char* grad;
    std::int64_t h, pos, x;
  };
  const Probe probes[] = {{"q", "dq", 0, 0, 1}, {"q", "dq", 3, 4, 7}, {"k", "dk", 0, 2, 3},
                          {"k", "dk", 1, 8, 0}, {"v", "dv", 1, 5, 6}, {"v", "dv", 0, 0, 2}};
  for (const Probe& probe : probes) {
    CAPTURE(probe.input);
    CAPTURE(probe.pos);
    float& value = t.input_at(probe.input, 0, probe.h, probe.pos, probe.x);
    const float saved = value;
    value = saved + float(eps);
    const double up = loss(t);
    value = saved - float(eps);
    const double down = loss(t);
    value = saved;
    const double numeric = (up - down) / (2 * eps);
    CHECK(t.at(probe.grad, 0, probe.h, probe.pos, probe.x) == doctest::Approx(numeric).epsilon(2e-3));
  }
  // Key 8 is seen only by the last query (bottom-right), key 0 by all: both gradients nonzero.
  CHECK(std::fabs(t.at("dk", 0, 1, 8, 0)) > 0);
}
