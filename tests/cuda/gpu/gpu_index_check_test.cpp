// GPU test of the device-side index check (index_checks.hpp) against its CPU twin
// (index_checks_reference.hpp): the same first bad entry recorded (the lowest position, across
// warps and the block reduction), the record left alone when it already holds an error (first
// error wins), the same cross-entropy mean factors bit for bit, and nothing recorded for a clean
// index. Sizes from one entry to more than a block's threads many times over.
#include <cstring>
#include <vector>

#include "gpu_test_harness.hpp"
#include "patchbay/kernels/cuda/index_checks.hpp"
#include "patchbay/kernels/cuda/index_checks_reference.hpp"

namespace cuda = patchbay::kernels::cuda;
namespace math = patchbay::kernels::cuda::math;
using cuda::testing::DeviceBuffer;

namespace {

std::vector<int64_t> record_words(const math::IndexErrorRecord& r) {
  std::vector<int64_t> words(8);
  std::memcpy(words.data(), &r, sizeof r);
  return words;
}

template <class Index>
void check_one(cuda::testing::TestContext& t, size_t count, int bad_entries,
               const math::IndexCheck& check, bool with_factors) {
  auto values = t.ids<Index>(count, check.bound);
  for (int b = 0; b < bad_entries; ++b) {
    const size_t at = size_t(t.random()() % count);
    values[at] = static_cast<Index>(t.random()() % 2 ? check.bound + int64_t(t.random()() % 9)
                                                     : -1 - int64_t(t.random()() % 9));
  }
  if (check.allow_extra)
    for (size_t i = 0; i < count; i += 3) values[i] = static_cast<Index>(check.extra);
  DeviceBuffer<Index> d_values(values);
  DeviceBuffer<int64_t> d_record(std::vector<int64_t>(8, 0));
  DeviceBuffer<float> d_factors(2);
  t.poison(d_factors);
  auto* record = reinterpret_cast<math::IndexErrorRecord*>(d_record.get());
  CUDA_CHECK(cuda::check_indices(d_values.get(), int64_t(count), check, record,
                                 with_factors ? d_factors.get() : nullptr, t.stream()));
  math::IndexErrorRecord want;
  float want_factors[2] = {0, 0};
  cuda::reference::check_indices(values.data(), int64_t(count), check, &want, want_factors);
  const std::string where = std::to_string(count) + " entries, " + std::to_string(bad_entries) +
                            " bad" + (sizeof(Index) == 4 ? " (int32)" : " (int64)");
  t.expect_true("record equals the twin's, " + where, d_record.download() == record_words(want));
  if (with_factors) {
    const std::vector<float> got = d_factors.download();
    t.expect_true(
        "mean factors equal the twin's bits, " + where,
        std::memcmp(got.data(), want_factors, sizeof want_factors) == 0 ||
            (got[0] != got[0] && want_factors[0] != want_factors[0] && got[1] == want_factors[1]));
  }
  // A second check with an error of its own leaves the first error in place.
  const std::vector<Index> later = {static_cast<Index>(-5)};
  DeviceBuffer<Index> d_later(later);
  CUDA_CHECK(cuda::check_indices(d_later.get(), 1,
                                 {.op = math::IndexErrorOp::kScatterAddIndex, .bound = 4}, record,
                                 nullptr, t.stream()));
  cuda::reference::check_indices(
      later.data(), 1, {.op = math::IndexErrorOp::kScatterAddIndex, .bound = 4}, &want, nullptr);
  t.expect_true("first error wins, " + where, d_record.download() == record_words(want));
}

}  // namespace

GPU_TEST(index_check_records_the_twins_first_bad_entry) {
  const math::IndexCheck gather{.op = math::IndexErrorOp::kGatherIndex, .bound = 37, .detail = 1};
  for (const size_t count : {size_t{1}, size_t{31}, size_t{512}, size_t{5000}, size_t{262147}})
    for (const int bad : {0, 1, 5}) {
      check_one<int32_t>(t, count, bad, gather, false);
      check_one<int64_t>(t, count, bad, gather, false);
    }
}

GPU_TEST(index_check_cross_entropy_targets_and_mean_factors) {
  const math::IndexCheck targets{.op = math::IndexErrorOp::kCrossEntropyTarget,
                                 .bound = 50257,
                                 .allow_extra = true,
                                 .extra = -100,
                                 .detail = -100};
  for (const size_t count : {size_t{1}, size_t{8192}, size_t{65539}})
    for (const int bad : {0, 2}) {
      check_one<int32_t>(t, count, bad, targets, true);
      check_one<int64_t>(t, count, bad, targets, true);
    }
}
