// Tests of patchbay_data: KJV chapter parsing, text folders, deterministic splits, the
// manifest, and token cache round trips (uint16 and uint32) with corruption detection.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "common/error.hpp"
#include "data/corpus.hpp"
#include "data/split.hpp"
#include "data/token_cache.hpp"
#include "patchbay/testing/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace patchbay::data;

namespace {

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

Corpus synthetic_corpus(size_t documents) {
  Corpus corpus;
  corpus.source = "synthetic";
  corpus.separator = "\n";
  for (size_t i = 0; i < documents; ++i) {
    corpus.documents.push_back({"Book " + std::to_string(i), "Book " + std::to_string(i) + "\n\n  1 verse.\n"});
  }
  return corpus;
}

}  // namespace

TEST_CASE("bible output splits into chapters named by their headings") {
  const std::string printed = "\nGenesis 1\n\n  1 In the beginning.\n  2 And the earth.\n\nGenesis 2\n\n  1 Thus.\n";
  const auto chapters = split_kjv_chapters(printed);
  REQUIRE(chapters.size() == 2);
  CHECK(chapters[0].name == "Genesis 1");
  CHECK(chapters[0].text == "Genesis 1\n\n  1 In the beginning.\n  2 And the earth.\n");
  CHECK(chapters[1].text == "Genesis 2\n\n  1 Thus.\n");
}

TEST_CASE("the installed KJV gives 1189 chapters, Genesis 1 first and Revelation 22 last") {
  if (std::system("command -v bible > /dev/null 2>&1") != 0) {
    MESSAGE("skipped: the `bible` program (Debian bible-kjv) is not installed");
    return;
  }
  const Corpus kjv = load_corpus("KJV");
  REQUIRE(kjv.documents.size() == 1189);
  CHECK(kjv.documents.front().name == "Genesis 1");
  CHECK(kjv.documents.back().name == "Revelation 22");
  CHECK(kjv.documents.front().text.find("  1 In the beginning God created the heaven and the earth.\n") != std::string::npos);
  CHECK(kjv.bytes() > 4'000'000);
}

TEST_CASE("files are cut into blocks ending at newlines, and folders read in sorted order") {
  std::string text;
  for (int i = 0; i < 3000; ++i) text += "line number " + std::to_string(i) + "\n";
  const auto blocks = split_into_blocks("f.txt", text, 1000);
  std::string joined;
  for (const auto& b : blocks) {
    CHECK(b.text.back() == '\n');
    joined += b.text;
  }
  CHECK(joined == text);
  CHECK(blocks[1].name == "f.txt#1");

  const patchbay::testing::TempDir scratch("data_test");
  const fs::path folder = scratch / "folder";
  fs::create_directories(folder / "sub");
  std::ofstream(folder / "b.txt") << "second\n";
  std::ofstream(folder / "a.md") << "first\n";
  std::ofstream(folder / "sub" / "c.txt") << "third\n";
  std::ofstream(folder / ".hidden") << "skip\n";
  std::ofstream(folder / "binary.bin", std::ios::binary) << std::string("\0\1\2", 3);
  const Corpus corpus = load_corpus(folder.string());
  REQUIRE(corpus.documents.size() == 3);
  CHECK(corpus.documents[0].text == "first\n");
  CHECK(corpus.documents[1].text == "second\n");
  CHECK(corpus.documents[2].name == "sub/c.txt#0");
  CHECK_THROWS_AS(load_corpus((folder / "missing").string()), patchbay::Error);
}

TEST_CASE("the split is deterministic, depends on the seed, and keeps every document once") {
  const Corpus corpus = synthetic_corpus(1000);
  const CorpusSplit a = split_corpus(corpus, {0.1, 0});
  const CorpusSplit b = split_corpus(corpus, {0.1, 0});
  const CorpusSplit c = split_corpus(corpus, {0.1, 1});
  CHECK(a.train == b.train);
  CHECK(a.val_names == b.val_names);
  CHECK(a.val_names != c.val_names);
  CHECK(a.train_documents + a.val_documents == 1000);
  CHECK(a.val_documents > 60);   // ~100 expected; binomial sd ~9.5
  CHECK(a.val_documents < 140);
  // A document's side depends only on its name: dropping other documents keeps it.
  Corpus half = corpus;
  half.documents.resize(500);
  const CorpusSplit h = split_corpus(half, {0.1, 0});
  for (const std::string& name : h.val_names) {
    CHECK(std::find(a.val_names.begin(), a.val_names.end(), name) != a.val_names.end());
  }
  // Tiny corpora still get one validation document.
  CHECK(split_corpus(synthetic_corpus(2), {0.05, 0}).val_documents == 1);
  CHECK(split_corpus(synthetic_corpus(3), {0.0, 0}).val_documents == 0);
  CHECK_THROWS_AS(split_corpus(corpus, {1.0, 0}), patchbay::Error);
}

TEST_CASE("prepared folder holds both splits and a manifest with their hashes") {
  const Corpus corpus = synthetic_corpus(50);
  const SplitOptions options{0.2, 7};
  const CorpusSplit split = split_corpus(corpus, options);
  const patchbay::testing::TempDir scratch("data_test");
  const PreparedFiles files = write_prepared_corpus(scratch / "prepared", corpus, split, options);
  CHECK(read(files.train) == split.train);
  CHECK(read(files.val) == split.val);
  const std::string manifest = read(files.manifest);
  CHECK(manifest.find("\"seed\": 7") != std::string::npos);
  CHECK(manifest.find("\"documents\": 50") != std::string::npos);
  std::ostringstream hash;
  hash << std::hex << fnv1a64(split.val);
  CHECK(manifest.find(hash.str()) != std::string::npos);
  CHECK(!fs::exists(files.manifest.string() + ".tmp"));
}

TEST_CASE("token caches round-trip as uint16 and uint32 and refuse damaged files") {
  const patchbay::testing::TempDir scratch("data_test");
  std::mt19937 rng(3);
  for (uint64_t vocab : {300ull, 65536ull, 100000ull}) {
    std::vector<int32_t> ids(10007);
    for (int32_t& id : ids) id = static_cast<int32_t>(rng() % vocab);
    ids[0] = static_cast<int32_t>(vocab - 1);
    const fs::path path = scratch / ("cache_" + std::to_string(vocab) + ".tokens");
    TokenCacheInfo info;
    info.vocab_size = vocab;
    info.tokenizer_hash = 0x1234;
    info.source_hash = 0x5678;
    info.tokenizer_kind = "bpe";
    write_token_cache(path, ids, info);
    const TokenCache cache = TokenCache::open(path);
    CHECK(cache.info().bytes_per_id == (vocab <= 65536 ? 2u : 4u));
    CHECK(fs::file_size(path) == 64 + ids.size() * cache.info().bytes_per_id);
    CHECK(cache.info().vocab_size == vocab);
    CHECK(cache.info().tokenizer_hash == 0x1234);
    CHECK(cache.info().tokenizer_kind == "bpe");
    CHECK(cache.to_vector() == ids);
    std::vector<int32_t> window(5);
    cache.copy(10000, window);
    CHECK(window == std::vector<int32_t>(ids.begin() + 10000, ids.begin() + 10005));
    CHECK_THROWS_AS(cache.copy(10005, window), patchbay::Error);
  }
  const fs::path path = scratch / "bad.tokens";
  CHECK_THROWS_AS(write_token_cache(path, std::vector<int32_t>{5}, TokenCacheInfo{0, 0, 5, 0, 0, "char"}),
                  patchbay::Error);
  write_token_cache(path, std::vector<int32_t>{1, 2, 3}, TokenCacheInfo{0, 0, 5, 0, 0, "char"});
  fs::resize_file(path, fs::file_size(path) - 1);
  CHECK_THROWS_AS(TokenCache::open(path), patchbay::Error);
  std::ofstream(path, std::ios::binary) << "not a cache at all, but long enough to hold a header.........";
  CHECK_THROWS_AS(TokenCache::open(path), patchbay::Error);
}
