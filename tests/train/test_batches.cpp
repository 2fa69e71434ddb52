// Batches: deterministic counter-based training windows, fixed validation windows, and the
// bits-per-byte arithmetic.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>

#include "data/token_cache.hpp"
#include "train/batches.hpp"
#include "train/training_data.hpp"
#include "train_fixture.hpp"

using namespace patchbay;

namespace {

data::TokenCache counting_cache(const std::filesystem::path& folder, int32_t count) {
  std::vector<int32_t> ids(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) ids[static_cast<size_t>(i)] = i % 1000;
  data::TokenCacheInfo info;
  info.vocab_size = 1000;
  info.tokenizer_kind = "test";
  data::write_token_cache(folder / "ids.tokens", ids, info);
  return data::TokenCache::open(folder / "ids.tokens");
}

}  // namespace

TEST_CASE("training batches are a pure function of (seed, step, micro step, row)") {
  const auto folder = train::testing::fresh_folder("batches");
  const data::TokenCache cache = counting_cache(folder, 5000);
  const train::Batch a = train::training_batch(cache, 42, 7, 1, 4, 16);
  const train::Batch b = train::training_batch(cache, 42, 7, 1, 4, 16);
  CHECK(a.inputs.to_vector() == b.inputs.to_vector());
  CHECK(a.targets.to_vector() == b.targets.to_vector());
  CHECK(train::training_batch(cache, 43, 7, 1, 4, 16).inputs.to_vector() != a.inputs.to_vector());
  CHECK(train::training_batch(cache, 42, 8, 1, 4, 16).inputs.to_vector() != a.inputs.to_vector());
  CHECK(train::training_batch(cache, 42, 7, 0, 4, 16).inputs.to_vector() != a.inputs.to_vector());
  // targets are the inputs shifted by one position: ids count up (mod 1000) in the cache
  const std::vector<float> in = a.inputs.to_vector(), out = a.targets.to_vector();
  for (size_t i = 0; i < in.size(); ++i) CHECK(out[i] == static_cast<float>((static_cast<int>(in[i]) + 1) % 1000));
  for (int64_t row = 0; row < 100; ++row) CHECK(train::training_window_start(1, 2, 3, row, 5000, 16) < 5000 - 16);
}

TEST_CASE("validation windows are fixed and evenly spaced over the split") {
  CHECK(train::validation_window_start(0, 5, 1017, 16) == 0);
  CHECK(train::validation_window_start(4, 5, 1017, 16) == 1000);  // last start = 1017 - 17
  CHECK(train::validation_window_start(2, 5, 1017, 16) == 500);
  CHECK(train::validation_window_start(0, 1, 1017, 16) == 0);
  CHECK_THROWS_WITH_AS(train::validation_window_start(0, 1, 10, 16), doctest::Contains("too few"), patchbay::Error);
}

TEST_CASE("bits per byte: nats per token times tokens per byte over ln 2") {
  CHECK(train::bits_per_byte(std::log(2.0), 100, 100) == doctest::Approx(1.0));
  CHECK(train::bits_per_byte(2.0, 1, 4) == doctest::Approx(0.5 / std::log(2.0)));
  // a byte-level model with a uniform prediction over 256 values: 8 bits per byte
  CHECK(train::bits_per_byte(std::log(256.0), 1000, 1000) == doctest::Approx(8.0));
}
