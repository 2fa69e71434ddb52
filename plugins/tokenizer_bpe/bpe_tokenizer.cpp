// BpeTokenizer: training driver, cached and parallel encode, decode, save/load.
#include "bpe_tokenizer.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "patchbay/component.hpp"
#include "patchbay/files.hpp"
#include "patchbay/special_tokens.hpp"

namespace patchbay_bpe {
namespace {

constexpr const char* kFileMagic = "patchbay-bpe";
constexpr int kFileVersion = 1;
// A per-call cache of piece -> ids stops growing past this many distinct pieces (it is
// cleared and refilled); KJV has ~30k distinct pieces, so one fill covers it.
constexpr size_t kPieceCacheLimit = 1u << 18;

void validate_specials(const std::vector<std::string>& specials) {
  for (size_t i = 0; i < specials.size(); ++i) {
    if (specials[i].empty())
      throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                  "special token " + std::to_string(i) + " is empty");
    for (size_t j = 0; j < i; ++j) {
      if (specials[i] == specials[j]) {
        throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                    "special token '" + specials[i] + "' is listed twice");
      }
    }
  }
}

bool has_published_files(const BpeOptions& options) {
  return !options.vocab_file.empty() || !options.merges_file.empty() ||
         !options.tokenizer_json.empty();
}

}  // namespace

BpeTokenizer::BpeTokenizer(BpeOptions options)
    : options_(std::move(options)), pretokenizer_(std::make_shared<Gpt2PreTokenizer>()) {
  validate_specials(options_.special_tokens);
  specials_ = options_.special_tokens;
  if (has_published_files(options_)) {
    if (!options_.tokenizer_json.empty() &&
        (!options_.vocab_file.empty() || !options_.merges_file.empty())) {
      throw patchbay::PluginError(
          PB_STATUS_INVALID_ARGUMENT,
          "give either tokenizer_json or vocab_file + merges_file, not both");
    }
    if (options_.tokenizer_json.empty() &&
        (options_.vocab_file.empty() || options_.merges_file.empty())) {
      throw patchbay::PluginError(
          PB_STATUS_INVALID_ARGUMENT,
          "vocab_file (GPT-2 encoder.json) and merges_file (vocab.bpe) go together; "
          "only " +
              std::string(options_.vocab_file.empty() ? "merges_file" : "vocab_file") + " is set");
    }
    use_published(options_.tokenizer_json.empty()
                      ? load_gpt2_vocabulary(options_.vocab_file, options_.merges_file,
                                             options_.special_tokens)
                      : load_hf_tokenizer_json(options_.tokenizer_json));
    return;
  }
  const auto floor = static_cast<int64_t>(256 + specials_.size());
  if (options_.vocab_size < floor) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "vocab_size " + std::to_string(options_.vocab_size) +
                                    " is below 256 bytes + " + std::to_string(specials_.size()) +
                                    " special tokens = " + std::to_string(floor));
  }
}

TrainReport BpeTokenizer::train(std::string_view text) {
  if (has_published_files(options_)) {
    throw patchbay::PluginError(
        PB_STATUS_UNSUPPORTED,
        "this BPE tokenizer uses the published vocabulary of " + published_source_ +
            "; training would replace it (remove vocab_file/merges_file/tokenizer_json "
            "from [tokenizer] to train one)");
  }
  std::unordered_map<std::string_view, int64_t> piece_counts;
  for (const patchbay::TextSegment& segment : patchbay::split_at_special_tokens(text, specials_)) {
    if (segment.special_index >= 0) continue;
    pretokenizer_->split(segment.text, [&](std::string_view piece) { ++piece_counts[piece]; });
  }
  std::vector<WordCount> words;
  words.reserve(piece_counts.size());
  for (const auto& [piece, count] : piece_counts) {
    words.push_back(WordCount{std::string(piece), count});
  }
  // Word order only affects performance (the heap breaks ties by pair), but sorting keeps
  // every internal index list deterministic too.
  std::sort(words.begin(), words.end(),
            [](const WordCount& a, const WordCount& b) { return a.bytes < b.bytes; });
  const size_t max_merges = static_cast<size_t>(options_.vocab_size) - 256 - specials_.size();
  merges_ = learn_merges(words, max_merges);
  specials_ = options_.special_tokens;
  rebuild_from_merges();
  TrainReport report;
  report.requested_vocab_size = options_.vocab_size;
  report.reached_vocab_size = vocab_size();
  report.merges = merges_.size();
  report.distinct_pretokens = words.size();
  return report;
}

void BpeTokenizer::rebuild_from_merges() {
  token_bytes_.clear();
  token_bytes_.reserve(256 + merges_.size() + specials_.size());
  for (int b = 0; b < 256; ++b) token_bytes_.push_back(std::string(1, static_cast<char>(b)));
  ranks_.clear();
  ranks_.set_identity_byte_ids();
  ranks_.reserve(merges_.size());
  merge_results_.clear();
  for (size_t r = 0; r < merges_.size(); ++r) {
    const Merge& m = merges_[r];
    const auto next_id = static_cast<int32_t>(256 + r);
    if (m.left < 0 || m.right < 0 || m.left >= next_id || m.right >= next_id) {
      throw patchbay::PluginError(
          PB_STATUS_INVALID_ARGUMENT,
          "merge " + std::to_string(r) + " uses an id not defined before it");
    }
    token_bytes_.push_back(token_bytes_[static_cast<size_t>(m.left)] +
                           token_bytes_[static_cast<size_t>(m.right)]);
    ranks_.insert(pack_pair(static_cast<uint32_t>(m.left), static_cast<uint32_t>(m.right)),
                  static_cast<uint32_t>(r));
    merge_results_.push_back(next_id);
  }
  special_ids_.clear();
  for (const std::string& special : specials_) {
    special_ids_.push_back(static_cast<int32_t>(token_bytes_.size()));
    token_bytes_.push_back(special);
  }
  published_ = false;
  pattern_pretokenizer_ = nullptr;
  whole_token_ids_.clear();
  dropped_bytes_.fill(false);
  drops_bytes_ = false;
  published_source_.clear();
  trained_ = true;
}

void BpeTokenizer::use_published(const PublishedVocabulary& vocab) {
  validate_published_vocabulary(vocab);
  std::vector<std::string> specials;
  std::vector<int32_t> special_ids;
  for (const PublishedSpecial& s : vocab.specials) {
    specials.push_back(s.text);
    special_ids.push_back(s.id);
  }
  validate_specials(specials);
  PairRankTable ranks;
  int32_t byte_ids[256];
  for (int b = 0; b < 256; ++b) byte_ids[b] = vocab.byte_ids[static_cast<size_t>(b)];
  ranks.set_byte_ids(byte_ids);
  ranks.reserve(vocab.merges.size());
  std::vector<Merge> merges;
  std::vector<int32_t> results;
  merges.reserve(vocab.merges.size());
  results.reserve(vocab.merges.size());
  for (size_t r = 0; r < vocab.merges.size(); ++r) {
    const PublishedMerge& m = vocab.merges[r];
    // A later duplicate pair overwrites the earlier rank, as GPT-2's and HF's dicts do.
    ranks.insert(pack_pair(static_cast<uint32_t>(m.left), static_cast<uint32_t>(m.right)),
                 static_cast<uint32_t>(r), m.result);
    merges.push_back(Merge{m.left, m.right});
    results.push_back(m.result);
  }
  merges_ = std::move(merges);
  merge_results_ = std::move(results);
  specials_ = std::move(specials);
  special_ids_ = std::move(special_ids);
  token_bytes_ = vocab.token_bytes;
  ranks_ = std::move(ranks);
  drops_bytes_ = false;
  for (int b = 0; b < 256; ++b) {
    dropped_bytes_[static_cast<size_t>(b)] = vocab.byte_ids[static_cast<size_t>(b)] < 0;
    drops_bytes_ = drops_bytes_ || dropped_bytes_[static_cast<size_t>(b)];
  }
  whole_token_ids_.clear();
  if (vocab.ignore_merges) {
    std::vector<char> special(token_bytes_.size(), 0);
    for (int32_t id : special_ids_) special[static_cast<size_t>(id)] = 1;
    for (size_t id = 0; id < token_bytes_.size(); ++id)
      if (special[id] == 0) whole_token_ids_.emplace(token_bytes_[id], static_cast<int32_t>(id));
  }
  pattern_pretokenizer_ =
      vocab.pretokenizer_patterns.empty()
          ? nullptr
          : std::make_shared<const PatternPreTokenizer>(vocab.pretokenizer_patterns);
  published_ = true;
  published_source_ = vocab.source;
  trained_ = true;
}

PublishedVocabulary BpeTokenizer::published_vocabulary() const {
  if (!trained_)
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "BPE tokenizer has no vocabulary: train or load it first");
  PublishedVocabulary vocab;
  vocab.token_bytes = token_bytes_;
  for (int b = 0; b < 256; ++b)
    vocab.byte_ids[static_cast<size_t>(b)] = ranks_.byte_id(static_cast<unsigned char>(b));
  vocab.merges.reserve(merges_.size());
  for (size_t r = 0; r < merges_.size(); ++r) {
    vocab.merges.push_back(PublishedMerge{merges_[r].left, merges_[r].right, merge_results_[r]});
  }
  for (size_t i = 0; i < specials_.size(); ++i)
    vocab.specials.push_back(PublishedSpecial{specials_[i], special_ids_[i]});
  vocab.source = published_ ? published_source_ : std::string("Patchbay-trained BPE vocabulary");
  if (pattern_pretokenizer_) vocab.pretokenizer_patterns = pattern_pretokenizer_->patterns();
  vocab.ignore_merges = !whole_token_ids_.empty();
  return vocab;
}

int64_t BpeTokenizer::vocab_size() const {
  return trained_ ? static_cast<int64_t>(token_bytes_.size()) : 0;
}

int32_t BpeTokenizer::special_token_id(size_t index) const {
  if (index >= specials_.size())
    throw patchbay::PluginError(PB_STATUS_OUT_OF_RANGE, "special token index out of range");
  return special_ids_[index];
}

const std::string& BpeTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= token_bytes_.size()) {
    throw patchbay::PluginError(PB_STATUS_OUT_OF_RANGE,
                                "token id " + std::to_string(id) + " outside [0, " +
                                    std::to_string(token_bytes_.size()) + ")");
  }
  return token_bytes_[static_cast<size_t>(id)];
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool allow_special) const {
  const int threads = options_.encode_threads > 0
                          ? options_.encode_threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return encode_with(text, allow_special, threads, options_.min_chunk_bytes);
}

std::vector<int32_t> BpeTokenizer::encode_with(std::string_view text, bool allow_special,
                                               int threads, size_t min_chunk_bytes) const {
  if (!trained_)
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "BPE tokenizer has no vocabulary: train or load it first");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 16);
  auto encode_text = [&](std::string_view part) {
    if (threads > 1 && part.size() >= 2 * min_chunk_bytes && !pattern_pretokenizer_) {
      encode_ordinary_parallel(part, threads, min_chunk_bytes, ids);
    } else {
      encode_ordinary(part, ids);
    }
  };
  if (!allow_special) {
    encode_text(text);
    return ids;
  }
  for (const patchbay::TextSegment& segment : patchbay::split_at_special_tokens(text, specials_)) {
    if (segment.special_index >= 0) {
      ids.push_back(special_token_id(static_cast<size_t>(segment.special_index)));
    } else {
      encode_text(segment.text);
    }
  }
  return ids;
}

void BpeTokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& out) const {
  // Cache keys view `text`, so the cache lives exactly as long as this call.
  std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> cache;
  std::vector<int32_t> cached_ids;
  std::vector<int32_t> scratch;
  std::string kept;  // a piece without the bytes the vocabulary lacks
  const std::function<void(std::string_view)> encode_piece = [&](std::string_view piece) {
    if (drops_bytes_) {
      kept.clear();
      for (char c : piece)
        if (!dropped_bytes_[static_cast<unsigned char>(c)]) kept.push_back(c);
      if (kept.size() != piece.size()) {  // merge what is left (not cached: not a view of text)
        std::vector<int32_t> ids;
        if (kept.size() == 1) {
          ids.push_back(ranks_.byte_id(static_cast<unsigned char>(kept[0])));
        } else if (!kept.empty()) {
          merge_piece(kept, ranks_, ids);
        }
        out.insert(out.end(), ids.begin(), ids.end());
        return;
      }
    }
    if (piece.size() == 1) {
      out.push_back(ranks_.byte_id(static_cast<unsigned char>(piece[0])));
      return;
    }
    auto hit = cache.find(piece);
    if (hit != cache.end()) {
      const int32_t* begin = cached_ids.data() + hit->second.first;
      out.insert(out.end(), begin, begin + hit->second.second);
      return;
    }
    scratch.clear();
    const auto whole = whole_token_ids_.empty() ? whole_token_ids_.end()
                                                : whole_token_ids_.find(std::string(piece));
    if (whole != whole_token_ids_.end()) {
      scratch.push_back(whole->second);
    } else {
      merge_piece(piece, ranks_, scratch);
    }
    out.insert(out.end(), scratch.begin(), scratch.end());
    if (cache.size() >= kPieceCacheLimit) {
      cache.clear();
      cached_ids.clear();
    }
    cache.emplace(piece, std::make_pair(static_cast<uint32_t>(cached_ids.size()),
                                        static_cast<uint32_t>(scratch.size())));
    cached_ids.insert(cached_ids.end(), scratch.begin(), scratch.end());
  };
  if (pattern_pretokenizer_) {
    pattern_pretokenizer_->split(text, encode_piece);
  } else {
    pretokenizer_->split(text, encode_piece);
  }
}

void BpeTokenizer::encode_ordinary_parallel(std::string_view text, int threads, size_t min_chunk,
                                            std::vector<int32_t>& out) const {
  // Chunks end at safe cuts (Gpt2PreTokenizer::is_safe_cut), so the pieces, and hence the
  // ids, are exactly those of a single-threaded encode. Aim for ~4 chunks per thread so a
  // slow chunk does not idle the others.
  const size_t target = std::max(min_chunk, text.size() / (static_cast<size_t>(threads) * 4));
  std::vector<std::string_view> chunks;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = Gpt2PreTokenizer::next_safe_cut(text, std::min(text.size(), begin + target));
    if (end <= begin) end = text.size();
    chunks.push_back(text.substr(begin, end - begin));
    begin = end;
  }
  std::vector<std::vector<int32_t>> results(chunks.size());
  std::atomic<size_t> next_chunk{0};
  auto worker = [&]() {
    for (size_t c = next_chunk++; c < chunks.size(); c = next_chunk++) {
      results[c].reserve(chunks[c].size() / 3 + 16);
      encode_ordinary(chunks[c], results[c]);
    }
  };
  const size_t worker_count = std::min(static_cast<size_t>(threads), chunks.size());
  std::vector<std::thread> pool;
  // Exceptions (bad_alloc) must not escape a std::thread; collect the first one.
  std::exception_ptr failure;
  std::mutex failure_mutex;
  for (size_t t = 1; t < worker_count; ++t) {
    pool.emplace_back([&]() {
      try {
        worker();
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
    });
  }
  try {
    worker();
  } catch (...) {
    std::lock_guard<std::mutex> lock(failure_mutex);
    if (!failure) failure = std::current_exception();
  }
  for (std::thread& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
  size_t total = 0;
  for (const auto& r : results) total += r.size();
  out.reserve(out.size() + total);
  for (const auto& r : results) out.insert(out.end(), r.begin(), r.end());
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string bytes;
  bytes.reserve(ids.size() * 4);
  for (int32_t id : ids) bytes += token_bytes(id);
  return bytes;
}

void BpeTokenizer::save(const std::string& path) const {
  if (!trained_)
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "cannot save a BPE tokenizer before train or load");
  const bool json_name = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  if (published_ || json_name) {
    write_hf_tokenizer_json(published_vocabulary(), path);
    return;
  }
  std::ostringstream text;
  text << kFileMagic << ' ' << kFileVersion << '\n';
  text << "pretokenizer gpt2\n";
  text << "merges " << merges_.size() << '\n';
  for (size_t r = 0; r < merges_.size(); ++r) {
    // "left right hex(bytes of the new token)": ids are authoritative (two merges may
    // spell the same bytes), the hex is for readers and is checked on load.
    text << merges_[r].left << ' ' << merges_[r].right << ' '
         << patchbay::hex_encode(token_bytes_[256 + r]) << '\n';
  }
  text << "specials " << specials_.size() << '\n';
  for (const std::string& special : specials_) text << patchbay::hex_encode(special) << '\n';
  text << "end\n";
  patchbay::write_file_atomically(path, text.str());
}

void BpeTokenizer::load(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw patchbay::PluginError(PB_STATUS_IO_ERROR,
                                "cannot open BPE tokenizer file '" + path + "'");
  auto fail = [&](const std::string& what) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "'" + path + "' is not a valid patchbay-bpe file: " + what);
  };
  const int first = (file >> std::ws).peek();
  if (first == '{') {
    file.close();
    use_published(load_hf_tokenizer_json(path));
    return;
  }
  std::string magic, keyword, value;
  int version = 0;
  if (!(file >> magic >> version) || magic != kFileMagic)
    fail("missing 'patchbay-bpe <version>' header");
  if (version != kFileVersion) {
    fail("version " + std::to_string(version) + ", this plugin reads version " +
         std::to_string(kFileVersion));
  }
  if (!(file >> keyword >> value) || keyword != "pretokenizer" || value != "gpt2")
    fail("expected 'pretokenizer gpt2'");
  // Every merge or special line takes at least two bytes, so a count above the file's
  // size is corrupt: refuse it before sizing anything by it.
  std::error_code size_error;
  const size_t file_bytes = static_cast<size_t>(std::filesystem::file_size(path, size_error));
  auto read_count = [&](const char* expected_keyword) {
    size_t count = 0;
    if (!(file >> keyword >> count) || keyword != expected_keyword)
      fail(std::string("expected '") + expected_keyword + " <count>'");
    if (count > file_bytes / 2) {
      fail(std::string("'") + expected_keyword + " " + std::to_string(count) +
           "' but the file has only " + std::to_string(file_bytes) + " bytes");
    }
    return count;
  };
  const size_t merge_count = read_count("merges");
  std::vector<Merge> merges(merge_count);
  std::vector<std::string> hex_bytes(merge_count);
  for (size_t r = 0; r < merge_count; ++r) {
    if (!(file >> merges[r].left >> merges[r].right >> hex_bytes[r]))
      fail("merge line " + std::to_string(r) + " unreadable");
  }
  const size_t special_count = read_count("specials");
  std::vector<std::string> specials(special_count);
  for (size_t s = 0; s < special_count; ++s) {
    if (!(file >> value)) fail("special token line " + std::to_string(s) + " unreadable");
    specials[s] = patchbay::hex_decode(value);
  }
  if (!(file >> keyword) || keyword != "end") fail("missing 'end' line (truncated file?)");
  validate_specials(specials);
  BpeTokenizer candidate(BpeOptions{static_cast<int64_t>(256 + merge_count + special_count),
                                    specials, options_.encode_threads, options_.min_chunk_bytes, "",
                                    "", ""});
  candidate.merges_ = std::move(merges);
  candidate.rebuild_from_merges();
  for (size_t r = 0; r < merge_count; ++r) {
    if (patchbay::hex_encode(candidate.token_bytes_[256 + r]) != hex_bytes[r]) {
      fail("merge " + std::to_string(r) + " spells " +
           patchbay::hex_encode(candidate.token_bytes_[256 + r]) + " but the file says " +
           hex_bytes[r]);
    }
  }
  merges_ = std::move(candidate.merges_);
  specials_ = std::move(candidate.specials_);
  token_bytes_ = std::move(candidate.token_bytes_);
  special_ids_ = std::move(candidate.special_ids_);
  merge_results_ = std::move(candidate.merge_results_);
  ranks_ = std::move(candidate.ranks_);
  published_ = false;
  pattern_pretokenizer_ = nullptr;
  whole_token_ids_.clear();
  dropped_bytes_.fill(false);
  drops_bytes_ = false;
  published_source_.clear();
  trained_ = true;
}

}  // namespace patchbay_bpe
