// Sparse Transformer index sets against hand-computed answers (block_size 1 gives the paper's
// element sets), block granularity, the three ways of combining, and bad specs refused.
#include <doctest/doctest.h>

#include <vector>

#include "sparse_patterns.hpp"

using namespace patchbay_sparse;
using Keys = std::vector<int64_t>;

TEST_CASE("strided sets at block size 1 (paper variant: local set has l + 1 positions)") {
  PatternSpec s;
  s.pattern = Pattern::strided;
  s.block_size = 1;
  s.stride = 3;
  CHECK(allowed_keys(s, 0, 7) == Keys{4, 5, 6, 7});     // t = max(0, 7 - 3) .. 7
  CHECK(allowed_keys(s, 1, 7) == Keys{1, 4, 7});        // (7 - j) mod 3 == 0
  CHECK(allowed_keys(s, 2, 7) == Keys{1, 4, 5, 6, 7});  // union
  CHECK(allowed_keys(s, 0, 1) == Keys{0, 1});
  CHECK(allowed_keys(s, 1, 0) == Keys{0});
}

TEST_CASE("fixed sets at block size 1") {
  PatternSpec s;
  s.pattern = Pattern::fixed;
  s.block_size = 1;
  s.stride = 4;
  s.summary = 1;
  CHECK(allowed_keys(s, 0, 6) == Keys{4, 5, 6});     // floor(j/4) == floor(6/4)
  CHECK(allowed_keys(s, 1, 6) == Keys{3});           // j mod 4 == 3
  CHECK(allowed_keys(s, 2, 9) == Keys{3, 7, 8, 9});  // union
  CHECK(allowed_keys(s, 1, 2).empty());              // no summary yet: empty row
  s.summary = 2;
  CHECK(allowed_keys(s, 1, 11) == Keys{2, 3, 6, 7, 10, 11});
}

TEST_CASE("local pattern and block granularity") {
  PatternSpec s;
  s.pattern = Pattern::local;
  s.block_size = 2;
  s.stride = 4;  // L = 2 blocks back
  // i = 9 is block 4; blocks 2..4 -> positions 4..9.
  CHECK(allowed_keys(s, 0, 9) == Keys{4, 5, 6, 7, 8, 9});
  // i = 8: the diagonal block is cut at 8 (within-block causality).
  CHECK(allowed_keys(s, 0, 8) == Keys{4, 5, 6, 7, 8});
}

TEST_CASE("combining: union, separate heads, alternate layers") {
  PatternSpec s;
  s.pattern = Pattern::strided;
  s.block_size = 1;
  s.stride = 2;
  s.combine = Combine::union_of_sets;
  CHECK(set_of_head(s, 0, 0) == 2);
  CHECK(set_of_head(s, 3, 1) == 2);
  s.combine = Combine::separate_heads;
  CHECK(set_of_head(s, 0, 0) == 0);
  CHECK(set_of_head(s, 0, 1) == 1);
  CHECK(set_of_head(s, 5, 2) == 0);
  s.combine = Combine::alternate_layers;
  CHECK(set_of_head(s, 0, 1) == 0);
  CHECK(set_of_head(s, 1, 0) == 1);
  // Layout [2 heads, 4, 4] for separate heads: head 0 local (I - J <= 2), head 1 strided.
  s.combine = Combine::separate_heads;
  std::vector<int32_t> layout = build_layout(s, 0, 2, 4);
  const std::vector<int32_t> expected = {1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1,   // h0
                                         1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1};  // h1
  CHECK(layout == expected);
}

TEST_CASE("bad specs are refused with the field named") {
  PatternSpec s;
  s.block_size = 16;
  s.stride = 40;
  CHECK(pattern_spec_error(s).find("stride (40)") != std::string::npos);
  s.stride = 64;
  s.summary = 8;
  CHECK(pattern_spec_error(s).find("summary (8)") != std::string::npos);
  s.summary = 16;
  CHECK(pattern_spec_error(s).empty());
  CHECK_THROWS(parse_pattern("dense"));
  CHECK_THROWS(parse_combine("both"));
}
