// CI test of the device-side index check's CPU twin (kernels/cuda/index_checks_reference.hpp,
// math/index_error.hpp): the first bad entry it records is the one the CPU kernels' checks name
// (kernels/index_check.hpp, cross_entropy.hpp), the first recorded error wins, and the
// cross-entropy mean factors equal the CPU op's float(1.0 / count). The GPU test
// (tests/cuda/gpu/gpu_index_check_test.cpp) checks kernel == twin.
#include <doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "patchbay/kernels/cross_entropy.hpp"
#include "patchbay/kernels/cuda/index_checks_reference.hpp"
#include "patchbay/kernels/index_check.hpp"

namespace math = patchbay::kernels::cuda::math;
namespace twin = patchbay::kernels::cuda::reference;
namespace cpu = patchbay::kernels;

TEST_CASE("index check twin: the first bad index is the CPU check's, recorded once") {
  std::mt19937 random(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t count = 1 + static_cast<int64_t>(random() % 300), bound = 1 + random() % 50;
    std::vector<int64_t> ids(static_cast<size_t>(count));
    for (auto& id : ids) id = static_cast<int64_t>(random() % static_cast<uint32_t>(bound));
    const int bad_entries = static_cast<int>(random() % 3);
    for (int b = 0; b < bad_entries; ++b)
      ids[random() % ids.size()] = (random() % 2) ? bound + int64_t(random() % 5) : -1;
    math::IndexErrorRecord record;
    const math::IndexCheck check{
        .op = math::IndexErrorOp::kGatherIndex, .bound = bound, .detail = 2};
    const auto scan = twin::check_indices(ids.data(), count, check, &record, nullptr);
    const int64_t expected = cpu::first_index_out_of_range(ids.data(), count, bound);
    CHECK(scan.first_bad == expected);
    if (expected < 0) {
      CHECK(record.op == 0);
      continue;
    }
    CHECK(record.op == static_cast<int64_t>(math::IndexErrorOp::kGatherIndex));
    CHECK(record.value == ids[static_cast<size_t>(expected)]);
    CHECK(record.position == expected);
    CHECK(record.bound == bound);
    CHECK(record.detail == 2);
    CHECK(record.count == count);
    // A later check's error does not replace the first.
    const std::vector<int32_t> later = {-7};
    twin::check_indices(later.data(), 1, {.op = math::IndexErrorOp::kEmbeddingId, .bound = 3},
                        &record, nullptr);
    CHECK(record.op == static_cast<int64_t>(math::IndexErrorOp::kGatherIndex));
    CHECK(record.value == ids[static_cast<size_t>(expected)]);
  }
}

TEST_CASE("index check twin: cross-entropy targets, ignore_index and the mean factors") {
  const int64_t classes = 5, ignore = -100;
  const math::IndexCheck check{.op = math::IndexErrorOp::kCrossEntropyTarget,
                               .bound = classes,
                               .allow_extra = true,
                               .extra = ignore,
                               .detail = ignore};
  std::vector<int32_t> targets = {0, 4, -100, 3, -100, 1, 2};
  math::IndexErrorRecord record;
  float factors[2] = {0, 0};
  auto scan = twin::check_indices(targets.data(), 7, check, &record, factors);
  CHECK(scan.first_bad == -1);
  CHECK(scan.first_bad == cpu::first_invalid_target(targets.data(), 7, classes, ignore));
  CHECK(scan.counted == 5);
  CHECK(record.op == 0);
  CHECK(factors[0] == static_cast<float>(1.0 / 5.0));
  CHECK(factors[1] == static_cast<float>(1.0 / 5.0));
  // Every counted size up to 2^16: 1/c rounded once, as the CPU's mul_scalar(sum, 1.0 / c).
  for (int64_t c = 1; c <= (1 << 16); ++c) {
    math::mean_factors_of_count(c, factors);
    REQUIRE(factors[0] == static_cast<float>(1.0 / static_cast<double>(c)));
  }
  // Nothing counted: NaN mean, zero gradient.
  std::vector<int64_t> ignored = {ignore, ignore};
  scan = twin::check_indices(ignored.data(), 2, check, &record, factors);
  CHECK(scan.counted == 0);
  CHECK(std::isnan(factors[0]));
  CHECK(factors[1] == 0.f);
  // A bad target: 5 (== classes) at position 3; -1 is bad too but later.
  targets = {0, ignore, 4, 5, -1};
  scan = twin::check_indices(targets.data(), 5, check, &record, factors);
  CHECK(scan.first_bad == 3);
  CHECK(scan.first_bad == cpu::first_invalid_target(targets.data(), 5, classes, ignore));
  CHECK(record.op == static_cast<int64_t>(math::IndexErrorOp::kCrossEntropyTarget));
  CHECK(record.value == 5);
  CHECK(record.position == 3);
  CHECK(record.detail == ignore);
}
