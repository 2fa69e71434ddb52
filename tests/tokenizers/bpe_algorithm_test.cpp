// Unit tests of the BPE algorithm classes (no plugin, no SDK): GPT-2 pre-tokenisation on
// tricky strings, known-answer merges worked out by hand, scan == heap merging,
// multi-thread encode == single-thread encode, round trips and save/load.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bpe_merge.hpp"
#include "bpe_pretokenizer.hpp"
#include "bpe_tokenizer.hpp"
#include "bpe_trainer.hpp"
#include "patchbay/component.hpp"
#include "patchbay/testing/temp_dir.hpp"

using patchbay_bpe::BpeOptions;
using patchbay_bpe::BpeTokenizer;
using patchbay_bpe::Gpt2PreTokenizer;
using Pieces = std::vector<std::string>;

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

std::string random_bytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// Text mixing words, digits, spaces, newlines, punctuation, accented letters, emoji and
// some invalid bytes: the alphabet where pre-tokeniser corner cases live.
std::string random_mixed_text(std::mt19937_64& rng, size_t n) {
  static const std::vector<std::string> atoms = {
      "a", "b", "Z", "q", "1", "7", " ", " ", "  ", "\n", "\n\n", "\t", "'s", "'ll", "'", ".", ",",
      "!", "é", "ö", "日", "👋", "\xff", "\xc3", "\u00a0", "x", "the", " and", "12"};
  std::string s;
  while (s.size() < n) s += atoms[rng() % atoms.size()];
  return s;
}

std::string bible_like_text(size_t bytes) {
  std::mt19937_64 rng(7);
  static const std::vector<std::string> words = {"And", "the", "LORD", "said", "unto", "Moses,",
      "behold", "I", "will", "give", "thee", "land;", "of", "Israel.", "children", "God", "him"};
  std::string s;
  int verse = 1;
  while (s.size() < bytes) {
    s += "  " + std::to_string(verse++) + " ";
    const size_t count = 5 + rng() % 20;
    for (size_t i = 0; i < count; ++i) s += words[rng() % words.size()] + (i + 1 < count ? " " : ".\n");
  }
  return s;
}

}  // namespace

TEST_CASE("GPT-2 pre-tokeniser splits tricky strings as the reference regex does") {
  const Gpt2PreTokenizer pre;
  CHECK(pre.split_to_vector("héllo wörld 123") == Pieces{"héllo", " wörld", " 123"});
  CHECK(pre.split_to_vector("I'm here, they're 'S") ==
        Pieces{"I", "'m", " here", ",", " they", "'re", " '", "S"});
  CHECK(pre.split_to_vector("don't we'll I'd you've it's") ==
        Pieces{"don", "'t", " we", "'ll", " I", "'d", " you", "'ve", " it", "'s"});
  CHECK(pre.split_to_vector("Hello  world") == Pieces{"Hello", " ", " world"});
  CHECK(pre.split_to_vector("a\n\nb") == Pieces{"a", "\n", "\n", "b"});
  CHECK(pre.split_to_vector("a\n  b") == Pieces{"a", "\n ", " b"});
  CHECK(pre.split_to_vector("x   ") == Pieces{"x", "   "});
  CHECK(pre.split_to_vector("abc123 3.14") == Pieces{"abc", "123", " 3", ".", "14"});
  CHECK(pre.split_to_vector("hi 👋🏽!") == Pieces{"hi", " 👋🏽!"});
  CHECK(pre.split_to_vector("日本語 テキスト") == Pieces{"日本語", " テキスト"});
  // Unicode whitespace (NBSP) is \s under UCP.
  CHECK(pre.split_to_vector("a\u00a0b") == Pieces{"a", "\u00a0", "b"});
}

TEST_CASE("invalid UTF-8 bytes become one-byte pieces and nothing is lost") {
  const Gpt2PreTokenizer pre;
  CHECK(pre.split_to_vector("a\xff" "b") == Pieces{"a", "\xff", "b"});
  CHECK(pre.split_to_vector("\xc3(") == Pieces{"\xc3", "("});
  std::mt19937_64 rng(1);
  for (int trial = 0; trial < 200; ++trial) {
    const std::string text = trial % 2 ? random_bytes(rng, 1 + rng() % 300) : random_mixed_text(rng, 300);
    std::string joined;
    for (const std::string& piece : pre.split_to_vector(text)) {
      CHECK(!piece.empty());
      joined += piece;
    }
    REQUIRE(joined == text);
  }
}

TEST_CASE("the ASCII fast path gives exactly the PCRE2 pieces") {
  const Gpt2PreTokenizer pre;
  auto reference = [&](std::string_view text) {
    Pieces pieces;
    pre.split_with_pcre2(text, [&](std::string_view p) { pieces.emplace_back(p); });
    return pieces;
  };
  std::mt19937_64 rng(6);
  // Every ASCII byte (controls, \x1c-\x1f, quotes) often, with non-ASCII and invalid bytes.
  auto ascii_heavy = [&](size_t n) {
    static const std::vector<std::string> extra = {"é", "\u00a0", "\u2028", "\u0085", "日", "👋", "\xff", "\xc3",
                                                   "'s", "'re", "'ll", "  ", "\n\n", " 1", " a", "'"};
    std::string s;
    while (s.size() < n) {
      if (rng() % 4 == 0) {
        s += extra[rng() % extra.size()];
      } else {
        s.push_back(static_cast<char>(rng() % 128));
      }
    }
    return s;
  };
  for (int trial = 0; trial < 3000; ++trial) {
    const std::string text = trial % 3 == 0 ? random_mixed_text(rng, 1 + rng() % 200) : ascii_heavy(1 + rng() % 200);
    REQUIRE(pre.split_to_vector(text) == reference(text));
  }
}

TEST_CASE("cutting at a safe cut gives the same pieces as the whole text") {
  const Gpt2PreTokenizer pre;
  std::mt19937_64 rng(2);
  int cuts_checked = 0;
  for (int trial = 0; trial < 100; ++trial) {
    const std::string text = random_mixed_text(rng, 200);
    const Pieces whole = pre.split_to_vector(text);
    for (size_t p = 0; p < text.size(); ++p) {
      if (!Gpt2PreTokenizer::is_safe_cut(text, p)) continue;
      Pieces parts = pre.split_to_vector(std::string_view(text).substr(0, p));
      const Pieces tail = pre.split_to_vector(std::string_view(text).substr(p));
      parts.insert(parts.end(), tail.begin(), tail.end());
      REQUIRE(parts == whole);
      ++cuts_checked;
    }
  }
  CHECK(cuts_checked > 100);
}

TEST_CASE("known-answer merges on a tiny corpus") {
  // Pieces: "ab", " ab" x2, " abc". Pair counts: (a,b)=4, (' ',a)=3, (b,c)=1.
  // Merge 0: (a,b) -> 256. Then (' ',256)=3, (256,c)=1. Merge 1: (' ',256) -> 257.
  // Then only (257,c)=1 remains, below 2: training stops at 256 + 2 + 1 special = 259.
  BpeTokenizer bpe(BpeOptions{1000, {"<|endoftext|>"}});
  const auto report = bpe.train("ab ab ab abc");
  REQUIRE(bpe.merges().size() == 2);
  CHECK(bpe.merges()[0].left == 'a');
  CHECK(bpe.merges()[0].right == 'b');
  CHECK(bpe.merges()[1].left == ' ');
  CHECK(bpe.merges()[1].right == 256);
  CHECK(report.reached_vocab_size == 259);
  CHECK(bpe.vocab_size() == 259);
  CHECK(bpe.special_token_id(0) == 258);
  CHECK(bpe.encode(" abc ab", false) == std::vector<int32_t>{257, 'c', 257});
  CHECK(bpe.encode("ab<|endoftext|>", true) == std::vector<int32_t>{256, 258});
  CHECK(bpe.encode("ab<|endoftext|>", false).size() > 2);
}

TEST_CASE("ties go to the smallest (left, right) id pair") {
  // Pieces "ab", " ab", " cd" x2: counts (a,b)=2, (' ',a)=1, (c,d)=2, (' ',c)=2.
  // Step 0 ties at 2 among (97,98), (99,100), (32,99): smallest is (32,99) -> 256.
  // Step 1: (a,b)=2 and (256,d)=2 tie: (97,98) -> 257. Step 2: (256,100) -> 258.
  // Then (' ',257)=1 only: stop.
  BpeTokenizer bpe(BpeOptions{1000, {}});
  bpe.train("ab ab cd cd");
  REQUIRE(bpe.merges().size() == 3);
  CHECK((bpe.merges()[0].left == 32 && bpe.merges()[0].right == 99));
  CHECK((bpe.merges()[1].left == 97 && bpe.merges()[1].right == 98));
  CHECK((bpe.merges()[2].left == 256 && bpe.merges()[2].right == 100));
}

TEST_CASE("training stops at the requested vocabulary size") {
  BpeTokenizer bpe(BpeOptions{300, {"<|endoftext|>"}});
  const auto report = bpe.train(bible_like_text(20000));
  CHECK(report.merges == 300 - 256 - 1);
  CHECK(bpe.vocab_size() == 300);
}

TEST_CASE("scan and heap merging agree") {
  BpeTokenizer bpe(BpeOptions{600, {}});
  bpe.train(bible_like_text(50000) + std::string(300, 'x') + " xxxx xxxxxxxx");
  patchbay_bpe::PairRankTable ranks;
  for (size_t r = 0; r < bpe.merges().size(); ++r) {
    ranks.insert(patchbay_bpe::pack_pair(static_cast<uint32_t>(bpe.merges()[r].left),
                                         static_cast<uint32_t>(bpe.merges()[r].right)),
                 static_cast<uint32_t>(r));
  }
  std::mt19937_64 rng(3);
  const std::string text = bible_like_text(5000);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t begin = rng() % text.size();
    std::string piece = text.substr(begin, 1 + rng() % 120);
    if (trial % 10 == 0) piece = std::string(1 + rng() % 120, 'x');
    std::vector<int32_t> scan, heap;
    patchbay_bpe::merge_piece_scan(piece, ranks, scan);
    patchbay_bpe::merge_piece_heap(piece, ranks, heap);
    REQUIRE(scan == heap);
  }
}

TEST_CASE("multi-thread encode equals single-thread encode") {
  BpeTokenizer bpe(BpeOptions{800, {"<|endoftext|>"}});
  bpe.train(bible_like_text(100000));
  std::mt19937_64 rng(4);
  std::string text = bible_like_text(300000) + random_mixed_text(rng, 20000) + "<|endoftext|>" +
                     bible_like_text(5000);
  const auto single = bpe.encode_with(text, true, 1, 1 << 30);
  for (int threads : {2, 3, 8}) {
    CHECK(bpe.encode_with(text, true, threads, 1000) == single);
  }
  CHECK(bpe.decode(single) == text);
}

TEST_CASE("byte-level round trip on random bytes and a pathological piece") {
  BpeTokenizer bpe(BpeOptions{700, {"<|endoftext|>"}});
  bpe.train(bible_like_text(50000) + std::string(1000, 'x'));
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    const std::string text = random_bytes(rng, rng() % 2000);
    REQUIRE(bpe.decode(bpe.encode(text, false)) == text);
  }
  const std::string long_run(200000, 'x');
  CHECK(bpe.decode(bpe.encode(long_run, false)) == long_run);
  CHECK(thrown_code([&] {
          bpe.decode(std::vector<int32_t>{static_cast<int32_t>(bpe.vocab_size())});
        }) == PB_STATUS_OUT_OF_RANGE);
}

TEST_CASE("save then load gives the same vocabulary and ids") {
  BpeTokenizer bpe(BpeOptions{500, {"<|endoftext|>", "<|pad|>"}});
  bpe.train(bible_like_text(40000));
  const patchbay::testing::TempDir scratch("bpe_test");
  const auto path = (scratch / "bpe.tok").string();
  bpe.save(path);
  BpeTokenizer loaded(BpeOptions{300, {}});
  loaded.load(path);
  const std::string text = bible_like_text(3000) + "<|pad|>";
  CHECK(loaded.vocab_size() == bpe.vocab_size());
  CHECK(loaded.special_tokens() == bpe.special_tokens());
  CHECK(loaded.encode(text, true) == bpe.encode(text, true));
  std::filesystem::remove(path);
  CHECK_THROWS(loaded.load(path));
}

TEST_CASE("construction refuses bad options") {
  CHECK(thrown_code([] {
          BpeTokenizer(BpeOptions{256, {"<|endoftext|>"}});
        }) == PB_STATUS_INVALID_ARGUMENT);
  CHECK(thrown_code([] {
          BpeTokenizer(BpeOptions{1000, {"a", "a"}});
        }) == PB_STATUS_INVALID_ARGUMENT);
  BpeTokenizer untrained(BpeOptions{1000, {}});
  CHECK(untrained.vocab_size() == 0);
  CHECK(thrown_code([&] { untrained.encode("x", false); }) == PB_STATUS_INVALID_ARGUMENT);
  CHECK(thrown_code([&] { untrained.load("/nonexistent/patchbay/bpe.tok"); }) ==
        PB_STATUS_IO_ERROR);
}
