// Unit tests of the character-level tokenizer class (no plugin, no SDK).
#include "char_tokenizer.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <random>

#include "patchbay/component.hpp"
#include "patchbay/files.hpp"
#include "patchbay/testing/temp_dir.hpp"

using patchbay_char::CharTokenizer;

namespace {

// The status code of the patchbay::PluginError that `body` throws (PB_STATUS_OK if none).
template <class Body>
pb_status_code thrown_code(Body&& body) {
  try {
    body();
  } catch (const patchbay::PluginError& e) {
    return e.code();
  }
  return PB_STATUS_OK;
}
}  // namespace

TEST_CASE("UTF-8 character lengths, including ill-formed sequences") {
  using patchbay_char::utf8_char_length;
  CHECK(utf8_char_length("a", 0) == 1);
  CHECK(utf8_char_length("é", 0) == 2);
  CHECK(utf8_char_length("日", 0) == 3);
  CHECK(utf8_char_length("👋", 0) == 4);
  CHECK(utf8_char_length("\x80", 0) == 0);          // stray continuation
  CHECK(utf8_char_length("\xc0\xaf", 0) == 0);      // overlong '/'
  CHECK(utf8_char_length("\xed\xa0\x80", 0) == 0);  // surrogate U+D800
  CHECK(utf8_char_length("\xf4\x90\x80\x80", 0) == 0);  // > U+10FFFF
  CHECK(utf8_char_length("\xe6\x97", 0) == 0);      // truncated
}

TEST_CASE("vocabulary is the sorted distinct characters, then 256 bytes, then specials") {
  CharTokenizer tok;
  CHECK(tok.vocab_size() == 0);
  CHECK(tok.train("baé a<|endoftext|>b") == 4 + 256 + 1);  // ' ', a, b, é
  CHECK(tok.encode(" ab\xc3\xa9", false) == std::vector<int32_t>{0, 1, 2, 3});
  // 'z' is unknown: its byte token; invalid byte: its byte token.
  CHECK(tok.encode("z\xff", false) == std::vector<int32_t>{tok.byte_token_id('z'), tok.byte_token_id(0xff)});
  CHECK(tok.encode("a<|endoftext|>", true) == std::vector<int32_t>{1, 260});
  CHECK(tok.encode("<|endoftext|>", false).size() == 13);
  CHECK(tok.decode(std::vector<int32_t>{1, 260, 3}) == "a<|endoftext|>é");
  CHECK(thrown_code([&] { tok.decode(std::vector<int32_t>{261}); }) == PB_STATUS_OUT_OF_RANGE);
  CHECK(thrown_code([&] { tok.load("/nonexistent/patchbay/char.tok"); }) == PB_STATUS_IO_ERROR);
  CHECK(thrown_code([] { CharTokenizer({"x", "x"}); }) == PB_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("unknown multi-byte characters fall back to their bytes and round-trip") {
  CharTokenizer tok(std::vector<std::string>{});
  tok.train("abc");
  const std::string text = "日本 a\xf0\x9f\x91\x8b";
  const auto ids = tok.encode(text, false);
  CHECK(ids.size() == 3 + 3 + 1 + 1 + 4);
  CHECK(tok.decode(ids) == text);
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 100; ++trial) {
    std::string bytes(rng() % 500, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
    REQUIRE(tok.decode(tok.encode(bytes, false)) == bytes);
  }
}

TEST_CASE("save then load restores characters and specials") {
  CharTokenizer tok({"<|endoftext|>", "<s>"});
  tok.train("In the beginning God created the heaven and the earth. é日");
  const patchbay::testing::TempDir scratch("char_test");
  const auto path = (scratch / "char.tok").string();
  tok.save(path);
  CharTokenizer loaded(std::vector<std::string>{});
  loaded.load(path);
  CHECK(loaded.vocab_size() == tok.vocab_size());
  CHECK(loaded.special_tokens() == tok.special_tokens());
  const std::string text = "the earth<s>日 x\x80";
  CHECK(loaded.encode(text, true) == tok.encode(text, true));
}

TEST_CASE("the SDK hex codec round-trips every byte and refuses malformed text") {
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
  const std::string hex = patchbay::hex_encode(all_bytes);
  CHECK(hex.substr(0, 6) == "000102");
  CHECK(patchbay::hex_decode(hex) == all_bytes);
  CHECK(patchbay::hex_decode("FFfe") == std::string("\xff\xfe", 2));
  CHECK_THROWS_WITH(patchbay::hex_decode("abc"), doctest::Contains("odd-length"));
  CHECK_THROWS_WITH(patchbay::hex_decode("zz"), doctest::Contains("bad hex digit in 'zz'"));
}

TEST_CASE("a corrupt character count is refused without allocating for it") {
  // Found by tests/fuzz/fuzz_tokenizer_files: the count sized a vector before any line was read
  // (here ~6.7e11 entries, tens of terabytes: bad_alloc instead of a refusal).
  const patchbay::testing::TempDir scratch("char_count");
  const std::string path = (scratch / "bad.tok").string();
  patchbay::write_file_atomically(path, "patchbay-char 1\ncharacters 667465787473\n61\nend\n");
  patchbay_char::CharTokenizer tokenizer;
  CHECK_THROWS_AS(tokenizer.load(path), patchbay::PluginError);
}
