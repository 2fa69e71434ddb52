// Patchbay SDK conformance kit for tokenizers (PB_KIND_TOKENIZER), header-only, doctest.
//
// Every tokenizer plugin, built-in or third-party, runs the same checks against its C ABI
// (pb_tokenizer_vtable), so what passes here is what the host relies on:
//   - vocab_size is 0 before train for trainable tokenizers and > 0 after;
//   - decode(encode(x)) == x for valid UTF-8 text, and for arbitrary bytes (invalid UTF-8,
//     NULs, long runs) when PB_TOKENIZER_CAP_BYTE_LEVEL is declared; all ids in
//     [0, vocab_size), at most text_len ids for byte-level ones;
//   - each special token encodes to exactly its id with allow_special = 1, decodes back to
//     its text, and is never produced with allow_special = 0;
//   - decode of an id outside [0, vocab_size) fails with PB_STATUS_OUT_OF_RANGE;
//   - save then load into a fresh object gives the same vocabulary, specials and ids;
//   - determinism: two objects trained on the same text save identical files; encoding
//     twice gives the same ids; concurrent encodes on one object agree;
//   - the buffer protocol: a short buffer gives PB_STATUS_BUFFER_TOO_SMALL and the exact
//     size needed, and a retry with that size succeeds;
//   - train without PB_TOKENIZER_CAP_TRAIN gives PB_STATUS_UNSUPPORTED.
//
// Use (needs only sdk headers and doctest):
//
//   #include <patchbay/testing/tokenizer_conformance.hpp>
//   namespace pt = patchbay::testing;
//   TEST_CASE("my tokenizer conforms") {
//     pt::TokenizerConfig config(my::kMyTokenizer, {{"vocab_size", 600}});  // defaults + overrides
//     pt::TokenizerConformanceOptions options;
//     options.training_text = "...";                   // a few KB of representative text
//     pt::check_tokenizer_conformance(pt::factory_for(my::kMyTokenizer, config), options);
//   }
//
// factory_for() creates objects straight from a component descriptor (compiled into the
// test) with tokenizer_test_host(), a minimal standalone host. A host that loads plugins
// from files passes its own factory instead: any callable returning a TokenizerUnderTest.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "patchbay/component.h"
#include "patchbay/testing/config_builder.hpp"
#include "patchbay/testing/standalone_host.hpp"
#include "patchbay/testing/temp_dir.hpp"
#include "patchbay/tokenizer.h"

namespace patchbay::testing {

// ---- a standalone host and config, for tests without the Patchbay host ---------------

namespace tokenizer_kit_detail {

// Parses the TOML literals schemas use for defaults: true/false, integers, floats,
// "strings" and ["arrays", "of strings"] (escapes \" and \\ only).
inline bool parse_string_literal(const std::string& text, size_t& pos, std::string& out) {
  if (pos >= text.size() || text[pos] != '"') return false;
  out.clear();
  for (++pos; pos < text.size(); ++pos) {
    if (text[pos] == '\\' && pos + 1 < text.size()) {
      out.push_back(text[++pos]);
    } else if (text[pos] == '"') {
      ++pos;
      return true;
    } else {
      out.push_back(text[pos]);
    }
  }
  return false;
}

}  // namespace tokenizer_kit_detail

// A pb_host_api for tests that run a tokenizer without the Patchbay host. Static.
inline const pb_host_api* tokenizer_test_host() { return standalone_test_host(); }

// The config of a tokenizer under test: patchbay/testing/config_builder.hpp (schema defaults,
// checked overrides, key-value pairs or `key = value` lines), with view() by reference as
// this kit has always offered it.
class TokenizerConfig : public ConfigBuilder {
 public:
  using ConfigBuilder::ConfigBuilder;
  const pb_config_view& view() { return *ConfigBuilder::view(); }
};

// One tokenizer object under test. Move-only; `release` destroys the object (and whatever
// keeps its code loaded) when the handle dies.
class TokenizerUnderTest {
 public:
  TokenizerUnderTest() = default;
  TokenizerUnderTest(const pb_tokenizer_vtable* vtable, void* instance, const pb_host_api* host,
                     std::function<void()> release)
      : vtable_(vtable), instance_(instance), host_(host), release_(std::move(release)) {}
  ~TokenizerUnderTest() {
    if (release_) release_();
  }
  TokenizerUnderTest(TokenizerUnderTest&& o) noexcept { *this = std::move(o); }
  TokenizerUnderTest& operator=(TokenizerUnderTest&& o) noexcept {
    if (this != &o) {
      if (release_) release_();
      vtable_ = std::exchange(o.vtable_, nullptr);
      instance_ = std::exchange(o.instance_, nullptr);
      host_ = std::exchange(o.host_, nullptr);
      release_ = std::exchange(o.release_, nullptr);
    }
    return *this;
  }

  const pb_tokenizer_vtable* vtable() const { return vtable_; }
  void* instance() const { return instance_; }
  const pb_host_api* host() const { return host_; }
  bool has(uint64_t capability) const { return (vtable_->capabilities & capability) != 0; }

  // Calls that must succeed: a failing status fails the test with the plugin's message.
  void train(const std::string& text) { expect_ok(vtable_->train(instance_, text.data(), text.size()), "train"); }
  int64_t vocab_size() const { return vtable_->vocab_size(instance_); }
  std::vector<int32_t> encode(const std::string& text, bool allow_special) const {
    std::vector<int32_t> ids(text.size() + 16);
    size_t count = 0;
    pb_status* st = vtable_->encode(instance_, text.data(), text.size(), allow_special ? 1 : 0,
                                    ids.data(), ids.size(), &count);
    if (st != nullptr && host_->status_code(st) == PB_STATUS_BUFFER_TOO_SMALL) {
      host_->status_free(st);
      ids.resize(count);
      st = vtable_->encode(instance_, text.data(), text.size(), allow_special ? 1 : 0, ids.data(),
                           ids.size(), &count);
    }
    expect_ok(st, "encode");
    ids.resize(count);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const {
    std::string bytes(ids.size() * 8 + 16, '\0');
    size_t length = 0;
    pb_status* st = vtable_->decode(instance_, ids.data(), ids.size(), bytes.data(), bytes.size(), &length);
    if (st != nullptr && host_->status_code(st) == PB_STATUS_BUFFER_TOO_SMALL) {
      host_->status_free(st);
      bytes.resize(length);
      st = vtable_->decode(instance_, ids.data(), ids.size(), bytes.data(), bytes.size(), &length);
    }
    expect_ok(st, "decode");
    bytes.resize(length);
    return bytes;
  }
  std::vector<std::pair<std::string, int32_t>> special_tokens() const {
    std::vector<std::pair<std::string, int32_t>> specials;
    const size_t count = vtable_->special_token_count(instance_);
    for (size_t i = 0; i < count; ++i) {
      const char* text = nullptr;
      int32_t id = -1;
      expect_ok(vtable_->special_token(instance_, i, &text, &id), "special_token");
      REQUIRE(text != nullptr);
      specials.emplace_back(text, id);
    }
    return specials;
  }
  void save(const std::string& path) const { expect_ok(vtable_->save(instance_, path.c_str()), "save"); }
  void load(const std::string& path) { expect_ok(vtable_->load(instance_, path.c_str()), "load"); }

  // The status code of a call expected to fail (the status is released). OK when it did not.
  pb_status_code code_of(pb_status* st) const {
    if (st == nullptr) return PB_STATUS_OK;
    const pb_status_code code = host_->status_code(st);
    host_->status_free(st);
    return code;
  }

 private:
  void expect_ok(pb_status* st, const char* operation) const {
    if (st == nullptr) return;
    const std::string message = host_->status_message(st) ? host_->status_message(st) : "";
    const int code = static_cast<int>(host_->status_code(st));
    host_->status_free(st);
    FAIL(operation << " failed with status " << code << ": " << message);
  }

  const pb_tokenizer_vtable* vtable_ = nullptr;
  void* instance_ = nullptr;
  const pb_host_api* host_ = nullptr;
  std::function<void()> release_;
};

// Returns a fresh, untrained object with the configuration under test on every call.
using TokenizerFactory = std::function<TokenizerUnderTest()>;

struct TokenizerConformanceOptions {
  // Trainable tokenizers are trained on this before every check; keep it a few KB to a
  // few hundred KB so the suite stays fast. Valid-UTF-8 samples are cut from it.
  std::string training_text;
  // Tokenizers without PB_TOKENIZER_CAP_TRAIN load this file instead (may stay empty for
  // tokenizers that need neither).
  std::string vocabulary_file;
  // Parent of the folders the save/load checks write in: each check makes a fresh folder of
  // its own there (TempDir, unique per process and call, so suites running in parallel never
  // share a file) and removes it when the check ends, passed or failed. Empty: the system's
  // temporary folder.
  std::filesystem::path scratch_dir;
  int random_trials = 40;
  size_t max_random_bytes = 3000;
  uint64_t seed = 1;
};

// A factory creating objects straight from a descriptor with tokenizer_test_host(). The
// config is copied, so the factory stays valid after `config` dies.
inline TokenizerFactory factory_for(const pb_component_descriptor& component,
                                    const TokenizerConfig& config) {
  auto owned = std::make_shared<TokenizerConfig>(config);
  const pb_component_descriptor* descriptor = &component;
  return [descriptor, owned]() {
    REQUIRE(descriptor->kind == PB_KIND_TOKENIZER);
    REQUIRE(descriptor->interface_major == PB_TOKENIZER_INTERFACE_MAJOR);
    const pb_host_api* host = tokenizer_test_host();
    void* instance = nullptr;
    pb_status* st = descriptor->create(host, &owned->view(), &instance);
    if (st != nullptr) {
      const std::string message = host->status_message(st);
      host->status_free(st);
      FAIL("create failed: " << message);
    }
    return TokenizerUnderTest(static_cast<const pb_tokenizer_vtable*>(descriptor->vtable), instance,
                              host, [descriptor, instance] { descriptor->destroy(instance); });
  };
}

namespace tokenizer_kit_detail {

inline TokenizerUnderTest ready_tokenizer(const TokenizerFactory& make,
                                          const TokenizerConformanceOptions& options) {
  TokenizerUnderTest tok = make();
  REQUIRE(tok.vtable() != nullptr);
  REQUIRE(tok.instance() != nullptr);
  REQUIRE(tok.vtable()->struct_size >= sizeof(pb_tokenizer_vtable));
  if (tok.has(PB_TOKENIZER_CAP_TRAIN)) {
    REQUIRE(!options.training_text.empty());
    tok.train(options.training_text);
  } else if (!options.vocabulary_file.empty()) {
    tok.load(options.vocabulary_file);
  }
  REQUIRE(tok.vocab_size() > 0);
  return tok;
}

inline void check_ids_in_range(const TokenizerUnderTest& tok, const std::vector<int32_t>& ids) {
  const int64_t vocab = tok.vocab_size();
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab) {
      FAIL_CHECK("id " << id << " outside [0, " << vocab << ")");
      return;
    }
  }
}

inline std::string random_utf8(std::mt19937_64& rng, size_t n) {
  // Code points from ASCII, Latin-1, CJK and emoji planes; surrogates skipped.
  std::string s;
  while (s.size() < n) {
    uint32_t cp = 0;
    switch (rng() % 4) {
      case 0: cp = 0x20 + rng() % 0x5f; break;
      case 1: cp = 0xa0 + rng() % 0x160; break;
      case 2: cp = 0x4e00 + rng() % 0x5000; break;
      default: cp = 0x1f300 + rng() % 0x300; break;
    }
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      s.push_back(static_cast<char>(0xf0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }
  return s;
}

inline std::string random_bytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// A fresh folder for one check's files, under options.scratch_dir when set.
inline TempDir scratch_folder(const TokenizerConformanceOptions& options) {
  return options.scratch_dir.empty() ? TempDir("tokenizer_conformance")
                                     : TempDir("tokenizer_conformance", options.scratch_dir);
}

inline std::string read_all(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream content;
  content << file.rdbuf();
  return content.str();
}

// A sample of valid text: a slice of the training text cut at character boundaries.
inline std::string text_sample(const std::string& text, std::mt19937_64& rng, size_t n) {
  if (text.empty()) return "hello world";
  size_t begin = rng() % text.size();
  while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xc0) == 0x80) --begin;
  size_t end = std::min(text.size(), begin + n);
  while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) ++end;
  return text.substr(begin, end - begin);
}

}  // namespace tokenizer_kit_detail

// Runs every check as a doctest SUBCASE of the calling TEST_CASE.
inline void check_tokenizer_conformance(const TokenizerFactory& make,
                                        const TokenizerConformanceOptions& options) {
  namespace detail = tokenizer_kit_detail;
  using detail::check_ids_in_range;
  using detail::ready_tokenizer;
  std::mt19937_64 rng(options.seed);

  SUBCASE("vocabulary exists only after train or load") {
    TokenizerUnderTest fresh = make();
    if (fresh.has(PB_TOKENIZER_CAP_TRAIN)) {
      CHECK(fresh.vocab_size() == 0);
    } else {
      const std::string text = "x";
      CHECK(fresh.code_of(fresh.vtable()->train(fresh.instance(), text.data(), text.size())) ==
            PB_STATUS_UNSUPPORTED);
    }
    TokenizerUnderTest tok = ready_tokenizer(make, options);
    CHECK(tok.vocab_size() > 0);
  }

  SUBCASE("valid UTF-8 round-trips and ids lie in [0, vocab_size)") {
    TokenizerUnderTest tok = ready_tokenizer(make, options);
    for (int trial = 0; trial < options.random_trials; ++trial) {
      const std::string text = trial % 2 == 0
          ? detail::text_sample(options.training_text, rng, 1 + rng() % options.max_random_bytes)
          : detail::random_utf8(rng, rng() % options.max_random_bytes);
      const std::vector<int32_t> ids = tok.encode(text, false);
      check_ids_in_range(tok, ids);
      const std::string decoded = tok.decode(ids);
      if (decoded != text) {  // CHECK (not REQUIRE) so the other checks still run; stop at one
        CHECK(decoded == text);
        break;
      }
    }
    CHECK(tok.encode("", false).empty());
    CHECK(tok.decode({}).empty());
  }

  if (make().has(PB_TOKENIZER_CAP_BYTE_LEVEL)) {
    SUBCASE("arbitrary bytes round-trip (byte-level)") {
      TokenizerUnderTest tok = ready_tokenizer(make, options);
      std::vector<std::string> texts = {
          std::string(1, '\0'), std::string(1000, '\0'), std::string(100000, 'x'),
          std::string(5000, ' '), std::string(3000, '\n'), "\xff\xfe\xfd", "\xc3(", "\xe2\x82",
          "\xed\xa0\x80", "\xf4\x90\x80\x80", "a\x80" "b\xc0\xafz", "\xf0\x9f\x91\x8b\xf0\x9f"};
      for (int trial = 0; trial < options.random_trials; ++trial) {
        texts.push_back(detail::random_bytes(rng, rng() % options.max_random_bytes));
      }
      for (const std::string& text : texts) {
        const std::vector<int32_t> ids = tok.encode(text, false);
        CHECK(ids.size() <= text.size());
        check_ids_in_range(tok, ids);
        const std::string decoded = tok.decode(ids);
        if (decoded != text) {
          CHECK_MESSAGE(decoded == text, "round trip failed for a " << text.size() << "-byte input");
          break;
        }
      }
    }
  }

  SUBCASE("special tokens encode to their ids only with allow_special") {
    TokenizerUnderTest tok = ready_tokenizer(make, options);
    for (const auto& [text, id] : tok.special_tokens()) {
      CAPTURE(text);
      CHECK(id >= 0);
      CHECK(id < tok.vocab_size());
      CHECK(tok.encode(text, true) == std::vector<int32_t>{id});
      CHECK(tok.decode({id}) == text);
      const std::string embedded = "ab " + text + " cd";
      const std::vector<int32_t> with = tok.encode(embedded, true);
      CHECK(std::count(with.begin(), with.end(), id) == 1);
      CHECK(tok.decode(with) == embedded);
      const std::vector<int32_t> without = tok.encode(embedded, false);
      CHECK(std::count(without.begin(), without.end(), id) == 0);
      CHECK(tok.decode(without) == embedded);
    }
  }

  SUBCASE("ids outside [0, vocab_size) are refused with OUT_OF_RANGE") {
    TokenizerUnderTest tok = ready_tokenizer(make, options);
    char buffer[64];
    size_t length = 0;
    for (int32_t bad : {-1, static_cast<int32_t>(tok.vocab_size())}) {
      CHECK(tok.code_of(tok.vtable()->decode(tok.instance(), &bad, 1, buffer, sizeof buffer,
                                             &length)) == PB_STATUS_OUT_OF_RANGE);
    }
  }

  SUBCASE("save then load gives the same vocabulary and ids") {
    TokenizerUnderTest tok = ready_tokenizer(make, options);
    const TempDir scratch = detail::scratch_folder(options);
    const std::filesystem::path path = scratch / "saved.tok";
    tok.save(path.string());
    TokenizerUnderTest loaded = make();
    loaded.load(path.string());
    CHECK(loaded.vocab_size() == tok.vocab_size());
    CHECK(loaded.special_tokens() == tok.special_tokens());
    for (int trial = 0; trial < 10; ++trial) {
      const std::string text = detail::text_sample(options.training_text, rng, 2000);
      CHECK(loaded.encode(text, true) == tok.encode(text, true));
    }
    // Saving the loaded object writes the same file: nothing was lost or reordered.
    const std::filesystem::path again = path.string() + ".again";
    loaded.save(again.string());
    CHECK(detail::read_all(again) == detail::read_all(path));
  }

  SUBCASE("training and encoding are deterministic") {
    TokenizerUnderTest first = ready_tokenizer(make, options);
    TokenizerUnderTest second = ready_tokenizer(make, options);
    CHECK(first.vocab_size() == second.vocab_size());
    const TempDir scratch = detail::scratch_folder(options);
    const std::filesystem::path a = scratch / "first.tok";
    const std::filesystem::path b = scratch / "second.tok";
    first.save(a.string());
    second.save(b.string());
    CHECK(detail::read_all(a) == detail::read_all(b));
    const std::string text = detail::text_sample(options.training_text, rng, 5000);
    CHECK(first.encode(text, true) == first.encode(text, true));
    CHECK(first.encode(text, true) == second.encode(text, true));
  }

  SUBCASE("concurrent encodes on one object agree") {
    TokenizerUnderTest tok = ready_tokenizer(make, options);
    const std::string text = options.training_text.empty() ? std::string("some text") : options.training_text;
    const std::vector<int32_t> expected = tok.encode(text, false);
    std::vector<std::vector<int32_t>> results(4);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < results.size(); ++t) {
      threads.emplace_back([&, t] {
        // No doctest assertions off the main thread: collect, check after join.
        std::vector<int32_t> ids(text.size() + 16);
        size_t count = 0;
        pb_status* st = tok.vtable()->encode(tok.instance(), text.data(), text.size(), 0,
                                             ids.data(), ids.size(), &count);
        if (st == nullptr) {
          ids.resize(count);
          results[t] = std::move(ids);
        } else {
          tok.host()->status_free(st);
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (const auto& ids : results) CHECK(ids == expected);
  }

  SUBCASE("buffer-too-small protocol") {
    TokenizerUnderTest tok = ready_tokenizer(make, options);
    const std::string text = detail::text_sample(options.training_text, rng, 500) + "!";
    const std::vector<int32_t> expected = tok.encode(text, false);
    REQUIRE(!expected.empty());
    std::vector<int32_t> ids(expected.size());
    size_t count = 0;
    CHECK(tok.code_of(tok.vtable()->encode(tok.instance(), text.data(), text.size(), 0, nullptr, 0,
                                           &count)) == PB_STATUS_BUFFER_TOO_SMALL);
    CHECK(count == expected.size());
    count = 0;
    CHECK(tok.code_of(tok.vtable()->encode(tok.instance(), text.data(), text.size(), 0, ids.data(),
                                           ids.size() - 1, &count)) == PB_STATUS_BUFFER_TOO_SMALL);
    CHECK(count == expected.size());
    CHECK(tok.code_of(tok.vtable()->encode(tok.instance(), text.data(), text.size(), 0, ids.data(),
                                           ids.size(), &count)) == PB_STATUS_OK);
    CHECK(count == expected.size());
    CHECK(ids == expected);

    std::string bytes(text.size(), '\0');
    size_t length = 0;
    CHECK(tok.code_of(tok.vtable()->decode(tok.instance(), expected.data(), expected.size(),
                                           nullptr, 0, &length)) == PB_STATUS_BUFFER_TOO_SMALL);
    CHECK(length == text.size());
    CHECK(tok.code_of(tok.vtable()->decode(tok.instance(), expected.data(), expected.size(),
                                           bytes.data(), bytes.size() - 1, &length)) ==
          PB_STATUS_BUFFER_TOO_SMALL);
    CHECK(length == text.size());
    CHECK(tok.code_of(tok.vtable()->decode(tok.instance(), expected.data(), expected.size(),
                                           bytes.data(), bytes.size(), &length)) == PB_STATUS_OK);
    CHECK(bytes == text);
  }
}

}  // namespace patchbay::testing
