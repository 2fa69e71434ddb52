// Opening a prepared dataset for training; see prepared_dataset.hpp.
#include "data/prepared_dataset.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/parse_number.hpp"
#include "data/prepare.hpp"

namespace patchbay::data {
namespace fs = std::filesystem;

namespace {

// The manifest's fields (format and completeness already checked). nlohmann's checked
// accessors throw json::exception on a missing or mistyped field; the caller names the file.
PreparedDataset read_manifest_fields(const nlohmann::json& m, const fs::path& folder,
                                     const fs::path& manifest_file) {
  PreparedDataset d;
  d.folder = folder;
  const nlohmann::json& t = m.at("tokenizer");
  d.tokenizer_kind = t.at("kind").get<std::string>();
  d.tokenizer_file = t.at("file").get<std::string>();
  const std::string hash_text = t.at("hash").get<std::string>();
  const std::optional<uint64_t> hash = parse_uint64(hash_text, 16);
  if (!hash)
    throw Error(ErrorKind::kInvalidArgument,
                "'" + manifest_file.string() + "': tokenizer.hash is '" + hash_text.substr(0, 40) +
                    "', expected 16 hex digits; prepare the data again");
  d.tokenizer_hash = *hash;
  d.vocab_size = t.at("vocab_size").get<int64_t>();
  d.eot_id = t.at("eot_id").get<int32_t>();
  for (int split = 0; split < 3; ++split) {
    const nlohmann::json& s = m.at("splits").at(kSplitNames[split]);
    d.tokens[split] = s.at("tokens").get<uint64_t>();
    d.bytes[split] = s.value("bytes", uint64_t{0});
    for (const nlohmann::json& shard : s.at("shards"))
      d.shards[split].push_back(folder / shard.at("file").get<std::string>());
  }
  return d;
}

}  // namespace

PreparedDataset open_prepared_dataset(const fs::path& folder) {
  const fs::path manifest_file = folder / "manifest.json";
  if (!fs::is_regular_file(manifest_file))
    throw Error(ErrorKind::kNotFound,
                "'" + folder.string() +
                    "' holds no manifest.json: it is not a prepared dataset. Make one "
                    "with `patchbay data prepare --source PATH --tokenizer FILE --out " +
                    folder.string() + "`");
  nlohmann::json m;
  try {
    std::ifstream in(manifest_file);
    m = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kInvalidArgument,
                "'" + manifest_file.string() + "' is not valid JSON: " + e.what());
  }
  if (m.value("format", std::string()) != "patchbay-token-shards" || m.value("version", 0) != 1)
    throw Error(ErrorKind::kInvalidArgument,
                "'" + manifest_file.string() +
                    "' is not a token-shard manifest of version 1 (format " +
                    m.value("format", std::string("?")) + ")");
  if (!m.value("complete", false))
    throw Error(ErrorKind::kInvalidArgument,
                "the preparation of '" + folder.string() +
                    "' did not finish: run the same `patchbay data prepare` "
                    "command again (it resumes)");
  try {
    return read_manifest_fields(m, folder, manifest_file);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::kInvalidArgument,
                "'" + manifest_file.string() +
                    "' lacks a field a token-shard manifest has, or holds " +
                    "one of the wrong type (" + e.what() +
                    "); it was edited or written by something else: prepare the data again");
  }
}

TokenSequence open_split(const PreparedDataset& dataset, int split, bool with_documents) {
  return TokenSequence::open(dataset.shards[split], dataset.tokenizer_hash, with_documents);
}

}  // namespace patchbay::data
