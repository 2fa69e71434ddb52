// The FLOP counts of `patchbay bench attention` (core/cli/attention_flop_count.hpp) against
// hand-computed answers: visible pairs of small masks counted on paper, and each kind's count
// at the issue's shape (B 1, T 4096, H 4, D 64), written out term by term below.
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>

#include "cli/attention_flop_count.hpp"

namespace {

using patchbay::cli::attention_flops;
using patchbay::cli::AttentionFlopShape;
using patchbay::cli::ConfigIntLookup;
using patchbay::cli::visible_pairs;

ConfigIntLookup config_of(std::map<std::string, int64_t> values) {
  return [values](const std::string& key) -> std::optional<int64_t> {
    const auto it = values.find(key);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

const AttentionFlopShape kIssueShape{1, 4096, 4, 64, true};
constexpr double kProjections = 2.0 * 4096 * 256 * 768 + 2.0 * 4096 * 256 * 256;  // qkv + out

}  // namespace

TEST_CASE("visible pairs of small masks, counted by hand") {
  CHECK(visible_pairs(4, 0, true) == 10);   // 1 + 2 + 3 + 4
  CHECK(visible_pairs(4, 2, true) == 7);    // 1 + 2 + 2 + 2
  CHECK(visible_pairs(4, 0, false) == 16);  // 4 x 4
  CHECK(visible_pairs(4, 2, false) == 10);  // 2 + 3 + 3 + 2
  CHECK(visible_pairs(3, 9, true) == 6);    // a window past T is T
}

TEST_CASE("dense: projections plus 4 D per visible pair and head, backward twice the forward") {
  const auto f =
      attention_flops("dense", config_of({{"window", 0}, {"n_kv_heads", 0}}), kIssueShape);
  REQUIRE(f.has_value());
  const double attention = 4.0 * 4 * 64 * (4096.0 * 4097 / 2);
  CHECK(f->forward == doctest::Approx(kProjections + attention).epsilon(1e-12));
  CHECK(f->backward == doctest::Approx(2 * f->forward).epsilon(1e-12));
  // Grouped queries: one kv head makes k and v 64 wide instead of 256.
  const auto gqa = attention_flops("dense", config_of({{"n_kv_heads", 1}}), kIssueShape);
  CHECK(f->forward - gqa->forward ==
        doctest::Approx(2.0 * 4096 * 256 * (512 - 128)).epsilon(1e-12));
}

TEST_CASE("performer at the issue's shape: about 13 GFLOP forward + backward with 266 features") {
  const auto f = attention_flops("performer", config_of({{"nb_features", 0}}), kIssueShape);
  REQUIRE(f.has_value());
  const double bht = 4.0 * 4096;
  const double features = 2 * (2 * bht * 64 * 266), prefix = bht * (4.0 * 266 * 64 + 2 * 266);
  CHECK(f->forward == doctest::Approx(kProjections + features + prefix).epsilon(1e-12));
  CHECK(f->total() / 1e9 == doctest::Approx(13.16).epsilon(1e-3));
  const auto fewer = attention_flops("performer", config_of({{"nb_features", 128}}), kIssueShape);
  CHECK(fewer->forward < f->forward);
}

TEST_CASE("linear and lsh: state products per position, LSH windows of two chunks per round") {
  const auto lin = attention_flops("linear", config_of({}), kIssueShape);
  REQUIRE(lin.has_value());
  CHECK(lin->forward ==
        doctest::Approx(kProjections + 4.0 * 4096 * (4 * 64 * 64 + 2 * 64)).epsilon(1e-12));
  const auto lsh = attention_flops(
      "lsh", config_of({{"n_hashes", 2}, {"chunk_len", 32}, {"n_buckets", 8}}), kIssueShape);
  REQUIRE(lsh.has_value());
  const double shared_qk = 2.0 * 4096 * 256 * 512 + 2.0 * 4096 * 256 * 256;
  const double attention = 2 * 4 * (4.0 * 4096) * 64 * 64;  // 0.54 GFLOP, the issue's ~0.5
  const double hashing = 2 * 2 * (4.0 * 4096) * 64 * 4;     // no gradient: forward only
  CHECK(lsh->forward == doctest::Approx(shared_qk + attention + hashing).epsilon(1e-12));
  CHECK(lsh->backward == doctest::Approx(2 * (shared_qk + attention)).epsilon(1e-12));
}

TEST_CASE("a kind without a formula has no count") {
  CHECK_FALSE(attention_flops("sparse", config_of({}), kIssueShape).has_value());
  CHECK_FALSE(attention_flops("my_new_kind", config_of({}), kIssueShape).has_value());
}
