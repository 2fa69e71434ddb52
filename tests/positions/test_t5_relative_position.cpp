// T5's relative position buckets (patchbay/relative_position.hpp): the bucket of every
// relative position in -300..300 equals the output of T5's reference `_relative_position_bucket`
// (transformers' modeling_t5.py, run by scripts/t5_relative_position_buckets.py) for the
// encoder (bidirectional) and the decoder (unidirectional) with the defaults (32 buckets,
// max distance 128) and with 16 / 64; plus the [Tq, Tk] table and the refusals.
#include <doctest/doctest.h>

#include <cstdint>
#include <patchbay/relative_position.hpp>
#include <stdexcept>
#include <vector>

namespace {

struct ExpectedRow {
  int64_t offset;
  int32_t bidirectional_32_128, unidirectional_32_128, bidirectional_16_64, unidirectional_16_64;
};

constexpr ExpectedRow kExpected[] = {
#include "t5_relative_position_buckets_expected.inc"
};

using patchbay::t5_relative_position_bucket;
using patchbay::T5RelativePositionOptions;

TEST_CASE("T5 buckets equal the reference function for every offset in -300..300") {
  REQUIRE(std::size(kExpected) == 601);
  const T5RelativePositionOptions encoder{true, 32, 128}, decoder{false, 32, 128};
  const T5RelativePositionOptions encoder_small{true, 16, 64}, decoder_small{false, 16, 64};
  for (const ExpectedRow& row : kExpected) {
    CAPTURE(row.offset);
    CHECK(t5_relative_position_bucket(row.offset, encoder) == row.bidirectional_32_128);
    CHECK(t5_relative_position_bucket(row.offset, decoder) == row.unidirectional_32_128);
    CHECK(t5_relative_position_bucket(row.offset, encoder_small) == row.bidirectional_16_64);
    CHECK(t5_relative_position_bucket(row.offset, decoder_small) == row.unidirectional_16_64);
  }
  // The defaults are T5's (bidirectional, 32, 128).
  CHECK(t5_relative_position_bucket(-40) == t5_relative_position_bucket(-40, encoder));
}

TEST_CASE("T5 bucket table [Tq, Tk]: key - query, with decoding offsets") {
  const T5RelativePositionOptions decoder{false, 32, 128};
  const std::vector<int32_t> table = patchbay::t5_relative_position_buckets(3, 4, decoder);
  REQUIRE(table.size() == 12);
  // Row i, column j: bucket of j - i; the future (j > i) is bucket 0 in the decoder.
  CHECK(table == std::vector<int32_t>{0, 0, 0, 0, 1, 0, 0, 0, 2, 1, 0, 0});
  // One decoding step at position 200 over 201 keys: the last row of the full table.
  const std::vector<int32_t> step = patchbay::t5_relative_position_buckets(1, 201, decoder, 200);
  const std::vector<int32_t> full = patchbay::t5_relative_position_buckets(201, 201, decoder);
  CHECK(std::vector<int32_t>(full.end() - 201, full.end()) == step);
}

TEST_CASE("T5 buckets refuse configurations the reference function cannot compute") {
  CHECK_THROWS_AS(t5_relative_position_bucket(50, {true, 2, 128}), std::invalid_argument);
  CHECK_THROWS_AS(t5_relative_position_bucket(50, {false, 32, 16}), std::invalid_argument);
}

}  // namespace
