// The streaming preparation pipeline; see prepare.hpp.
#include "data/prepare.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <thread>
#include <unordered_set>

#include "common/error.hpp"
#include "data/document_reader.hpp"
#include "data/prepare_state.hpp"
#include "data/shard_writer.hpp"
#include "data/split.hpp"
#include "data/tokenizer_io.hpp"
#include "run/atomic_file.hpp"

namespace patchbay::data {
namespace fs = std::filesystem;

int document_split(const std::string& name, double val_fraction, double test_fraction,
                   uint64_t seed) {
  const long double h = static_cast<long double>(splitmix64(fnv1a64(name) ^ seed));
  if (h < std::ldexp(static_cast<long double>(val_fraction), 64)) return 1;
  if (h < std::ldexp(static_cast<long double>(val_fraction + test_fraction), 64)) return 2;
  return 0;
}

std::string shard_file_name(int split, uint64_t shard) {
  char name[64];
  std::snprintf(name, sizeof name, "%s-%05llu.tokens", kSplitNames[split],
                static_cast<unsigned long long>(shard));
  return name;
}

namespace {

enum class Fate { kWrite, kResumed, kDropped };

struct Chunk {
  uint64_t id = 0;
  std::vector<DocumentPiece> pieces;
  std::vector<std::string> errors;  // per piece: why a JSON line is bad ("" when fine)
  std::vector<Fate> fate;
  std::vector<int> split;
  std::vector<std::vector<int32_t>> ids;
  uint64_t bytes_read = 0;  // the reader's position after this chunk
};

struct Aborted {};  // another worker failed: stop quietly

struct PairHash {
  size_t operator()(const std::pair<uint64_t, uint64_t>& h) const {
    return h.first ^ (h.second * 31);
  }
};

// Extracts the named string field of a JSON line into piece.text, or says what is wrong.
std::string extract_json_field(DocumentPiece& piece, const std::string& field) {
  const nlohmann::json value = nlohmann::json::parse(piece.text, nullptr, false);
  if (value.is_discarded()) return "not valid JSON";
  if (!value.is_object()) return "not a JSON object (found " + std::string(value.type_name()) + ")";
  const auto it = value.find(field);
  if (it == value.end()) {
    std::string keys;
    for (const auto& [key, v] : value.items()) keys += (keys.empty() ? "" : ", ") + key;
    return "has no field \"" + field + "\" (its fields: " + (keys.empty() ? "none" : keys) + ")";
  }
  if (!it->is_string())
    return "field \"" + field + "\" is " + std::string(it->type_name()) + ", not a string";
  piece.text = it->get<std::string>();
  piece.json = false;
  return "";
}

class Pipeline {
 public:
  Pipeline(const PrepareOptions& o, const PrepareTokenizer& t, const TokenizerFacts& facts,
           const nlohmann::ordered_json& record, const ResumeState& resume,
           std::vector<SourceFile> files)
      : o_(o),
        tokenizer_(*t.tokenizer),
        facts_(facts),
        record_(record),
        resume_(resume),
        reader_(std::move(files), ReaderOptions{o.piece_bytes, o.block_bytes, o.dedup_exact}),
        sources_(o.sources.size()) {
    for (size_t s = 0; s < o.sources.size(); ++s) sources_[s].path = o.sources[s].path.string();
    for (const SourceFile& f : reader_.files()) {
      ++sources_[f.source].files;
      total_bytes_ += f.bytes;
    }
    for (int split = 0; split < 3; ++split) {
      uint64_t ordinal = 0;
      for (const FinishedShard& shard : resume.shards[split]) {
        ordinal += shard.documents;
        last_names_[split][ordinal - 1] = shard.last_document;
        for (size_t s = 0; s < shard.source_tokens.size() && s < sources_.size(); ++s)
          sources_[s].tokens += shard.source_tokens[s];
        splits_[split].tokens += shard.tokens;
        shards_[split].push_back(
            {shard.file, shard.documents, shard.tokens, shard.last_document, {}, {}});
      }
      next_shard_[split] = resume.shards[split].size();
      first_document_[split] = resume.documents[split];
    }
  }

  void run(int threads, const std::function<void(const PrepareProgress&)>& progress) {
    progress_ = progress;
    std::vector<std::thread> workers;
    for (int i = 0; i < threads; ++i) workers.emplace_back([this] { work(); });
    for (std::thread& w : workers) w.join();
    if (error_) std::rethrow_exception(error_);
    for (int split = 0; split < 3; ++split)
      if (writers_[split]) finish_shard(split);
  }

  const std::vector<SourceReport>& sources() const { return sources_; }
  const std::vector<FinishedShard>& shards(int split) const { return shards_[split]; }
  uint64_t total_bytes() const { return total_bytes_; }
  uint64_t split_bytes(int split) const { return split_bytes_[split]; }

 private:
  void work() {
    try {
      for (;;) {
        Chunk chunk;
        {
          std::lock_guard<std::mutex> lock(read_mutex_);
          if (failed_ || !reader_.next_chunk(chunk.pieces, o_.chunk_bytes)) return;
          chunk.id = next_chunk_++;
          chunk.bytes_read = reader_.bytes_read();
        }
        parse_and_hash(chunk);
        in_turn(decide_turn_, chunk.id, [&] { decide(chunk); });
        encode(chunk);
        in_turn(write_turn_, chunk.id, [&] { write(chunk); });
      }
    } catch (const Aborted&) {
    } catch (...) {
      std::lock_guard<std::mutex> lock(turn_mutex_);
      if (!error_) error_ = std::current_exception();
      failed_ = true;
      turn_cv_.notify_all();
    }
  }

  // Runs f when `turn` reaches `id` (chunks in input order), then passes the turn on.
  template <typename F>
  void in_turn(uint64_t& turn, uint64_t id, F&& f) {
    {
      std::unique_lock<std::mutex> lock(turn_mutex_);
      turn_cv_.wait(lock, [&] { return turn == id || failed_; });
      if (failed_) throw Aborted{};
    }
    f();  // only one chunk is in this turn at a time
    std::lock_guard<std::mutex> lock(turn_mutex_);
    ++turn;
    turn_cv_.notify_all();
  }

  void parse_and_hash(Chunk& c) {
    c.errors.assign(c.pieces.size(), "");
    for (size_t i = 0; i < c.pieces.size(); ++i) {
      DocumentPiece& p = c.pieces[i];
      if (p.json)
        c.errors[i] = extract_json_field(p, o_.sources[reader_.files()[p.file].source].jsonl_field);
      if (o_.dedup_exact && p.first && !p.hash_known && c.errors[i].empty())
        p.hash = content_hash(p.text);
    }
  }

  void decide(Chunk& c) {
    c.fate.assign(c.pieces.size(), Fate::kDropped);
    c.split.assign(c.pieces.size(), 0);
    for (size_t i = 0; i < c.pieces.size(); ++i) {
      const DocumentPiece& p = c.pieces[i];
      SourceReport& source = sources_[reader_.files()[p.file].source];
      if (p.first) decide_document(p, c.errors[i], source);
      c.fate[i] = fate_;
      c.split[i] = split_;
      if (fate_ == Fate::kDropped) continue;
      source.bytes += p.text.size();
      split_bytes_[split_] += p.text.size();
    }
  }

  void decide_document(const DocumentPiece& p, const std::string& error, SourceReport& source) {
    fate_ = Fate::kDropped;
    if (!error.empty()) {
      if (!o_.skip_bad)
        throw Error(ErrorKind::kInvalidArgument,
                    reader_.files()[p.file].path.string() + ":" + std::to_string(p.line) + ": " +
                        error +
                        ". Fix the line, or add --skip-bad to skip such lines (they are counted)");
      ++source.bad;
      return;
    }
    if (p.first && p.last && p.text.empty()) {
      ++source.empty;
      return;
    }
    if (o_.dedup_exact && !seen_.insert(p.hash).second) {
      ++source.duplicates;
      return;
    }
    const std::string name = reader_.document_name(p);
    split_ = document_split(name, o_.val_fraction, o_.test_fraction, o_.seed);
    const uint64_t ordinal = kept_[split_]++;
    ++source.documents;
    if (ordinal >= resume_.documents[split_]) {
      fate_ = Fate::kWrite;
      return;
    }
    fate_ = Fate::kResumed;
    const auto expected = last_names_[split_].find(ordinal);
    if (expected != last_names_[split_].end() && expected->second != name)
      throw Error(ErrorKind::kInvalidArgument,
                  "the sources changed since the interrupted preparation in '" + o_.out.string() +
                      "': " + std::string(kSplitNames[split_]) + " document " +
                      std::to_string(ordinal) + " was '" + expected->second + "' and is now '" +
                      name + "'. Prepare into another --out, or add --overwrite to start again");
  }

  void encode(Chunk& c) {
    c.ids.resize(c.pieces.size());
    for (size_t i = 0; i < c.pieces.size(); ++i)
      if (c.fate[i] == Fate::kWrite) c.ids[i] = tokenizer_.encode(c.pieces[i].text, false);
  }

  void write(Chunk& c) {
    for (size_t i = 0; i < c.pieces.size(); ++i) {
      if (c.fate[i] != Fate::kWrite) continue;
      const DocumentPiece& p = c.pieces[i];
      const int split = c.split[i];
      const size_t source = reader_.files()[p.file].source;
      if (!writers_[split]) open_shard(split);
      ShardWriter& w = *writers_[split];
      w.append(c.ids[i]);
      shard_tokens_[split][source] += c.ids[i].size();
      sources_[source].tokens += c.ids[i].size();
      if (!p.last) continue;
      const int32_t eot = facts_.eot_id;
      w.append(std::span<const int32_t>(&eot, 1));
      w.end_document();
      ++shard_tokens_[split][source];
      ++sources_[source].tokens;
      ++shard_documents_[split][source];
      last_name_[split] = reader_.document_name(p);
      if (w.bytes() >= o_.shard_bytes) finish_shard(split);
    }
    tokens_written_ = 0;
    for (int s = 0; s < 3; ++s)
      tokens_written_ += splits_[s].tokens + (writers_[s] ? writers_[s]->tokens() : 0);
    if (progress_) progress_({c.bytes_read, total_bytes_, tokens_written_});
  }

  void open_shard(int split) {
    TokenCacheInfo header;
    header.vocab_size = static_cast<uint64_t>(facts_.vocab_size);
    header.tokenizer_hash = facts_.hash;
    header.tokenizer_kind = facts_.kind;
    writers_[split] =
        std::make_unique<ShardWriter>(o_.out / shard_file_name(split, next_shard_[split]), header);
    shard_tokens_[split].assign(sources_.size(), 0);
    shard_documents_[split].assign(sources_.size(), 0);
  }

  void finish_shard(int split) {
    ShardWriter& w = *writers_[split];
    nlohmann::ordered_json per_source = nlohmann::ordered_json::array();
    for (size_t s = 0; s < sources_.size(); ++s)
      per_source.push_back(
          {{"documents", shard_documents_[split][s]}, {"tokens", shard_tokens_[split][s]}});
    const nlohmann::ordered_json description = {{"options", record_},
                                                {"split", kSplitNames[split]},
                                                {"shard", next_shard_[split]},
                                                {"first_document", first_document_[split]},
                                                {"documents", w.documents()},
                                                {"tokens", w.tokens()},
                                                {"last_document", last_name_[split]},
                                                {"sources", per_source}};
    w.finish(description.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    shards_[split].push_back({shard_file_name(split, next_shard_[split]),
                              w.documents(),
                              w.tokens(),
                              last_name_[split],
                              {},
                              {}});
    splits_[split].tokens += w.tokens();
    first_document_[split] += w.documents();
    ++next_shard_[split];
    writers_[split].reset();
  }

  const PrepareOptions& o_;
  const runtime::TokenizerHandle& tokenizer_;
  const TokenizerFacts& facts_;
  const nlohmann::ordered_json& record_;
  const ResumeState& resume_;
  DocumentReader reader_;
  std::vector<SourceReport> sources_;
  uint64_t total_bytes_ = 0;
  std::function<void(const PrepareProgress&)> progress_;

  std::mutex read_mutex_;
  uint64_t next_chunk_ = 0;
  std::mutex turn_mutex_;
  std::condition_variable turn_cv_;
  uint64_t decide_turn_ = 0, write_turn_ = 0;
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;

  // decide turn only
  std::unordered_set<std::pair<uint64_t, uint64_t>, PairHash> seen_;  // ~40 bytes a document
  uint64_t kept_[3] = {0, 0, 0};
  uint64_t split_bytes_[3] = {0, 0, 0};  // text bytes of the kept documents
  std::map<uint64_t, std::string> last_names_[3];  // resumed shards' last documents by ordinal
  Fate fate_ = Fate::kDropped;
  int split_ = 0;

  // write turn only
  std::unique_ptr<ShardWriter> writers_[3];
  std::vector<uint64_t> shard_tokens_[3], shard_documents_[3];
  std::string last_name_[3];
  uint64_t next_shard_[3] = {0, 0, 0};
  uint64_t first_document_[3] = {0, 0, 0};
  std::vector<FinishedShard> shards_[3];
  SplitReport splits_[3];
  uint64_t tokens_written_ = 0;
};

TokenizerFacts tokenizer_facts(const PrepareOptions& o, const PrepareTokenizer& t) {
  if (t.tokenizer == nullptr) throw Error(ErrorKind::kInternal, "prepare_dataset: no tokenizer");
  TokenizerFacts facts;
  facts.kind = t.kind;
  facts.file = fs::absolute(t.file).lexically_normal().string();
  facts.hash = fnv1a64(read_text_file(t.file));
  facts.vocab_size = t.tokenizer->vocab_size();
  std::string listed;
  for (const runtime::SpecialTokenInfo& s : t.tokenizer->special_tokens()) {
    listed += (listed.empty() ? "\"" : ", \"") + s.text + "\"";
    if (s.text == o.eot_token) facts.eot_id = s.id;
  }
  if (facts.eot_id < 0)
    throw Error(
        ErrorKind::kInvalidArgument,
        "the tokenizer '" + t.file.string() + "' has no special token \"" + o.eot_token +
            "\" to end each document with (its special tokens: " +
            (listed.empty() ? "none" : listed) +
            "). Name one of them with --eot, or train a tokenizer whose special_tokens list it");
  return facts;
}

void check_options(const PrepareOptions& o) {
  if (o.sources.empty()) throw Error(ErrorKind::kInvalidArgument, "no --source given");
  if (!(o.val_fraction >= 0 && o.test_fraction >= 0 && o.val_fraction + o.test_fraction < 1))
    throw Error(ErrorKind::kInvalidArgument,
                "--val-fraction and --test-fraction must be >= 0 and add up to less than 1 (got " +
                    std::to_string(o.val_fraction) + " and " + std::to_string(o.test_fraction) +
                    ")");
  if (o.shard_bytes < 1024)
    throw Error(ErrorKind::kInvalidArgument, "the shard size must be at least 1 KiB");
  if (o.piece_bytes < 4096)
    throw Error(ErrorKind::kInvalidArgument, "the piece size must be at least 4 KiB");
}

}  // namespace

PrepareReport prepare_dataset(const PrepareOptions& o, const PrepareTokenizer& t,
                              const std::function<void(const PrepareProgress&)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  check_options(o);
  const TokenizerFacts facts = tokenizer_facts(o, t);
  const nlohmann::ordered_json record = options_record(o, facts);
  std::vector<SourceFile> files = list_source_files(o.sources);
  const ResumeState resume = scan_output_folder(o, record);
  PrepareReport report;
  report.manifest = o.out / "manifest.json";
  report.bytes_per_id = facts.vocab_size <= 65536 ? 2 : 4;
  if (resume.manifest_complete) {
    report.already_complete = true;
    return report;
  }
  for (const auto& shards : resume.shards) report.resumed_shards += shards.size();
  Pipeline pipeline(o, t, facts, record, resume, std::move(files));
  const int threads = o.threads > 0
                          ? o.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  pipeline.run(threads, progress);

  report.sources = pipeline.sources();
  report.input_bytes = pipeline.total_bytes();
  nlohmann::ordered_json sources = nlohmann::ordered_json::array();
  for (const SourceReport& s : report.sources)
    sources.push_back({{"path", s.path},
                       {"files", s.files},
                       {"bytes", s.bytes},
                       {"documents", s.documents},
                       {"tokens", s.tokens},
                       {"duplicates", s.duplicates},
                       {"empty", s.empty},
                       {"bad_lines", s.bad}});
  nlohmann::ordered_json splits = nlohmann::ordered_json::object();
  uint64_t documents = 0;
  for (int split = 0; split < 3; ++split) {
    SplitReport r{kSplitNames[split], 0, 0, 0};
    nlohmann::ordered_json shards = nlohmann::ordered_json::array();
    for (const FinishedShard& s : pipeline.shards(split)) {
      r.documents += s.documents;
      r.tokens += s.tokens;
      ++r.shards;
      shards.push_back({{"file", s.file},
                        {"index", ShardWriter::index_file(s.file).string()},
                        {"documents", s.documents},
                        {"tokens", s.tokens}});
    }
    documents += r.documents;
    splits[kSplitNames[split]] = {
        {"documents", r.documents}, {"tokens", r.tokens}, {"shards", shards}};
    report.splits.push_back(r);
  }
  if (documents == 0)
    throw Error(ErrorKind::kInvalidArgument,
                "the sources hold no document to prepare (every one was empty, "
                "a duplicate or a skipped bad line)");
  const nlohmann::ordered_json manifest = {
      {"format", "patchbay-token-shards"},
      {"version", 1},
      {"complete", true},
      {"tokenizer",
       {{"kind", facts.kind},
        {"file", facts.file},
        {"hash", hex64(facts.hash)},
        {"vocab_size", facts.vocab_size},
        {"eot_token", o.eot_token},
        {"eot_id", facts.eot_id}}},
      {"dtype", report.bytes_per_id == 2 ? "uint16" : "uint32"},
      {"document_rule", o.block_bytes > 0
                            ? "text files: blocks of about block_bytes ending at a newline; "
                              "JSON Lines: one per line"
                            : "text files: one per file; JSON Lines: one per line"},
      {"split_rule",
       "h = splitmix64(fnv1a64(document name) ^ seed); val when h < val_fraction * 2^64, "
       "test when h < (val_fraction + test_fraction) * 2^64, else train"},
      {"options", record},
      {"sources", sources},
      {"splits", splits}};
  run::write_text_atomically(
      report.manifest,
      manifest.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace patchbay::data
