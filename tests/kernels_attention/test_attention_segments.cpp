// Packed sequences in the attention kernels (AttentionParams::segment_ids): the flash kernel
// against the double reference with segments (forward and backward, causal and not, window,
// ALiBi, GQA, decode Tq < Tk, strided, D % 16 != 0, every compiled ISA, 1 and 3 threads);
// a packed call equal to running each segment on its own (the property packing needs); the
// gradients of the packed path against finite differences (reference and flash); refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attention_test_tensors.hpp"
#include "patchbay/kernels/attention_flash.hpp"
#include "patchbay/kernels/attention_reference.hpp"

namespace pk = patchbay::kernels;
using pk::testing::AttentionShape;
using pk::testing::AttentionTensors;

namespace {

constexpr double kTolerance = 1e-4;  // flash vs the double reference, as the other tests

// Segment ids of one row from segment lengths: 0 for the first `lengths[0]` positions, ...
std::vector<std::int32_t> ids_of(const std::vector<std::int64_t>& lengths, std::int32_t first = 0) {
  std::vector<std::int32_t> ids;
  for (std::size_t s = 0; s < lengths.size(); ++s)
    ids.insert(ids.end(), std::size_t(lengths[s]), first + std::int32_t(s));
  return ids;
}

// One row per batch entry, concatenated ([B][Tk]).
std::vector<std::int32_t> rows_of(const std::vector<std::vector<std::int64_t>>& rows) {
  std::vector<std::int32_t> all;
  std::int32_t first = 0;
  for (const auto& lengths : rows) {
    const std::vector<std::int32_t> ids = ids_of(lengths, first);
    all.insert(all.end(), ids.begin(), ids.end());
    first += 7;  // ids need not start at 0 nor match across rows
  }
  return all;
}

struct SegmentCase {
  AttentionShape shape;
  std::vector<std::vector<std::int64_t>> lengths;  // per batch row, summing to Tk
  std::int64_t window = 0;
  bool alibi = false;
};

std::vector<SegmentCase> segment_cases() {
  auto shape = [](std::int64_t b, std::int64_t h, std::int64_t hkv, std::int64_t tq,
                  std::int64_t tk, std::int64_t d, bool causal,
                  bool strided) { return AttentionShape{b, h, hkv, tq, tk, d, causal, strided}; };
  return {
      // Boundaries inside tiles, on a tile edge (64), a one-token segment, a long one.
      {shape(2, 2, 2, 200, 200, 64, true, false), {{37, 27, 1, 135}, {64, 64, 72}}},
      {shape(1, 4, 2, 150, 150, 32, true, true), {{20, 50, 80}}},          // GQA, strided
      {shape(1, 2, 2, 150, 150, 64, false, false), {{70, 10, 70}}},        // bidirectional
      {shape(1, 2, 2, 150, 150, 64, true, false), {{90, 60}}, 17, true},   // window, ALiBi
      {shape(1, 2, 2, 130, 130, 40, false, false), {{33, 97}}, 20, true},  // two-sided, D=40
      {shape(2, 2, 1, 1, 120, 64, true, false), {{100, 20}, {119, 1}}},    // decode rows
      {shape(1, 2, 2, 9, 100, 32, true, false), {{40, 55, 5}}},            // chunk, 2 segments
      {shape(1, 2, 2, 1, 100, 16, true, true), {{100}}, 30, true},         // one segment
      {shape(1, 1, 1, 300, 300, 16, true, false), {{1, 1, 1, 150, 147}}},  // tiny segments
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

std::vector<float> test_slopes(std::int64_t heads) {
  std::vector<float> slopes;
  for (std::int64_t h = 0; h < heads; ++h) slopes.push_back(0.5f / float(1 << h));
  return slopes;
}

void apply(AttentionTensors& t, const SegmentCase& c, const std::vector<std::int32_t>& ids,
           const std::vector<float>& slopes) {
  t.params.segment_ids = ids.data();
  t.params.window = c.window;
  t.params.alibi_slopes = c.alibi ? slopes.data() : nullptr;
}

// sum out * dout over batch row 0, by the reference or the flash forward.
double loss(AttentionTensors& t, bool flash) {
  REQUIRE(
      (flash ? pk::attention_flash_forward(t.params) : pk::attention_reference_forward(t.params))
          .empty());
  const pk::AttentionParams& p = t.params;
  double sum = 0;
  for (std::int64_t h = 0; h < p.heads; ++h)
    for (std::int64_t i = 0; i < p.q_len; ++i)
      for (std::int64_t x = 0; x < p.head_dim; ++x)
        sum += double(t.at("out", 0, h, i, x)) * t.at("dout", 0, h, i, x);
  return sum;
}

}  // namespace

TEST_CASE("flash with packed segments matches the reference, forward and backward, every ISA") {
  int index = 0;
  for (const SegmentCase& c : segment_cases()) {
    ++index;
    const std::vector<std::int32_t> ids = rows_of(c.lengths);
    REQUIRE(std::int64_t(ids.size()) == c.shape.batch * c.shape.kv_len);
    const std::vector<float> slopes = test_slopes(c.shape.heads);
    AttentionTensors reference(c.shape, std::uint64_t(index) + 900);
    apply(reference, c, ids, slopes);
    REQUIRE(pk::attention_reference_forward(reference.params).empty());
    REQUIRE(pk::attention_reference_backward(reference.params).empty());
    for (const pk::KernelIsa isa : isas_on_this_cpu()) {
      for (const int threads : {1, 3}) {
        CAPTURE(c.shape.describe());
        CAPTURE(index);
        const std::string isa_name = pk::kernel_isa_name(isa);
        CAPTURE(isa_name);
        CAPTURE(threads);
        AttentionTensors flash(c.shape, std::uint64_t(index) + 900);
        apply(flash, c, ids, slopes);
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

TEST_CASE("a packed call equals running each segment alone (forward and backward, every ISA)") {
  // Segment lengths chosen so that boundaries fall inside tiles, on a tile edge, and a segment
  // spans several tiles; GQA and ALiBi + window on, causal and not.
  const std::vector<std::int64_t> lengths = {37, 91, 64, 8};
  const std::int64_t total = 200, heads = 4, kv_heads = 2, d = 32;
  const std::vector<std::int32_t> ids = ids_of(lengths);
  const std::vector<float> slopes = test_slopes(heads);
  for (const bool causal : {true, false}) {
    for (const pk::KernelIsa isa : isas_on_this_cpu()) {
      const std::string isa_name = pk::kernel_isa_name(isa);
      CAPTURE(isa_name);
      CAPTURE(causal);
      AttentionTensors packed(AttentionShape{1, heads, kv_heads, total, total, d, causal, false},
                              77);
      packed.params.segment_ids = ids.data();
      packed.params.window = 50;
      packed.params.alibi_slopes = slopes.data();
      packed.params.isa = isa;
      REQUIRE(pk::attention_flash_forward(packed.params).empty());
      REQUIRE(pk::attention_flash_backward(packed.params).empty());
      std::int64_t start = 0;
      for (const std::int64_t len : lengths) {
        CAPTURE(start);
        AttentionTensors alone(AttentionShape{1, heads, kv_heads, len, len, d, causal, false}, 1);
        for (const char* name : {"q", "dout"})
          for (std::int64_t h = 0; h < heads; ++h)
            for (std::int64_t t = 0; t < len; ++t)
              for (std::int64_t x = 0; x < d; ++x)
                alone.input_at(name, 0, h, t, x) = packed.at(name, 0, h, start + t, x);
        for (const char* name : {"k", "v"})
          for (std::int64_t h = 0; h < kv_heads; ++h)
            for (std::int64_t t = 0; t < len; ++t)
              for (std::int64_t x = 0; x < d; ++x)
                alone.input_at(name, 0, h, t, x) = packed.at(name, 0, h, start + t, x);
        alone.params.window = 50;
        alone.params.alibi_slopes = slopes.data();
        alone.params.isa = isa;
        REQUIRE(pk::attention_flash_forward(alone.params).empty());
        REQUIRE(pk::attention_flash_backward(alone.params).empty());
        double worst = 0;
        for (const char* name : {"out", "dq", "dk", "dv"}) {
          const std::int64_t n = (name[1] == 'k' || name[1] == 'v') ? kv_heads : heads;
          for (std::int64_t h = 0; h < n; ++h)
            for (std::int64_t t = 0; t < len; ++t)
              for (std::int64_t x = 0; x < d; ++x) {
                const double a = alone.at(name, 0, h, t, x);
                const double b = packed.at(name, 0, h, start + t, x);
                worst = std::max(worst, std::fabs(a - b) / std::max(1.0, std::fabs(a)));
              }
        }
        for (std::int64_t h = 0; h < heads; ++h)
          for (std::int64_t t = 0; t < len; ++t)
            worst = std::max(
                worst, double(std::fabs(alone.lse_at(0, h, t) - packed.lse_at(0, h, start + t))));
        CHECK(worst < 2e-6);  // f32 rounding of sums taken in another tile order
        start += len;
      }
    }
  }
}

TEST_CASE("packed gradients match finite differences (reference and flash)") {
  for (const bool flash : {false, true}) {
    for (const bool causal : {true, false}) {
      CAPTURE(flash);
      CAPTURE(causal);
      // Segments {4, 5} over 9 positions, a window of 3 and ALiBi; probes in both segments,
      // on both sides of the boundary.
      AttentionTensors t(AttentionShape{1, 4, 2, 9, 9, 8, causal, false}, 11);
      const std::vector<std::int32_t> ids = ids_of({4, 5});
      const std::vector<float> slopes = test_slopes(4);
      t.params.segment_ids = ids.data();
      t.params.window = 3;
      t.params.alibi_slopes = slopes.data();
      REQUIRE((flash ? pk::attention_flash_forward(t.params)
                     : pk::attention_reference_forward(t.params))
                  .empty());
      REQUIRE((flash ? pk::attention_flash_backward(t.params)
                     : pk::attention_reference_backward(t.params))
                  .empty());
      const double eps = 1e-2;
      struct Probe {
        const char* input;
        const char* grad;
        std::int64_t h, pos, x;
      };
      const Probe probes[] = {{"q", "dq", 0, 0, 1}, {"q", "dq", 3, 4, 7}, {"q", "dq", 1, 3, 2},
                              {"k", "dk", 0, 3, 3}, {"k", "dk", 1, 4, 0}, {"k", "dk", 1, 8, 5},
                              {"v", "dv", 1, 6, 6}, {"v", "dv", 0, 3, 2}, {"v", "dv", 0, 0, 4}};
      for (const Probe& probe : probes) {
        CAPTURE(probe.input);
        CAPTURE(probe.pos);
        float& value = t.input_at(probe.input, 0, probe.h, probe.pos, probe.x);
        const float saved = value;
        value = saved + float(eps);
        const double up = loss(t, flash);
        value = saved - float(eps);
        const double down = loss(t, flash);
        value = saved;
        const double numeric = (up - down) / (2 * eps);
        // The flash forward sums in f32: its central differences carry ~1e-5 of noise, so
        // small gradients get an absolute margin of 2e-5 there (2e-6 for the reference).
        CHECK(t.at(probe.grad, 0, probe.h, probe.pos, probe.x) ==
              doctest::Approx(numeric).epsilon(2e-3).scale(flash ? 1e-2 : 1e-3));
      }
    }
  }
}

TEST_CASE("segments change the result, and bad segment ids are refused with a message") {
  const AttentionShape shape{1, 2, 2, 20, 20, 16, true, false};
  AttentionTensors plain(shape, 3), packed(shape, 3);
  const std::vector<std::int32_t> ids = ids_of({10, 10});
  packed.params.segment_ids = ids.data();
  REQUIRE(pk::attention_flash_forward(plain.params).empty());
  REQUIRE(pk::attention_flash_forward(packed.params).empty());
  // The first segment is unchanged; the second no longer sees the first.
  CHECK(packed.at("out", 0, 0, 5, 3) == doctest::Approx(plain.at("out", 0, 0, 5, 3)));
  CHECK(std::fabs(packed.at("out", 0, 0, 15, 3) - plain.at("out", 0, 0, 15, 3)) > 1e-4);

  AttentionTensors bad(shape, 3);
  std::vector<std::int32_t> decreasing = ids_of({10, 10});
  decreasing[12] = 0;
  bad.params.segment_ids = decreasing.data();
  const std::string e = pk::attention_flash_forward(bad.params);
  CHECK(e.find("non-decreasing") != std::string::npos);
  CHECK(e.find("position 11") != std::string::npos);
  CHECK(bad.at("out", 0, 0, 0, 0) == 12345.0f);  // nothing written

  AttentionTensors longer(AttentionShape{1, 2, 2, 30, 20, 16, true, false}, 3);
  longer.params.segment_ids = ids.data();
  CHECK(pk::attention_flash_forward(longer.params).find("q_len <= kv_len") != std::string::npos);
}
