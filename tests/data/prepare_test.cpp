// Streaming preparation into token shards (core/data/prepare.hpp) with the real char
// tokenizer plugin: every document decodes back to its source text followed by the
// end-of-text token; folders with globs, JSON Lines, gzip and zstd inputs; the output does not
// depend on threads or chunk size; exact dedup, empty documents, bad lines (error naming
// file:line, or skipped and counted), invalid UTF-8 (byte fallback); a resumed run (shards and
// manifest removed, a half-written shard left) gives the same files; shards of another
// tokenizer are refused naming both hashes; uint32 ids above 65,536 ids.
#include "data/prepare.hpp"

#include <doctest/doctest.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "data/document_reader.hpp"
#include "data/prepare_state.hpp"
#include "data/prepared_dataset.hpp"
#include "data/shard_writer.hpp"
#include "data/source_files.hpp"
#include "data/split.hpp"
#include "data/token_cache.hpp"
#include "data/tokenizer_io.hpp"
#include "patchbay/testing/temp_dir.hpp"
#include "runtime/registry.hpp"

namespace fs = std::filesystem;
using namespace patchbay;
using namespace patchbay::data;

namespace {

void write_file(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_gzip(const fs::path& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) ==
          static_cast<int>(bytes.size()));
  gzclose(f);
}

void write_zstd(const fs::path& path, const std::string& bytes) {
  std::string out(ZSTD_compressBound(bytes.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), 3);
  REQUIRE(!ZSTD_isError(n));
  out.resize(n);
  write_file(path, out);
}

std::string paragraph(int i) {
  static const std::vector<std::string> words = {"light", "water", "stone",
                                                 "river", "tree",  "night"};
  std::string text;
  for (int w = 0; w < 20 + i % 13; ++w) text += words[static_cast<size_t>((i * 7 + w) % 6)] + " ";
  return text + "\n";
}

struct Tokenizer {
  runtime::Registry registry;
  std::optional<runtime::TokenizerHandle> handle;
  fs::path file;
  Tokenizer(const fs::path& folder, const std::string& training_text,
            const std::string& name = "char.tok") {
    registry.scan(runtime::plugin_search_path({}));
    TokenizerSettings settings;
    settings.kind = "char";
    handle.emplace(create_tokenizer(registry, settings));
    handle->train(training_text);
    file = folder / name;
    handle->save(file.string());
  }
  PrepareTokenizer prepare() const { return {&*handle, "char", file}; }
  int32_t eot() const {
    for (const auto& s : handle->special_tokens())
      if (s.text == "<|endoftext|>") return s.id;
    return -1;
  }
};

// Every document of a split, decoded, in shard order.
std::vector<std::string> documents_of(const fs::path& out, const std::string& split,
                                      const Tokenizer& t) {
  std::vector<std::string> docs;
  const nlohmann::json m = nlohmann::json::parse(read_file(out / "manifest.json"));
  for (const auto& shard : m["splits"][split]["shards"]) {
    const TokenCache cache = TokenCache::open(out / shard["file"].get<std::string>());
    const std::vector<uint64_t> offsets =
        read_document_index(out / shard["index"].get<std::string>());
    const std::vector<int32_t> ids = cache.to_vector();
    for (size_t d = 0; d + 1 < offsets.size(); ++d) {
      REQUIRE(offsets[d + 1] > offsets[d]);
      CHECK(ids[offsets[d + 1] - 1] == t.eot());  // each document ends with end-of-text
      docs.push_back(t.handle->decode(
          std::span<const int32_t>(ids).subspan(offsets[d], offsets[d + 1] - offsets[d] - 1)));
    }
  }
  return docs;
}

std::map<std::string, std::string> folder_files(const fs::path& folder) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(folder))
    files[e.path().filename().string()] = read_file(e.path());
  return files;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("globs keep and leave out a folder's files; sorted, hidden skipped") {
  const testing::TempDir dir("prepare_globs");
  write_file(dir / "src/b.md", "b");
  write_file(dir / "src/a.txt", "a");
  write_file(dir / "src/sub/c.txt", "c");
  write_file(dir / "src/sub/skip.txt", "s");
  write_file(dir / "src/.hidden/d.txt", "d");
  write_file(dir / "src/e.bin", std::string("x\0y", 3));
  SourceSpec spec{dir / "src", {"*.txt", "*.md"}, {"skip*"}, "text"};
  std::vector<std::string> names;
  for (const SourceFile& f : list_source_files({spec})) names.push_back(f.name);
  CHECK(names == std::vector<std::string>{"src/a.txt", "src/b.md", "src/sub/c.txt"});
  CHECK(glob_matches("sub/*.txt", "sub/c.txt"));
  CHECK_FALSE(glob_matches("*.md", "sub/c.txt"));
  CHECK(error_of([&] {
          list_source_files({{dir / "src", {"*.rst"}, {}, "text"}});
        }).find("--include '*.rst'") != std::string::npos);
  CHECK(error_of([&] {
          list_source_files({{dir / "missing", {}, {}, "text"}});
        }).find("does not exist") != std::string::npos);
}

TEST_CASE(
    "text, JSON Lines, gzip and zstd sources: each document decodes to its text, then "
    "end-of-text") {
  const testing::TempDir dir("prepare_sources");
  std::vector<std::string> expected;
  std::string all;
  for (int i = 0; i < 30; ++i) {
    const std::string text = paragraph(i) + paragraph(i + 1);
    write_file(dir / "books" / (std::string("b") + std::to_string(100 + i) + ".txt"), text);
    expected.push_back(text);
    all += text;
  }
  std::string jsonl, jsonl_gz, jsonl_zst;
  for (int i = 0; i < 20; ++i) {
    const std::string text =
        "line " + std::to_string(i) + ": " + paragraph(i + 40) + "\u00e9\"quoted\"";
    const std::string line = nlohmann::json{{"id", i}, {"body", text}}.dump() + "\n";
    (i % 3 == 0 ? jsonl : i % 3 == 1 ? jsonl_gz : jsonl_zst) += line;
    all += text;
  }
  write_file(dir / "web/a.jsonl", jsonl + "\n");  // a trailing blank line is no document
  write_gzip(dir / "web/b.jsonl.gz", jsonl_gz);
  write_zstd(dir / "web/c.jsonl.zst", jsonl_zst);
  std::vector<std::string> json_texts;
  for (const std::string* part : {&jsonl, &jsonl_gz, &jsonl_zst}) {
    std::istringstream lines(*part);
    for (std::string line; std::getline(lines, line);)
      json_texts.push_back(nlohmann::json::parse(line)["body"].get<std::string>());
  }
  const Tokenizer t(dir.path(), all + "<>\"");
  PrepareOptions o;
  o.sources = {{dir / "books", {}, {}, "text"}, {dir / "web", {}, {}, "body"}};
  o.out = dir / "out";
  o.val_fraction = 0.2;
  o.shard_bytes = 2048;
  o.threads = 3;
  o.chunk_bytes = 700;
  const PrepareReport r = prepare_dataset(o, t.prepare());
  REQUIRE(r.sources.size() == 2);
  CHECK(r.sources[0].files == 30);
  CHECK(r.sources[0].documents == 30);
  CHECK(r.sources[1].files == 3);
  CHECK(r.sources[1].documents == 20);
  CHECK(r.bytes_per_id == 2);
  CHECK(r.splits[0].shards > 1);  // small shards: several per split
  // Every document once, in its split, in input order.
  std::vector<std::string> inputs = expected;
  inputs.insert(inputs.end(), json_texts.begin(), json_texts.end());
  std::vector<std::string> names;
  for (int i = 0; i < 30; ++i) names.push_back("books/b" + std::to_string(100 + i) + ".txt");
  for (const auto& [file, lines] : std::vector<std::pair<std::string, int>>{
           {"web/a.jsonl", 7}, {"web/b.jsonl.gz", 7}, {"web/c.jsonl.zst", 6}})
    for (int line = 1; line <= lines; ++line) names.push_back(file + ":" + std::to_string(line));
  REQUIRE(names.size() == inputs.size());
  std::vector<std::string> want_train, want_val;
  for (size_t i = 0; i < inputs.size(); ++i)
    (document_split(names[i], 0.2, 0, 0) == 1 ? want_val : want_train).push_back(inputs[i]);
  CHECK(documents_of(o.out, "train", t) == want_train);
  CHECK(documents_of(o.out, "val", t) == want_val);
  CHECK(!want_val.empty());
  const nlohmann::json m = nlohmann::json::parse(read_file(o.out / "manifest.json"));
  CHECK(m["dtype"] == "uint16");
  CHECK(m["tokenizer"]["hash"].get<std::string>().size() == 16);
  CHECK(m["sources"][1]["documents"] == 20);
  uint64_t tokens = 0;
  for (const char* split : {"train", "val"}) tokens += m["splits"][split]["tokens"].get<uint64_t>();
  CHECK(tokens == r.sources[0].tokens + r.sources[1].tokens);
}

TEST_CASE(
    "the output is a pure function of sources and options: threads and chunks do not matter") {
  const testing::TempDir dir("prepare_determinism");
  std::string all;
  for (int i = 0; i < 60; ++i) {
    write_file(dir / "src" / (std::string("f") + std::to_string(i) + ".txt"), paragraph(i));
    all += paragraph(i);
  }
  // One long file read in several pieces.
  std::string long_text;
  for (int i = 0; i < 400; ++i) long_text += paragraph(i);
  write_file(dir / "src/zz_long.txt", long_text);
  const Tokenizer t(dir.path(), all);
  PrepareOptions o;
  o.sources = {{dir / "src", {}, {}, "text"}};
  o.shard_bytes = 4096;
  o.piece_bytes = 4096;
  o.dedup_exact = true;
  o.out = dir / "one";
  o.threads = 1;
  prepare_dataset(o, t.prepare());
  o.out = dir / "four";
  o.threads = 4;
  o.chunk_bytes = 333;
  prepare_dataset(o, t.prepare());
  CHECK(folder_files(dir / "one") == folder_files(dir / "four"));
  // The long document decodes whole, from its pieces.
  const std::vector<std::string> train = documents_of(dir / "one", "train", t);
  const std::vector<std::string> val = documents_of(dir / "one", "val", t);
  CHECK((std::find(train.begin(), train.end(), long_text) != train.end() ||
         std::find(val.begin(), val.end(), long_text) != val.end()));
}

TEST_CASE("dedup, empty documents, bad lines and invalid UTF-8") {
  const testing::TempDir dir("prepare_bad_input");
  const std::string invalid = std::string("caf\xc3\xa9 \xff\xfe broken \xc3") + "\n";
  write_file(dir / "src/a.txt", paragraph(1));
  write_file(dir / "src/b.txt", paragraph(1));  // a duplicate of a.txt
  write_file(dir / "src/c.txt", "");            // empty
  write_file(dir / "src/d.txt", invalid);
  write_file(dir / "web/x.jsonl",
             "{\"text\": \"fine\"}\n{not json\n{\"body\": \"no text field\"}\n{\"text\": \"\"}\n");
  const Tokenizer t(dir.path(), paragraph(1) + "fine");
  PrepareOptions o;
  o.sources = {{dir / "src", {}, {}, "text"}};
  o.out = dir / "out";
  o.val_fraction = 0;
  o.dedup_exact = true;
  const PrepareReport r = prepare_dataset(o, t.prepare());
  CHECK(r.sources[0].duplicates == 1);
  CHECK(r.sources[0].empty == 1);
  CHECK(r.sources[0].documents == 2);
  const std::vector<std::string> docs = documents_of(o.out, "train", t);
  REQUIRE(docs.size() == 2);
  CHECK(docs[1] == invalid);  // byte fallback: the exact bytes come back

  o.sources = {{dir / "web", {}, {}, "text"}};
  o.out = dir / "bad";
  const std::string message = error_of([&] { prepare_dataset(o, t.prepare()); });
  CHECK(message.find("x.jsonl:2: not valid JSON") != std::string::npos);
  CHECK(message.find("--skip-bad") != std::string::npos);
  o.skip_bad = true;
  o.out = dir / "skipped";
  const PrepareReport skipped = prepare_dataset(o, t.prepare());
  CHECK(skipped.sources[0].bad == 2);  // line 2 (not JSON) and line 3 (no "text" field)
  CHECK(skipped.sources[0].empty == 1);
  CHECK(skipped.sources[0].documents == 1);
  o.skip_bad = false;
  write_file(dir / "web2/y.jsonl", "{\"body\": \"x\"}\n");
  o.sources = {{dir / "web2", {}, {}, "text"}};
  o.out = dir / "missing_field";
  CHECK(error_of([&] {
          prepare_dataset(o, t.prepare());
        }).find("y.jsonl:1: has no field \"text\" (its fields: body)") != std::string::npos);
}

TEST_CASE("a resumed preparation gives the same files; another tokenizer's shards are refused") {
  const testing::TempDir dir("prepare_resume");
  std::string all;
  for (int i = 0; i < 80; ++i) {
    write_file(dir / "src" / (std::string("f") + std::to_string(1000 + i) + ".txt"),
               paragraph(i) + paragraph(i + 3));
    all += paragraph(i);
  }
  const Tokenizer t(dir.path(), all);
  PrepareOptions o;
  o.sources = {{dir / "src", {}, {}, "text"}};
  o.shard_bytes = 3000;
  o.val_fraction = 0.25;
  o.out = dir / "whole";
  prepare_dataset(o, t.prepare());
  const auto whole = folder_files(o.out);
  // As a kill would leave it: later shards and the manifest missing, one shard half-written,
  // a temporary from an atomic write.
  fs::copy(o.out, dir / "cut");
  o.out = dir / "cut";
  fs::remove(o.out / "manifest.json");
  int removed = 0;
  for (const auto& [name, bytes] : whole) {
    if (name.rfind("train-", 0) == 0 && name >= "train-00003") {
      fs::remove(o.out / name);
      ++removed;
    }
  }
  REQUIRE(removed > 0);
  write_file(o.out / "train-00003.tokens.partial", "PBTOKENS half");
  write_file(o.out / "train-00003.idx.tmp-123", "half");
  const PrepareReport r = prepare_dataset(o, t.prepare());
  CHECK(r.resumed_shards >= 3);
  CHECK(folder_files(o.out) == whole);
  CHECK(prepare_dataset(o, t.prepare()).already_complete);

  const Tokenizer other(dir.path(), all + "XYZ", "other.tok");
  const std::string message = error_of([&] { prepare_dataset(o, other.prepare()); });
  const nlohmann::json m = nlohmann::json::parse(read_file(o.out / "manifest.json"));
  CHECK(message.find(m["tokenizer"]["hash"].get<std::string>()) != std::string::npos);
  CHECK(message.find(hex64(fnv1a64(read_file(other.file)))) != std::string::npos);
  CHECK(message.find("never mix") != std::string::npos);
}

TEST_CASE("a manifest with a missing or mistyped field is an input error naming the file") {
  const testing::TempDir dir("prepare_manifest_fields");
  write_file(dir / "src" / "a.txt", paragraph(1) + paragraph(2));
  const Tokenizer t(dir.path(), paragraph(1) + paragraph(2));
  PrepareOptions o;
  o.sources = {{dir / "src", {}, {}, "text"}};
  o.out = dir / "out";
  prepare_dataset(o, t.prepare());
  const nlohmann::json good = nlohmann::json::parse(read_file(o.out / "manifest.json"));
  CHECK(open_prepared_dataset(o.out).tokens[0] > 0);
  const std::vector<std::function<void(nlohmann::json&)>> edits = {
      [](nlohmann::json& m) { m["tokenizer"].erase("vocab_size"); },
      [](nlohmann::json& m) { m["splits"]["train"]["tokens"] = "many"; },
      [](nlohmann::json& m) { m["tokenizer"]["hash"] = "not-hex"; },
      [](nlohmann::json& m) { m["tokenizer"]["hash"] = 12; },
      [](nlohmann::json& m) { m.erase("splits"); }};
  for (size_t e = 0; e < edits.size(); ++e) {
    INFO("edit " << e);
    nlohmann::json edited = good;
    edits[e](edited);
    write_file(o.out / "manifest.json", edited.dump());
    const std::string message = error_of([&] { (void)open_prepared_dataset(o.out); });
    CHECK(message.find("manifest.json") != std::string::npos);
    CHECK(message.find("prepare the data again") != std::string::npos);
  }
}

TEST_CASE("ids of a vocabulary past 65,536 are stored as uint32") {
  const testing::TempDir dir("prepare_uint32");
  TokenCacheInfo header;
  header.vocab_size = 70000;
  header.tokenizer_kind = "test";
  {
    ShardWriter w(dir / "train-00000.tokens", header);
    const std::vector<int32_t> a = {1, 69999, 65536}, b = {7};
    w.append(a);
    w.end_document();
    w.append(b);
    w.end_document();
    CHECK(fs::exists(ShardWriter::partial_file(dir / "train-00000.tokens")));
    w.finish("{}\n");
  }
  const TokenCache cache = TokenCache::open(dir / "train-00000.tokens");
  CHECK(cache.info().bytes_per_id == 4);
  CHECK(cache.to_vector() == std::vector<int32_t>{1, 69999, 65536, 7});
  CHECK(read_document_index(dir / "train-00000.idx") == std::vector<uint64_t>{0, 3, 4});
  CHECK_FALSE(fs::exists(ShardWriter::partial_file(dir / "train-00000.tokens")));
  {  // an unfinished shard leaves nothing behind
    ShardWriter w(dir / "train-00001.tokens", header);
    w.append(std::vector<int32_t>{3});
  }
  CHECK_FALSE(fs::exists(dir / "train-00001.tokens"));
  CHECK_FALSE(fs::exists(ShardWriter::partial_file(dir / "train-00001.tokens")));
}
