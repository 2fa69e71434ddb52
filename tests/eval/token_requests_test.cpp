// _encode_pair's boundary rules and the rolling windows, on the toy tokenizer.
#include "eval/token_requests.hpp"

#include <doctest/doctest.h>

#include "common/error.hpp"
#include "toy_codec.hpp"

namespace ev = patchbay::eval;
using V = std::vector<int32_t>;

TEST_CASE("whitespace at the end of the context moves to the continuation (lm-eval _encode_pair)") {
  const ev::TextCodec codec = eval_test::toy_codec();
  // "x: " + "ab": scored as "x:" + " ab" -> continuation [" a", "b"], not [" ", "ab"].
  const ev::TokenPair p = ev::encode_pair(codec, "x: ", "ab", "case");
  CHECK(p.context == V{8, 9});
  CHECK(p.continuation == V{5, 3});
  CHECK_FALSE(p.boundary_mismatch);
  // Target delimiter in the continuation already: the same tokens.
  CHECK(ev::encode_pair(codec, "x:", " ab", "case").continuation == V{5, 3});
}

TEST_CASE("the continuation is the whole string's tokens past the context's length") {
  const ev::TextCodec codec = eval_test::toy_codec();
  // "xa" + "b c": whole "xab c" = [x, ab, " ", c]; context alone [x, a]; continuation = whole[2:].
  const ev::TokenPair p = ev::encode_pair(codec, "xa", "b c", "case");
  CHECK(p.context == V{8, 2});
  CHECK(p.continuation == V{1, 4});
  CHECK(
      p.boundary_mismatch);  // whole[:2] = [x, ab] differs from [x, a]: counted, scored as lm-eval
}

TEST_CASE(
    "a continuation that tokenises to nothing is refused (lm-eval's assertion, issue #1053)") {
  const ev::TextCodec codec = eval_test::toy_codec();
  // "a" + "b" merges into the single token "ab": nothing is left past the context's one token.
  CHECK_THROWS_WITH_AS(ev::encode_pair(codec, "xa", "b", "task t, doc 3, choice 1"),
                       doctest::Contains("task t, doc 3, choice 1"), patchbay::Error);
  CHECK_THROWS_WITH_AS(ev::encode_pair(codec, "x", "", "empty"),
                       doctest::Contains("tokenises to nothing"), patchbay::Error);
  CHECK_THROWS_WITH_AS(ev::encode_pair(codec, "  ", "a", "ws"),
                       doctest::Contains("only whitespace"), patchbay::Error);
}

TEST_CASE("an empty context conditions on the prefix token") {
  ev::TextCodec codec = eval_test::toy_codec();
  const ev::TokenPair p = ev::encode_pair(codec, "", "ab c", "case");
  CHECK(p.context == V{0});
  CHECK(p.continuation == V{7, 1, 4});
  codec.prefix_token.reset();
  CHECK_THROWS_WITH_AS(ev::encode_pair(codec, "", "ab", "case"),
                       doctest::Contains("no special token"), patchbay::Error);
}

TEST_CASE("rolling windows predict every token exactly once with up to L tokens per window") {
  V tokens;
  for (int32_t i = 1; i <= 10; ++i) tokens.push_back(i);
  const std::vector<ev::TokenPair> w = ev::rolling_windows(tokens, 0, 4);
  // lm-eval get_rolling_token_windows(range 1..10, prefix 0, max_seq_len 4, context_len 1) made
  // disjoint: ([0], [1,2,3,4]), ([4], [5,6,7,8]), ([6,7,8], [9,10]).
  REQUIRE(w.size() == 3);
  CHECK(w[0].context == V{0});
  CHECK(w[0].continuation == V{1, 2, 3, 4});
  CHECK(w[1].context == V{4});
  CHECK(w[1].continuation == V{5, 6, 7, 8});
  CHECK(w[2].context == V{6, 7, 8});
  CHECK(w[2].continuation == V{9, 10});
  CHECK(ev::rolling_windows({}, 0, 4).empty());
  CHECK(ev::count_words("a  b\nc ") == 4);  // re.split(r"\s+", "a  b\nc ") -> ['a', 'b', 'c', '']
  CHECK(ev::count_code_points("né") == 2);
}
