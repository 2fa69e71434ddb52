// The output folder of a preparation before it starts: clean-up, checks, resume counts; see
// prepare_state.hpp.
#include "data/prepare_state.hpp"

#include <cstdio>
#include <fstream>

#include "common/error.hpp"
#include "data/shard_writer.hpp"
#include "data/token_cache.hpp"

namespace patchbay::data {
namespace fs = std::filesystem;

namespace {

nlohmann::ordered_json read_json(const fs::path& file) {
  std::ifstream in(file);
  try {
    return nlohmann::ordered_json::parse(in);
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kInvalidArgument,
                "'" + file.string() + "' is not valid JSON (" + e.what() +
                    "); remove the folder's files or prepare into another "
                    "--out");
  }
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_ours(const std::string& name) {
  for (const char* split : kSplitNames)
    if (name.rfind(std::string(split) + "-", 0) == 0) return true;
  return name.rfind("manifest.json", 0) == 0;
}

// Refuses a folder made with other options, naming the tokenizer hashes when they differ.
void check_same_options(const nlohmann::ordered_json& found, const nlohmann::ordered_json& wanted,
                        const fs::path& where) {
  if (found == wanted) return;
  const auto hash_of = [](const nlohmann::ordered_json& r) {
    return r.contains("tokenizer") ? r["tokenizer"].value("hash", std::string("?"))
                                   : std::string("?");
  };
  if (hash_of(found) != hash_of(wanted))
    throw Error(ErrorKind::kInvalidArgument,
                "'" + where.string() + "' was prepared with tokenizer " + hash_of(found) + " (" +
                    found["tokenizer"].value("kind", std::string("?")) +
                    "), but this run's tokenizer is " + hash_of(wanted) + " (" +
                    wanted["tokenizer"].value("kind", std::string("?")) +
                    "): shards of two tokenizers never mix. Prepare into another --out, or add "
                    "--overwrite to replace them");
  std::string keys;
  for (const auto& [key, value] : wanted.items())
    if (!found.contains(key) || found[key] != value) keys += (keys.empty() ? "" : ", ") + key;
  throw Error(ErrorKind::kInvalidArgument,
              "'" + where.string() + "' was prepared with other options (" + keys +
                  " differ): a resumed preparation must use the same sources and options. Run the "
                  "same command as before, prepare into another --out, or add --overwrite");
}

}  // namespace

std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

nlohmann::ordered_json options_record(const PrepareOptions& o, const TokenizerFacts& t) {
  nlohmann::ordered_json sources = nlohmann::ordered_json::array();
  for (const SourceSpec& s : o.sources)
    sources.push_back({{"path", s.path.string()},
                       {"include", s.include},
                       {"exclude", s.exclude},
                       {"jsonl_field", s.jsonl_field}});
  return {{"tokenizer",
           {{"kind", t.kind},
            {"hash", hex64(t.hash)},
            {"vocab_size", t.vocab_size},
            {"eot_token", o.eot_token},
            {"eot_id", t.eot_id}}},
          {"sources", sources},
          {"shard_bytes", o.shard_bytes},
          {"val_fraction", o.val_fraction},
          {"test_fraction", o.test_fraction},
          {"seed", o.seed},
          {"dedup", o.dedup_exact ? "exact" : "none"},
          {"skip_bad", o.skip_bad},
          {"block_bytes", o.block_bytes},
          {"piece_bytes", o.piece_bytes}};
}

ResumeState scan_output_folder(const PrepareOptions& options,
                               const nlohmann::ordered_json& record) {
  std::error_code ec;
  fs::create_directories(options.out, ec);
  if (ec)
    throw Error(ErrorKind::kIo, "cannot create '" + options.out.string() + "': " + ec.message());
  // Unfinished files of an interrupted run (and, with --overwrite, everything we made).
  for (const fs::directory_entry& entry : fs::directory_iterator(options.out)) {
    const std::string name = entry.path().filename().string();
    const bool unfinished = ends_with(name, ".partial") || name.find(".tmp-") != std::string::npos;
    if (is_ours(name) && (unfinished || options.overwrite)) fs::remove(entry.path());
  }
  ResumeState state;
  const fs::path manifest = options.out / "manifest.json";
  if (fs::exists(manifest)) {
    const nlohmann::ordered_json m = read_json(manifest);
    check_same_options(m.value("options", nlohmann::ordered_json::object()), record, manifest);
    state.manifest_complete = m.value("complete", false);
  }
  for (int split = 0; split < 3; ++split) {
    uint64_t shard = 0;
    for (;; ++shard) {
      const fs::path tokens = options.out / shard_file_name(split, shard);
      if (!fs::exists(tokens)) break;
      const nlohmann::ordered_json d = read_json(ShardWriter::description_file(tokens));
      check_same_options(d.value("options", nlohmann::ordered_json::object()), record, tokens);
      FinishedShard f;
      f.file = tokens.filename().string();
      try {
        f.documents = d.at("documents").get<uint64_t>();
        f.tokens = d.at("tokens").get<uint64_t>();
        f.last_document = d.at("last_document").get<std::string>();
        for (const auto& s : d.at("sources")) {
          f.source_documents.push_back(s.at("documents").get<uint64_t>());
          f.source_tokens.push_back(s.at("tokens").get<uint64_t>());
        }
      } catch (const nlohmann::json::exception& e) {
        throw Error(ErrorKind::kInvalidArgument,
                    "'" + ShardWriter::description_file(tokens).string() +
                        "' is not a shard description (" + e.what() +
                        "): delete it and its shard, then run the preparation again (it resumes)");
      }
      const TokenCache cache = TokenCache::open(tokens);  // checks its header and length
      const std::vector<uint64_t> offsets = read_document_index(ShardWriter::index_file(tokens));
      if (cache.size() != f.tokens || offsets.size() != f.documents + 1 ||
          offsets.back() != f.tokens)
        throw Error(ErrorKind::kInvalidArgument,
                    "shard '" + tokens.string() + "' disagrees with its description or index (" +
                        std::to_string(cache.size()) + " tokens, " +
                        std::to_string(offsets.size() - 1) + " indexed documents; described: " +
                        std::to_string(f.tokens) + ", " + std::to_string(f.documents) +
                        "). Remove it and its .idx/.json files and run "
                        "the command again (it is prepared anew)");
      state.documents[split] += f.documents;
      state.shards[split].push_back(std::move(f));
    }
    // A shard after a gap cannot be trusted to follow its predecessors: prepared again.
    for (const fs::directory_entry& entry : fs::directory_iterator(options.out)) {
      const std::string name = entry.path().filename().string();
      const std::string prefix = std::string(kSplitNames[split]) + "-";
      if (name.rfind(prefix, 0) != 0 || name.size() < prefix.size() + 5) continue;
      const uint64_t number = std::strtoull(name.c_str() + prefix.size(), nullptr, 10);
      if (number >= shard) fs::remove(entry.path());
    }
  }
  return state;
}

}  // namespace patchbay::data
