// A split encoded into a token cache with real tokenizer plugins loaded through the
// registry (PATCHBAY_PLUGIN_PATH), read back through the memory map, and decoded to the
// original text; the header records the tokenizer's kind, vocab size and file hash.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "data/split.hpp"
#include "data/token_cache.hpp"
#include "data/tokenizer_io.hpp"
#include "patchbay/testing/temp_dir.hpp"
#include "runtime/registry.hpp"

namespace fs = std::filesystem;
namespace rt = patchbay::runtime;
using namespace patchbay::data;

TEST_CASE("a split round-trips through tokenizer, token cache and decode") {
  const patchbay::testing::TempDir scratch("cache_test");
  const fs::path& dir = scratch.path();
  std::string text;
  for (int verse = 1; verse <= 400; ++verse) {
    text += "  " + std::to_string(verse) + " And God said, Let there be light: and there was light. é日\n";
  }
  text += "<|endoftext|> stays ordinary text in a split\n";
  std::ofstream(dir / "train.txt", std::ios::binary) << text;

  rt::Registry registry;
  registry.scan(rt::plugin_search_path({}));
  for (const std::string kind : {"bpe", "char"}) {
    CAPTURE(kind);
    TokenizerSettings settings;
    settings.kind = kind;
    if (kind == "bpe") settings.vocab_size = 400;
    rt::TokenizerHandle trained = create_tokenizer(registry, settings);
    trained.train(text);
    const fs::path tokenizer_file = dir / (kind + ".tok");
    trained.save(tokenizer_file.string());
    CHECK(detect_tokenizer_kind(tokenizer_file) == kind);

    const rt::TokenizerHandle loaded = load_tokenizer(registry, tokenizer_file);
    const fs::path cache_file = dir / ("train." + kind + ".tokens");
    const TokenCacheInfo written = encode_file_to_token_cache(loaded, kind, tokenizer_file, dir / "train.txt", cache_file);
    const TokenCache cache = TokenCache::open(cache_file);
    CHECK(cache.info().tokenizer_kind == kind);
    CHECK(cache.info().vocab_size == static_cast<uint64_t>(loaded.vocab_size()));
    CHECK(cache.info().tokenizer_hash == fnv1a64(read_text_file(tokenizer_file)));
    CHECK(cache.info().source_hash == fnv1a64(text));
    CHECK(cache.size() == written.count);
    const std::vector<int32_t> ids = cache.to_vector();
    CHECK(ids == loaded.encode(text, false));
    CHECK(loaded.decode(ids) == text);
  }
}
