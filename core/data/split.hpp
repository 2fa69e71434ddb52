// Deterministic train / validation split of a corpus by documents, and the prepared-data
// folder: train.txt, val.txt and manifest.json.
//
// Rule: document d goes to validation when
//     splitmix64(fnv1a64(d.name) ^ seed) < val_fraction * 2^64,
// so the assignment of a document depends only on its name and the seed (not on the order
// or on the other documents). Guarantees: with val_fraction in (0, 1) and >= 2 documents,
// both splits get at least one document (the lowest-hash document moves to validation if
// none landed there, the highest-hash one back to training if all did).
// Each split is its documents in corpus order joined with Corpus::separator.
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "data/corpus.hpp"

namespace patchbay::data {

uint64_t fnv1a64(std::string_view bytes, uint64_t hash = 0xcbf29ce484222325ull);
uint64_t splitmix64(uint64_t x);
// A chain of splitmix64 rounds over `words` from `salt`: h = salt, then h = splitmix64(h ^ w)
// for each word. Each user passes its own salt so its streams differ from the others' (the
// objectives' per-row seeds: mix(seed, step, micro_step, row)).
inline uint64_t splitmix64_words(uint64_t salt, std::initializer_list<uint64_t> words) {
  uint64_t h = salt;
  for (uint64_t w : words) h = splitmix64(h ^ w);
  return h;
}

struct SplitOptions {
  double val_fraction = 0.05;  // in [0, 1)
  uint64_t seed = 0;
};

struct CorpusSplit {
  std::string train;
  std::string val;
  size_t train_documents = 0;
  size_t val_documents = 0;
  std::vector<std::string> val_names;  // in corpus order
};

CorpusSplit split_corpus(const Corpus& corpus, const SplitOptions& options);

struct PreparedFiles {
  std::filesystem::path train;
  std::filesystem::path val;
  std::filesystem::path manifest;
};

// Writes <out_dir>/train.txt, val.txt, manifest.json (each atomically: temporary file,
// then rename), creating out_dir. Throws Error(kIo).
PreparedFiles write_prepared_corpus(const std::filesystem::path& out_dir, const Corpus& corpus,
                                    const CorpusSplit& split, const SplitOptions& options);

}  // namespace patchbay::data
