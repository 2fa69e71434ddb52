// Unicode version of the pre-tokenizers (issue 39 item 7): letters and digits added in Unicode
// 15-16 must split as Hugging Face `tokenizers` 0.23.3 splits them (Unicode 16.0), not as the
// linked PCRE2's tables say (Debian 12: 10.42, Unicode 14). Known answers:
//  - the generated category table on the code points the issue lists (values from the Unicode
//    16.0 data files, which `tokenizers` matches: scripts/tokenizers/sweep_unicode_classes.py);
//  - the translated \p{L}, \p{N}, ... against that table on every code point, in both spellings
//    (PCRE2's property plus the additions, and every range written out);
//  - pieces and ids of `tokenizers` itself on 252 strings around those characters
//    (fixtures/unicode16, written by scripts/tokenizers/make_unicode16_fixtures.py): GPT-2's
//    pre-tokenizer, LLaMA 3's Split and SmolLM2's Digits, through a vocabulary `tokenizers`
//    trained on such text (so a different split gives different ids). Digits is Rust's
//    char::is_numeric there, Unicode 17.0: U+11DE0-11DE9 and U+16FF4-16FF6 are digits to it and
//    unassigned to \p{N}.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <doctest/doctest.h>
#include <pcre2.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bpe_pretokenizer.hpp"
#include "bpe_tokenizer.hpp"
#include "pattern_pretokenizer.hpp"
#include "published_vocab.hpp"
#include "unicode_categories.hpp"
#include "unicode_pattern.hpp"

namespace fs = std::filesystem;
namespace pb = patchbay_bpe;
namespace uc = patchbay_bpe::unicode;
using nlohmann::json;
using Pieces = std::vector<std::string>;
using GC = uc::GeneralCategory;

namespace {

std::string utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

// A compiled, anchored one-character PCRE2 class (the translation of `hf_class`).
class CompiledClass {
 public:
  CompiledClass(const std::string& hf_class, pb::CategorySpelling spelling) {
    const std::string pattern = "^(?:" + pb::pcre2_pattern_of(hf_class, spelling) + ")$";
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
                          PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    REQUIRE(code_ != nullptr);
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
    match_ = pcre2_match_data_create_from_pattern(code_, nullptr);
  }
  ~CompiledClass() {
    pcre2_match_data_free(match_);
    pcre2_code_free(code_);
  }
  CompiledClass(const CompiledClass&) = delete;
  CompiledClass& operator=(const CompiledClass&) = delete;
  bool matches(const std::string& text) const {
    return pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0, match_,
                       nullptr) >= 1;
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_data* match_ = nullptr;
};

// Code points (not surrogates) where the translated class disagrees with the table.
std::vector<uint32_t> disagreements(const std::string& hf_class, pb::CategorySpelling spelling,
                                    const std::function<bool(GC)>& in_class) {
  const CompiledClass compiled(hf_class, spelling);
  std::vector<uint32_t> wrong;
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    if (compiled.matches(utf8(cp)) != in_class(uc::general_category(cp))) wrong.push_back(cp);
  }
  return wrong;
}

bool letter(GC c) { return uc::category_name(c)[0] == 'L'; }
bool number(GC c) { return uc::category_name(c)[0] == 'N'; }

json expected_json() {
  std::ifstream in(fs::path(PATCHBAY_TOKENIZER_FIXTURES) / "unicode16" / "expected.json");
  REQUIRE(in.good());
  return json::parse(in);
}

pb::BpeTokenizer fixture_tokenizer(const json& pre_tokenizer) {
  std::ifstream in(fs::path(PATCHBAY_TOKENIZER_FIXTURES) / "unicode16" / "tokenizer.json");
  json file = json::parse(in);
  if (!pre_tokenizer.is_null()) file["pre_tokenizer"] = pre_tokenizer;
  pb::BpeOptions options;
  options.encode_threads = 1;
  pb::BpeTokenizer tokenizer(options);
  tokenizer.use_published(pb::parse_hf_tokenizer_json(file.dump(), "unicode16/tokenizer.json"));
  return tokenizer;
}

}  // namespace

TEST_CASE("the generated table classifies the Unicode 15-16 letters and digits the issue lists") {
  CHECK(std::string(uc::kUnicodeVersion) == "16.0.0");
  struct Known {
    uint32_t cp;
    GC category;
  };
  const Known known[] = {{0x1C89, GC::Lu},
                         {0x1C8A, GC::Ll},
                         {0xA7CB, GC::Lu},
                         {0xA7CC, GC::Lu},
                         {0xA7CD, GC::Ll},
                         {0xA7DA, GC::Lu},
                         {0xA7DB, GC::Ll},
                         {0xA7DC, GC::Lu},
                         {0x11F04, GC::Lo},
                         {0x11F50, GC::Nd},
                         {0x11F59, GC::Nd},
                         {0x1E4D0, GC::Lo},
                         {0x1E4EB, GC::Lm},
                         {0x1E4F0, GC::Nd},
                         {0x10D4A, GC::Lo},
                         {0x10D40, GC::Nd},
                         {0x31350, GC::Lo},
                         {0x323AF, GC::Lo},
                         {0x2EBF0, GC::Lo},
                         {0x2EE5D, GC::Lo},
                         {0x1D2C0, GC::No},
                         {0x1D2D3, GC::No},
                         // Unchanged neighbours and the one re-categorisation since Unicode 14.
                         {'A', GC::Lu},
                         {'0', GC::Nd},
                         {' ', GC::Zs},
                         {0x4E00, GC::Lo},
                         {0x1171E, GC::Mc},
                         {0xD800, GC::Cs},
                         {0x10FFFF, GC::Cn},
                         {0x2EE5E, GC::Cn}};
  for (const Known& k : known) {
    CAPTURE(k.cp);
    CHECK(uc::category_name(uc::general_category(k.cp)) == uc::category_name(k.category));
  }
  CHECK(uc::general_category(0x110000) == GC::Cn);
}

TEST_CASE("category ranges, complements and the delta since Unicode 14") {
  const auto letters = uc::category_ranges("L");
  REQUIRE(letters);
  size_t count = 0;
  for (const uc::CodePointRange& r : *letters) count += r.last - r.first + 1;
  CHECK(count == 141028);  // `tokenizers` 0.23.3's \p{L}, counted by the sweep script
  CHECK(!uc::category_ranges("Han"));
  CHECK(!uc::category_ranges("Letter"));
  CHECK(uc::category_ranges("LC") == uc::category_ranges("L&"));
  CHECK(uc::complement({{0, 9}, {20, 0x10FFFF}}) == std::vector<uc::CodePointRange>{{10, 19}});
  const auto numbers = uc::delta_since_baseline("N");
  REQUIRE(numbers);
  CHECK(!numbers->any_removed);
  CHECK(numbers->added.front() == uc::CodePointRange{0x10D40, 0x10D49});  // Garay digits
  CHECK(uc::delta_since_baseline("Mn")->any_removed);                     // U+1171E left Mn
  CHECK(!uc::delta_since_baseline("M")->any_removed);
}

TEST_CASE("translated categories agree with the table on every code point, in both spellings") {
  using S = pb::CategorySpelling;
  CHECK(pb::category_spelling_for_linked_pcre2() == S::kBaselinePlusAdditions);  // PCRE2 10.42
  CHECK(disagreements("\\p{L}", S::kBaselinePlusAdditions, letter).empty());
  CHECK(disagreements("\\p{N}", S::kBaselinePlusAdditions, number).empty());
  CHECK(disagreements("[^\\p{L}\\p{N}]", S::kBaselinePlusAdditions, [](GC c) {
          return !letter(c) && !number(c) && c != GC::Cs;
        }).empty());
  CHECK(disagreements("\\P{N}", S::kBaselinePlusAdditions, [](GC c) {
          return !number(c) && c != GC::Cs;
        }).empty());
  CHECK(disagreements("\\p{Mn}", S::kBaselinePlusAdditions, [](GC c) {
          return c == GC::Mn;
        }).empty());
  CHECK(disagreements("\\p{Lu}", S::kBaselinePlusAdditions, [](GC c) {
          return c == GC::Lu;
        }).empty());
  CHECK(disagreements("\\p{L}", S::kExplicitRanges, letter).empty());
  CHECK(disagreements("[\\p{^L}]", S::kExplicitRanges, [](GC c) {
          return !letter(c) && c != GC::Cs;
        }).empty());
}

TEST_CASE("the Digits pattern is Unicode 16's \\p{N} plus Rust's Unicode 17 numerics") {
  CHECK(pb::hf_digits_pattern(true) == "[\\p{N}\\x{11DE0}-\\x{11DE9}\\x{16FF4}-\\x{16FF6}]");
  CHECK(pb::hf_digits_pattern(false) == pb::hf_digits_pattern(true) + "+");
  CHECK(std::string(uc::kDigitsUnicodeVersion) == "17.0.0");
  CHECK(uc::general_category(0x11DE0) == GC::Cn);  // not yet assigned in Unicode 16
}

TEST_CASE("pattern translation: additions, caseless groups and names left to PCRE2") {
  using S = pb::CategorySpelling;
  const std::string n = pb::pcre2_pattern_of("a\\p{N}+", S::kBaselinePlusAdditions);
  CHECK(n.rfind("a(?:\\p{N}|[\\x{", 0) == 0);  // PCRE2's \p{N} or a digit added since 14.0
  CHECK(pb::pcre2_pattern_of("[^\\p{L}x]", S::kBaselinePlusAdditions).rfind("(?:(?![\\x{", 0) == 0);
  CHECK(n.find("\\x{1E4F0}-\\x{1E4F9}") != std::string::npos);  // Nag Mundari digits
  CHECK(pb::pcre2_pattern_of("\\p{Zs}", S::kBaselinePlusAdditions) == "\\p{Zs}");  // none added
  CHECK(pb::pcre2_pattern_of("\\p{Han}", S::kExplicitRanges) == "\\p{Han}");
  // Inside (?i...) explicit ranges would also match case partners: left to PCRE2.
  CHECK(
      pb::pcre2_pattern_of("(?i:\\p{L})\\p{L}", S::kExplicitRanges).rfind("(?i:\\p{L})[\\x{", 0) ==
      0);
  CHECK(pb::pcre2_pattern_of("(?i)\\p{L}", S::kExplicitRanges) == "(?i)\\p{L}");
  CHECK(pb::pcre2_pattern_of("((?i)x)\\p{N}", S::kExplicitRanges).find("\\p{N}") ==
        std::string::npos);
}

TEST_CASE("pieces and ids equal tokenizers' on text with Unicode 15-16 letters and digits") {
  const json expected = expected_json();
  const pb::Gpt2PreTokenizer gpt2;
  const std::string llama3_pattern = expected["llama3_pattern"];
  const pb::PatternPreTokenizer llama3({llama3_pattern});
  const pb::PatternPreTokenizer digits({pb::hf_digits_pattern(true), pb::kGpt2HfPattern});
  const pb::BpeTokenizer gpt2_tokenizer = fixture_tokenizer(nullptr);
  const pb::BpeTokenizer llama3_tokenizer =
      fixture_tokenizer({{"type", "Sequence"},
                         {"pretokenizers", json::array({{{"type", "Split"},
                                                         {"pattern", {{"Regex", llama3_pattern}}},
                                                         {"behavior", "Isolated"},
                                                         {"invert", false}},
                                                        {{"type", "ByteLevel"},
                                                         {"add_prefix_space", false},
                                                         {"trim_offsets", true},
                                                         {"use_regex", false}}})}});
  size_t cases = 0;
  for (const json& c : expected["cases"]) {
    const std::string text = c["text"];
    CAPTURE(c["what"].get<std::string>());
    CAPTURE(text);
    CHECK(gpt2.split_to_vector(text) == c["gpt2_pieces"].get<Pieces>());
    Pieces reference;  // every piece from PCRE2, without the ASCII fast path
    gpt2.split_with_pcre2(text, [&](std::string_view piece) { reference.emplace_back(piece); });
    CHECK(reference == c["gpt2_pieces"].get<Pieces>());
    CHECK(gpt2_tokenizer.encode(text, false) == c["gpt2_ids"].get<std::vector<int32_t>>());
    CHECK(llama3.split_to_vector(text) == c["llama3_pieces"].get<Pieces>());
    CHECK(llama3_tokenizer.encode(text, false) == c["llama3_ids"].get<std::vector<int32_t>>());
    CHECK(digits.split_to_vector(text) == c["digits_pieces"].get<Pieces>());
    ++cases;
  }
  CHECK(cases == 252);
}

// Run by scripts/tokenizers/sweep_unicode_classes.py, which writes `tokenizers`' pieces of every
// code point in several contexts to the file PATCHBAY_UNICODE_SWEEP names (format in the
// script); skipped without it (the file is ~100 MB and needs `tokenizers` to make).
TEST_CASE("sweep: every code point's pieces against tokenizers' (PATCHBAY_UNICODE_SWEEP)") {
  const char* path = std::getenv("PATCHBAY_UNICODE_SWEEP");
  if (path == nullptr) {
    MESSAGE(
        "skipped: PATCHBAY_UNICODE_SWEEP is not set (scripts/tokenizers/sweep_unicode_classes.py)");
    return;
  }
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  const json expected = expected_json();
  const pb::Gpt2PreTokenizer gpt2;
  const pb::PatternPreTokenizer llama3({expected["llama3_pattern"].get<std::string>()});
  const pb::PatternPreTokenizer digits({pb::hf_digits_pattern(true), pb::kGpt2HfPattern});
  const std::string names[] = {"GPT-2", "LLaMA 3", "Digits"};
  auto read_u32 = [&] {
    uint32_t v = 0;
    in.read(reinterpret_cast<char*>(&v), 4);
    return v;
  };
  size_t records = 0, differing[3] = {0, 0, 0}, pieces = 0;
  char kind = 0;
  while (in.get(kind)) {
    std::string text(read_u32(), '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    std::vector<size_t> theirs(read_u32());
    for (size_t& length : theirs) length = read_u32();
    REQUIRE(in.good());
    REQUIRE(kind >= 0);
    REQUIRE(kind <= 2);
    std::vector<size_t> ours;
    auto collect = [&](std::string_view piece) { ours.push_back(piece.size()); };
    if (kind == 0) gpt2.split(text, collect);
    if (kind == 1) llama3.split(text, collect);
    if (kind == 2) digits.split(text, collect);
    ++records;
    pieces += theirs.size();
    if (ours == theirs) continue;
    if (differing[static_cast<size_t>(kind)]++ < 3) {  // show where the first difference is
      size_t at = 0, i = 0;
      while (i < ours.size() && i < theirs.size() && ours[i] == theirs[i]) at += ours[i++];
      MESSAGE(names[static_cast<size_t>(kind)] << " splits differently at byte " << at << ": "
                                               << text.substr(at > 8 ? at - 8 : 0, 24));
    }
  }
  MESSAGE(records << " records, " << pieces << " pieces from tokenizers; records differing: GPT-2 "
                  << differing[0] << ", LLaMA 3 " << differing[1] << ", Digits " << differing[2]);
  CHECK(records > 0);
  CHECK(differing[0] + differing[1] + differing[2] == 0);
}

TEST_CASE("with PCRE2's own Unicode 14 tables (before issue 39) the known answers differ") {
  char version[64] = {};
  pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, version);
  if (std::string(version) != "14.0.0") {
    MESSAGE("skipped: PCRE2 has Unicode " << version << " tables, not Debian 12's 14.0.0");
    return;
  }
  const json expected = expected_json();
  const pb::Gpt2PreTokenizer old_gpt2(pb::CategorySpelling::kPcre2Tables);
  const pb::PatternPreTokenizer old_llama3({expected["llama3_pattern"].get<std::string>()},
                                           pb::CategorySpelling::kPcre2Tables);
  size_t gpt2_differing = 0, llama3_differing = 0;
  for (const json& c : expected["cases"]) {
    const std::string text = c["text"];
    gpt2_differing += old_gpt2.split_to_vector(text) != c["gpt2_pieces"].get<Pieces>();
    llama3_differing += old_llama3.split_to_vector(text) != c["llama3_pieces"].get<Pieces>();
  }
  MESSAGE("cases split differently with PCRE2's tables: GPT-2 " << gpt2_differing << ", LLaMA 3 "
                                                                << llama3_differing);
  CHECK(gpt2_differing > 100);
  CHECK(llama3_differing > 100);
}

// Pre-tokenisation speed, PCRE2's own tables (before) against the Unicode 16 spelling (after),
// alternating in one process, best of 7 by process CPU time. Run by hand:
//   PATCHBAY_UNICODE_BENCH=TEXT_FILE build/tests/tokenizers/tokenizer_bpe_unicode_test -tc='bench*'
TEST_CASE("bench: pre-tokenisation MB per CPU-second before and after (PATCHBAY_UNICODE_BENCH)") {
  const char* path = std::getenv("PATCHBAY_UNICODE_BENCH");
  if (path == nullptr) {
    MESSAGE("skipped: PATCHBAY_UNICODE_BENCH (a text file) is not set");
    return;
  }
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string llama3 = expected_json()["llama3_pattern"];
  using S = pb::CategorySpelling;
  const pb::Gpt2PreTokenizer gpt2_before(S::kPcre2Tables), gpt2_after;
  const pb::PatternPreTokenizer llama3_before({llama3}, S::kPcre2Tables), llama3_after({llama3});
  struct Variant {
    std::string name;
    std::function<void(std::string_view, const std::function<void(std::string_view)>&)> split;
    double best = 1e30;
    size_t pieces = 0;
  };
  std::vector<Variant> variants = {
      {"GPT-2 (ASCII fast path + PCRE2), before",
       [&](auto t, auto& f) { gpt2_before.split(t, f); }},
      {"GPT-2 (ASCII fast path + PCRE2), after", [&](auto t, auto& f) { gpt2_after.split(t, f); }},
      {"GPT-2, PCRE2 alone, before", [&](auto t, auto& f) { gpt2_before.split_with_pcre2(t, f); }},
      {"GPT-2, PCRE2 alone, after", [&](auto t, auto& f) { gpt2_after.split_with_pcre2(t, f); }},
      {"LLaMA 3 Split, before", [&](auto t, auto& f) { llama3_before.split(t, f); }},
      {"LLaMA 3 Split, after", [&](auto t, auto& f) { llama3_after.split(t, f); }}};
  auto cpu_seconds = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  for (int round = 0; round < 7; ++round) {
    for (Variant& v : variants) {
      size_t pieces = 0;
      const double start = cpu_seconds();
      v.split(text, [&](std::string_view) { ++pieces; });
      v.best = std::min(v.best, cpu_seconds() - start);
      v.pieces = pieces;
    }
  }
  for (size_t i = 0; i < variants.size(); i += 2) {
    const Variant& before = variants[i];
    const Variant& after = variants[i + 1];
    const double mb = static_cast<double>(text.size()) / 1e6;
    MESSAGE(before.name << ": " << mb / before.best << " MB/cpu-s; after: " << mb / after.best
                        << " MB/cpu-s; after/before " << before.best / after.best << " (pieces "
                        << before.pieces << " / " << after.pieces << ")");
  }
}
