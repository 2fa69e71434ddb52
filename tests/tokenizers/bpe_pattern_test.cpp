// Pre-tokenizers that are sequences of regex splits (LLaMA 3's Split, SmolLM2's Digits, each
// followed by ByteLevel): the pattern translation, the pieces of hand-worked strings, and a
// published vocabulary whose tokenizer.json has such a pre-tokenizer (ids, save, reload,
// refusals). The fixture is tests/tokenizers/fixtures/published/tokenizer.json with its
// pre_tokenizer replaced.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <patchbay/testing/temp_dir.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bpe_tokenizer.hpp"
#include "patchbay/component.hpp"
#include "pattern_pretokenizer.hpp"
#include "published_vocab.hpp"

namespace fs = std::filesystem;
namespace pb = patchbay_bpe;
using nlohmann::json;
using Pieces = std::vector<std::string>;

namespace {

// LLaMA 3's Split pattern (Meta's tiktoken pattern, as its tokenizer.json writes it).
const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

json fixture_json() {
  std::ifstream in(fs::path(PATCHBAY_TOKENIZER_FIXTURES) / "published" / "tokenizer.json");
  return json::parse(in);
}

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

json split(const std::string& pattern) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", pattern}}},
          {"behavior", "Isolated"},
          {"invert", false}};
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const patchbay::PluginError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("pattern translation spells \\s as White_Space inside and outside classes") {
  const std::string ws = pb::pcre2_pattern_of("\\s");
  CHECK(ws.front() == '[');
  CHECK(ws.find("\\x{3000}") != std::string::npos);
  CHECK(ws.find("\\x{180E}") == std::string::npos);
  CHECK(pb::pcre2_pattern_of("[^\\s\\p{L}]").find("[^\\t-\\r ") != std::string::npos);
  CHECK(pb::pcre2_pattern_of("\\S").rfind("[^\\t-\\r", 0) == 0);
  CHECK(pb::pcre2_pattern_of("a\\p{Han}+[\\r\\n]") == "a\\p{Han}+[\\r\\n]");  // not a category
  CHECK(error_of([] { pb::pcre2_pattern_of("[\\S]"); }).find("\\S inside") != std::string::npos);
}

TEST_CASE("LLaMA 3's split: hand-worked pieces") {
  const pb::PatternPreTokenizer pre({kLlama3Pattern});
  // "Hello" and " world" (one non-letter before letters), "'s", the space before digits alone,
  // digits in threes, punctuation with its newlines, one space, then " x".
  CHECK(pre.split_to_vector("Hello world's 12345!!\n\n  x") ==
        Pieces{"Hello", " world", "'s", " ", "123", "45", "!!\n\n", " ", " x"});
  CHECK(pre.split_to_vector("IT'S") == Pieces{"IT", "'S"});  // (?i:...) contractions
  CHECK(pre.split_to_vector("a\n\nb") == Pieces{"a", "\n\n", "b"});
  // Invalid UTF-8 survives in a gap; the pieces concatenate to the input.
  const std::string odd = "ab\xff\xfe cd";
  std::string joined;
  for (const std::string& p : pre.split_to_vector(odd)) joined += p;
  CHECK(joined == odd);
}

TEST_CASE("SmolLM2's Digits + ByteLevel: digits isolated, then GPT-2's pieces") {
  const pb::PatternPreTokenizer pre({"\\p{N}", pb::kGpt2HfPattern});
  CHECK(pre.split_to_vector("abc 123 def") == Pieces{"abc", " ", "1", "2", "3", " def"});
  CHECK(pre.split_to_vector("x\xd9\xa3y") == Pieces{"x", "\xd9\xa3", "y"});  // Arabic-Indic 3
  // llama.cpp's GPT-2 pattern (no final |\s+) runs the same fast path.
  const std::string full = pb::kGpt2HfPattern;
  const pb::PatternPreTokenizer cpp({full.substr(0, full.size() - 4)});
  const std::string text = "a  \n\tb \xc2\xa0 c  ";
  CHECK(cpp.split_to_vector(text) == pb::PatternPreTokenizer({full}).split_to_vector(text));
}

TEST_CASE("a tokenizer.json with a Digits + ByteLevel sequence: its ids, save and reload") {
  json file = fixture_json();
  file["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)})}};
  const pb::PublishedVocabulary vocab = pb::parse_hf_tokenizer_json(file.dump(), "digits.json");
  REQUIRE(vocab.pretokenizer_patterns.size() == 2);
  CHECK(vocab.pretokenizer_patterns[0] == pb::hf_digits_pattern(true));  // [\p{N}...]
  pb::BpeOptions options;
  options.encode_threads = 1;
  pb::BpeTokenizer tokenizer(options);
  tokenizer.use_published(vocab);
  // The plain fixture merges "0000" (id 259); digits isolated, every '0' is its byte (15).
  CHECK(tokenizer.encode("00000", false) == std::vector<int32_t>{15, 15, 15, 15, 15});
  CHECK(tokenizer.encode("hello world", false) == std::vector<int32_t>{265, 261});
  // Long text takes the single-threaded path and gives the same ids.
  std::string long_text;
  for (int i = 0; i < 4000; ++i) long_text += "hello 0000 world ";
  CHECK(tokenizer.encode_with(long_text, false, 4, 1024) ==
        tokenizer.encode_with(long_text, false, 1, 1024));
  // Saved as a Sequence of Split steps + ByteLevel without a regex; reloads to the same ids.
  patchbay::testing::TempDir dir("bpe_pattern");
  const std::string path = (dir.path() / "t.json").string();
  tokenizer.save(path);
  const json saved = json::parse(std::ifstream(path));
  CHECK(saved["pre_tokenizer"]["type"] == "Sequence");
  CHECK(saved["pre_tokenizer"]["pretokenizers"][0]["type"] == "Split");
  CHECK(saved["pre_tokenizer"]["pretokenizers"][2]["use_regex"] == false);
  pb::BpeTokenizer reloaded(options);
  reloaded.load(path);
  CHECK(reloaded.encode("a 00000 hello", false) == tokenizer.encode("a 00000 hello", false));
}

TEST_CASE("a LLaMA 3-style Split + ByteLevel(use_regex = false) tokenizer.json loads") {
  json file = fixture_json();
  file["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers", json::array({split(kLlama3Pattern), byte_level(false)})}};
  const pb::PublishedVocabulary vocab = pb::parse_hf_tokenizer_json(file.dump(), "llama3.json");
  CHECK(vocab.pretokenizer_patterns == std::vector<std::string>{kLlama3Pattern});
  pb::BpeOptions options;
  options.encode_threads = 1;
  pb::BpeTokenizer tokenizer(options);
  tokenizer.use_published(vocab);
  CHECK(tokenizer.encode("hello world", false) == std::vector<int32_t>{265, 261});
  // "00000" -> "000" + "00"; the fixture has no merge inside "000" other than its own pieces,
  // so the ids are what the plain tokenizer gives each piece alone.
  pb::BpeTokenizer plain(options);
  plain.use_published(pb::parse_hf_tokenizer_json(fixture_json().dump(), "plain.json"));
  std::vector<int32_t> expected = plain.encode("000", false), tail = plain.encode("00", false);
  expected.insert(expected.end(), tail.begin(), tail.end());
  CHECK(tokenizer.encode("00000", false) == expected);
  CHECK(plain.encode("00000", false) == std::vector<int32_t>{259, 15});
}

TEST_CASE("pre-tokenizer sequences that would encode differently are refused by step") {
  json file = fixture_json();
  auto refusal = [&](const json& pre) {
    file["pre_tokenizer"] = pre;
    return error_of([&] { pb::parse_hf_tokenizer_json(file.dump(), "bad.json"); });
  };
  CHECK(refusal({{"type", "Sequence"},
                 {"pretokenizers", json::array({{{"type", "Whitespace"}}, byte_level(true)})}})
            .find("step 0 (Whitespace) is not supported") != std::string::npos);
  json removed = split("a");
  removed["behavior"] = "Removed";
  CHECK(
      refusal({{"type", "Sequence"}, {"pretokenizers", json::array({removed, byte_level(false)})}})
          .find("Isolated") != std::string::npos);
  CHECK(refusal({{"type", "Sequence"}, {"pretokenizers", json::array({split("a")})}})
            .find("ending in") != std::string::npos);
  CHECK(refusal({{"type", "Sequence"},
                 {"pretokenizers", json::array({split("(unclosed"), byte_level(false)})}})
            .find("refused by PCRE2") != std::string::npos);
  CHECK(refusal({{"type", "Metaspace"}}).find("ending in ByteLevel") != std::string::npos);
}

TEST_CASE("ignore_merges (LLaMA 3): a pre-token that is a vocabulary token is that token") {
  json file = fixture_json();
  int64_t next = 0;
  for (const auto& [text, id] : file["model"]["vocab"].items())
    next = std::max(next, id.get<int64_t>() + 1);
  for (const json& added : file["added_tokens"])
    next = std::max(next, added["id"].get<int64_t>() + 1);
  file["model"]["vocab"]["xyz"] = next;  // a token no merge builds
  pb::BpeOptions options;
  options.encode_threads = 1;
  pb::BpeTokenizer plain(options), whole(options);
  plain.use_published(pb::parse_hf_tokenizer_json(file.dump(), "plain.json"));
  file["model"]["ignore_merges"] = true;
  const pb::PublishedVocabulary vocab = pb::parse_hf_tokenizer_json(file.dump(), "whole.json");
  CHECK(vocab.ignore_merges);
  whole.use_published(vocab);
  CHECK(whole.encode("xyz", false) == std::vector<int32_t>{static_cast<int32_t>(next)});
  CHECK(plain.encode("xyz", false).size() > 1);
  CHECK(whole.encode("hello world", false) == plain.encode("hello world", false));
  CHECK(whole.published_vocabulary().ignore_merges);
}

TEST_CASE(
    "a vocabulary without some byte tokens drops those bytes, as Hugging Face and llama.cpp do") {
  json file = fixture_json();
  // Byte 0x04 is spelled U+0104 ("\xc4\x84"); give its id another text, keeping ids dense.
  json& vocab = file["model"]["vocab"];
  const int64_t id = vocab["\xc4\x84"].get<int64_t>();
  vocab.erase("\xc4\x84");
  vocab["zzzq"] = id;
  const pb::PublishedVocabulary published = pb::parse_hf_tokenizer_json(file.dump(), "sparse.json");
  CHECK(published.byte_ids[4] == -1);
  pb::BpeOptions options;
  options.encode_threads = 1;
  pb::BpeTokenizer tokenizer(options);
  tokenizer.use_published(published);
  // The byte vanishes before merging: what is left merges as if it had never been there.
  // Inside one pre-token ("!\x04!" is one piece of punctuation) the rest merges as one piece.
  CHECK(tokenizer.encode("!\x04!", false) == tokenizer.encode("!!", false));
  // Pre-tokenisation sees the byte first ("hel", "\x04", "lo"): the pieces stay apart.
  std::vector<int32_t> apart = tokenizer.encode("hel", false), lo = tokenizer.encode("lo", false);
  apart.insert(apart.end(), lo.begin(), lo.end());
  CHECK(tokenizer.encode("hel\x04lo", false) == apart);
  CHECK(tokenizer.encode("\x04", false).empty());
  CHECK(tokenizer.encode("\x04x", false) == tokenizer.encode("x", false));
}
