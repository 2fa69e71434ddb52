// What `patchbay data prepare` finds in its output folder before it starts, and the options
// record that decides whether earlier work can be kept: the folder is cleaned of unfinished
// files, finished shards are checked (same options, same tokenizer — else refused, naming
// both tokenizer hashes), and the documents they hold are counted so the run resumes after
// them. Part of prepare.hpp's pipeline; exposed for tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/prepare.hpp"

namespace patchbay::data {

// The facts about the tokenizer that the output depends on.
struct TokenizerFacts {
  std::string kind;
  std::string file;
  uint64_t hash = 0;  // fnv1a64 of the saved file
  int64_t vocab_size = 0;
  int32_t eot_id = -1;
};

// Everything the shards depend on (not threads, chunk size or the output folder): equal
// records, equal output.
nlohmann::ordered_json options_record(const PrepareOptions& options,
                                      const TokenizerFacts& tokenizer);

struct FinishedShard {
  std::string file;  // "train-00003.tokens"
  uint64_t documents = 0, tokens = 0;
  std::string last_document;                              // its last document's name
  std::vector<uint64_t> source_documents, source_tokens;  // per source
};

struct ResumeState {
  std::vector<FinishedShard> shards[3];  // per split, in order
  uint64_t documents[3] = {0, 0, 0};     // documents those shards hold, per split
  bool manifest_complete = false;        // manifest.json there with these options
};

// Cleans and reads `options.out` as described above (creating it). Throws Error for a folder
// prepared with other options or another tokenizer, or a damaged finished shard.
ResumeState scan_output_folder(const PrepareOptions& options, const nlohmann::ordered_json& record);

// "16-digit hex" of a 64-bit hash.
std::string hex64(uint64_t value);

}  // namespace patchbay::data
