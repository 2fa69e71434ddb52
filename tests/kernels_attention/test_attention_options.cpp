// The attention options of the kernels (sliding window, ALiBi bias): the flash kernel against
// the double reference (forward and backward, causal and not, decode Tq < Tk, GQA, strided,
// every ISA), the reference against finite differences with both options on, a hand-computed
// ALiBi answer, and proof that keys outside the window are never read (they hold NaN).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attention_test_tensors.hpp"
#include "patchbay/kernels/attention_flash.hpp"
#include "patchbay/kernels/attention_reference.hpp"

namespace pk = patchbay::kernels;
using pk::testing::AttentionShape;
using pk::testing::AttentionTensors;

namespace {

constexpr double kTolerance = 1e-4;  // as in test_attention_flash.cpp

struct OptionCase {
  AttentionShape shape;
  std::int64_t window;
  bool alibi;
};

std::vector<OptionCase> option_cases() {
  auto shape = [](std::int64_t b, std::int64_t h, std::int64_t hkv, std::int64_t tq,
                  std::int64_t tk, std::int64_t d, bool causal,
                  bool strided) { return AttentionShape{b, h, hkv, tq, tk, d, causal, strided}; };
  return {
      {shape(1, 2, 2, 150, 150, 64, true, false), 17, false},  // window inside tiles
      {shape(1, 2, 2, 150, 150, 64, true, false), 64, true},   // window = one tile, ALiBi
      {shape(1, 2, 2, 150, 150, 64, true, false), 1, false},   // each query sees itself only
      {shape(1, 2, 2, 150, 150, 64, true, false), 0, true},    // ALiBi alone
      {shape(1, 2, 2, 100, 100, 32, true, false), 500, true},  // window longer than T
      {shape(2, 3, 3, 130, 130, 32, false, false), 20, true},  // non-causal: |pos - j| < 20
      {shape(1, 2, 2, 70, 70, 32, false, false), 0, true},     // non-causal ALiBi, |pos - j|
      {shape(1, 2, 2, 1, 200, 64, true, false), 30, true},     // decode: window at the end
      {shape(2, 8, 2, 1, 100, 64, true, true), 70, true},      // GQA decode, strided cache
      {shape(1, 2, 2, 5, 64, 32, true, false), 10, true},      // chunk after a cache
      {shape(1, 4, 2, 100, 100, 64, true, false), 33, true},   // GQA: slopes per query head
      {shape(1, 2, 1, 80, 20, 16, true, false), 5, true},      // Tq > Tk: rows see nothing
      {shape(1, 2, 1, 33, 77, 40, true, true), 12, true},      // D % 16 != 0, strided
      {shape(2, 4, 2, 1, 300, 40, false, false), 100, true},   // non-causal decode: two-sided
                                                               // window, ALiBi, GQA, D = 40
      {shape(1, 2, 2, 1, 150, 64, true, false), 0, true},      // decode, ALiBi alone
  };
}

std::vector<pk::KernelIsa> isas_on_this_cpu() {
  std::vector<pk::KernelIsa> isas = {pk::KernelIsa::generic};
  const pk::KernelIsa best = pk::attention_flash_resolved_isa();
  if (best == pk::KernelIsa::avx2 || best == pk::KernelIsa::avx512)
    isas.push_back(pk::KernelIsa::avx2);
  if (best == pk::KernelIsa::avx512) isas.push_back(pk::KernelIsa::avx512);
  return isas;
}

// Distinct slopes per head, as ALiBi's geometric sequence would give.
std::vector<float> test_slopes(std::int64_t heads) {
  std::vector<float> slopes;
  for (std::int64_t h = 0; h < heads; ++h) slopes.push_back(0.5f / float(1 << h));
  return slopes;
}

void apply(AttentionTensors& t, const OptionCase& c, const std::vector<float>& slopes) {
  t.params.window = c.window;
  t.params.alibi_slopes = c.alibi ? slopes.data() : nullptr;
}

double loss(AttentionTensors& t) {
  REQUIRE(pk::attention_reference_forward(t.params).empty());
  const pk::AttentionParams& p = t.params;
  double sum = 0;
  for (std::int64_t h = 0; h < p.heads; ++h)
    for (std::int64_t i = 0; i < p.q_len; ++i)
      for (std::int64_t x = 0; x < p.head_dim; ++x)
        sum += double(t.at("out", 0, h, i, x)) * t.at("dout", 0, h, i, x);
  return sum;
}

}  // namespace

TEST_CASE("flash with window and ALiBi matches the reference, forward and backward, every ISA") {
  int index = 0;
  for (const OptionCase& c : option_cases()) {
    ++index;
    const std::vector<float> slopes = test_slopes(c.shape.heads);
    AttentionTensors reference(c.shape, std::uint64_t(index) + 500);
    apply(reference, c, slopes);
    REQUIRE(pk::attention_reference_forward(reference.params).empty());
    REQUIRE(pk::attention_reference_backward(reference.params).empty());
    for (const pk::KernelIsa isa : isas_on_this_cpu()) {
      for (const int threads : {1, 3}) {
        CAPTURE(c.shape.describe());
        CAPTURE(c.window);
        CAPTURE(c.alibi);
        const std::string isa_name = pk::kernel_isa_name(isa);
        CAPTURE(isa_name);
        AttentionTensors flash(c.shape, std::uint64_t(index) + 500);
        apply(flash, c, slopes);
        flash.params.isa = isa;
        flash.params.num_threads = threads;
        REQUIRE(pk::attention_flash_forward(flash.params).empty());
        REQUIRE(pk::attention_flash_backward(flash.params).empty());
        CHECK(pk::testing::max_relative_diff(flash, reference, "out") < kTolerance);
        CHECK(pk::testing::max_lse_diff(flash, reference) < kTolerance);
        CHECK(pk::testing::max_relative_diff(flash, reference, "dq") < kTolerance);
        CHECK(pk::testing::max_relative_diff(flash, reference, "dk") < kTolerance);
        CHECK(pk::testing::max_relative_diff(flash, reference, "dv") < kTolerance);
        CHECK(flash.output_padding_untouched());
      }
    }
  }
}

TEST_CASE("the options change the result: a window or ALiBi is not ignored") {
  const AttentionShape shape{1, 2, 2, 40, 40, 16, true, false};
  const std::vector<float> slopes = test_slopes(2);
  AttentionTensors plain(shape, 3), windowed(shape, 3), biased(shape, 3);
  windowed.params.window = 4;
  biased.params.alibi_slopes = slopes.data();
  REQUIRE(pk::attention_flash_forward(plain.params).empty());
  REQUIRE(pk::attention_flash_forward(windowed.params).empty());
  REQUIRE(pk::attention_flash_forward(biased.params).empty());
  CHECK(pk::testing::max_relative_diff(windowed, plain, "out") > 1e-2);
  CHECK(pk::testing::max_relative_diff(biased, plain, "out") > 1e-2);
  // Rows 0..3 see at most 4 keys anyway: the window changes nothing there.
  for (std::int64_t i = 0; i < 4; ++i)
    CHECK(windowed.at("out", 0, 1, i, 5) ==
          doctest::Approx(plain.at("out", 0, 1, i, 5)).epsilon(1e-6));
}

TEST_CASE("ALiBi known answer: with zero scores the weights are softmax(-slope * distance)") {
  // q = 0: every score is 0, so query at position p weighs key j by exp(-m (p - j)) / Z.
  const AttentionShape shape{1, 1, 1, 3, 6, 16, true, false};
  AttentionTensors t(shape, 11);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t x = 0; x < 16; ++x) t.input_at("q", 0, 0, i, x) = 0.0f;
  const float slope = 0.75f;
  t.params.alibi_slopes = &slope;
  REQUIRE(pk::attention_flash_forward(t.params).empty());
  for (std::int64_t i = 0; i < 3; ++i) {
    const std::int64_t pos = i + 3;  // bottom-right: query i sits at position i + Tk - Tq
    double z = 0;
    for (std::int64_t j = 0; j <= pos; ++j) z += std::exp(-slope * double(pos - j));
    for (std::int64_t x = 0; x < 16; x += 5) {
      double expected = 0;
      for (std::int64_t j = 0; j <= pos; ++j)
        expected += std::exp(-slope * double(pos - j)) / z * t.at("v", 0, 0, j, x);
      CAPTURE(i);
      CHECK(t.at("out", 0, 0, i, x) == doctest::Approx(expected).epsilon(1e-5));
    }
    CHECK(t.lse_at(0, 0, i) == doctest::Approx(std::log(z)).epsilon(1e-5));
  }
}

TEST_CASE("keys before the window are never read (they hold NaN)") {
  // Decode and a short chunk with a window of 16 at the end of 1000 keys: NaN in keys and values
  // before the window would poison the output if any tile covering them were computed.
  for (const std::int64_t tq : {1, 7}) {
    CAPTURE(tq);
    const AttentionShape shape{1, 2, 2, tq, 1000, 32, true, false};
    AttentionTensors t(shape, 21);
    const std::int64_t first_visible = 1000 - tq - 16 + 1;
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t j = 0; j < first_visible; ++j)
        for (std::int64_t x = 0; x < 32; ++x) {
          t.input_at("k", 0, h, j, x) = std::numeric_limits<float>::quiet_NaN();
          t.input_at("v", 0, h, j, x) = std::numeric_limits<float>::quiet_NaN();
        }
    t.params.window = 16;
    REQUIRE(pk::attention_flash_forward(t.params).empty());
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t i = 0; i < tq; ++i)
        for (std::int64_t x = 0; x < 32; ++x) CHECK(std::isfinite(t.at("out", 0, h, i, x)));
  }
}

TEST_CASE("reference backward with window and ALiBi matches finite differences") {
  for (const bool causal : {true, false}) {
    CAPTURE(causal);
    AttentionTensors t(AttentionShape{1, 4, 2, 5, 9, 8, causal, false}, 7);
    const std::vector<float> slopes = test_slopes(4);
    t.params.window = 4;
    t.params.alibi_slopes = slopes.data();
    REQUIRE(pk::attention_reference_backward(t.params).empty());
    const double eps = 1e-2;
    struct Probe {
      const char* input;
      const char* grad;
      std::int64_t h, pos, x;
    };
    const Probe probes[] = {{"q", "dq", 0, 0, 1}, {"q", "dq", 3, 4, 7}, {"k", "dk", 0, 5, 3},
                            {"k", "dk", 1, 8, 0}, {"v", "dv", 1, 6, 6}, {"v", "dv", 0, 4, 2}};
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
      CHECK(t.at(probe.grad, 0, probe.h, probe.pos, probe.x) ==
            doctest::Approx(numeric).epsilon(2e-3));
    }
    // Causal, window 4: key 0 (position 0) is outside every query's window (positions 4..8).
    if (causal) CHECK(t.at("dk", 0, 0, 0, 0) == 0.0f);
  }
}

TEST_CASE("bad options are refused with a message") {
  AttentionTensors t(AttentionShape{1, 2, 2, 8, 8, 16, true, false}, 1);
  t.params.window = -1;
  CHECK(pk::attention_flash_forward(t.params).find("window") != std::string::npos);
  CHECK(t.at("out", 0, 0, 0, 0) == 12345.0f);
  t.params.window = 0;
  const float slopes[2] = {0.5f, std::numeric_limits<float>::infinity()};
  t.params.alibi_slopes = slopes;
  CHECK(pk::attention_flash_forward(t.params).find("alibi_slopes[1]") != std::string::npos);
}
