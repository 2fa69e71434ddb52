// Document-level train/validation split, manifest writing; see split.hpp.
#include "data/split.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.hpp"
#include "run/atomic_file.hpp"

namespace patchbay::data {
namespace fs = std::filesystem;

uint64_t fnv1a64(std::string_view bytes, uint64_t hash) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

CorpusSplit split_corpus(const Corpus& corpus, const SplitOptions& options) {
  if (!(options.val_fraction >= 0.0 && options.val_fraction < 1.0)) {
    throw Error(ErrorKind::kInvalidArgument,
                "val_fraction must lie in [0, 1), got " + std::to_string(options.val_fraction));
  }
  const size_t n = corpus.documents.size();
  std::vector<uint64_t> hash(n);
  std::vector<bool> is_val(n);
  // val_fraction * 2^64 as a threshold; ldexp keeps it exact enough and below 2^64.
  const long double threshold = std::ldexp(static_cast<long double>(options.val_fraction), 64);
  size_t val_count = 0;
  for (size_t i = 0; i < n; ++i) {
    hash[i] = splitmix64(fnv1a64(corpus.documents[i].name) ^ options.seed);
    is_val[i] = static_cast<long double>(hash[i]) < threshold;
    val_count += is_val[i] ? 1 : 0;
  }
  if (options.val_fraction > 0.0 && n >= 2) {
    if (val_count == 0) {
      is_val[static_cast<size_t>(std::min_element(hash.begin(), hash.end()) - hash.begin())] = true;
    } else if (val_count == n) {
      is_val[static_cast<size_t>(std::max_element(hash.begin(), hash.end()) - hash.begin())] = false;
    }
  }
  CorpusSplit split;
  for (size_t i = 0; i < n; ++i) {
    const Document& d = corpus.documents[i];
    std::string& target = is_val[i] ? split.val : split.train;
    size_t& count = is_val[i] ? split.val_documents : split.train_documents;
    if (count > 0) target += corpus.separator;
    target += d.text;
    ++count;
    if (is_val[i]) split.val_names.push_back(d.name);
  }
  return split;
}

namespace {

std::string hex64(uint64_t v) {
  std::ostringstream s;
  s << std::hex << std::setw(16) << std::setfill('0') << v;
  return s.str();
}

nlohmann::ordered_json split_entry(const char* file, const std::string& text, size_t documents) {
  return {{"file", file}, {"bytes", text.size()}, {"documents", documents}, {"fnv1a64", hex64(fnv1a64(text))}};
}

}  // namespace

PreparedFiles write_prepared_corpus(const fs::path& out_dir, const Corpus& corpus,
                                    const CorpusSplit& split, const SplitOptions& options) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw Error(ErrorKind::kIo, "cannot create folder '" + out_dir.string() + "': " + ec.message());
  PreparedFiles files{out_dir / "train.txt", out_dir / "val.txt", out_dir / "manifest.json"};
  run::write_text_atomically(files.train, split.train);
  run::write_text_atomically(files.val, split.val);
  const nlohmann::ordered_json manifest = {
      {"format", "patchbay-prepared-data"},
      {"version", 1},
      {"source", corpus.source},
      {"description", corpus.description},
      {"bytes", corpus.bytes()},
      {"documents", corpus.documents.size()},
      {"document_rule", corpus.document_rule},
      {"split_rule", "validation when splitmix64(fnv1a64(document name) ^ seed) < val_fraction * 2^64"},
      {"val_fraction", options.val_fraction},
      {"seed", options.seed},
      {"train", split_entry("train.txt", split.train, split.train_documents)},
      {"val", split_entry("val.txt", split.val, split.val_documents)},
      {"val_documents", split.val_names}};
  // error_handler replace: document names from arbitrary files may hold invalid UTF-8.
  run::write_text_atomically(files.manifest,
                             manifest.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  return files;
}

}  // namespace patchbay::data
