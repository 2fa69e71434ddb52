// Byte-level BPE tokenizer with GPT-2 pre-tokenisation, as a plain C++ class;
// bpe_component.cpp adapts it to the SDK's patchbay::Tokenizer.
//
// Ids (Patchbay's own format): [0, 256) raw bytes, [256, 256 + merges) learned merges in
// rank order, then the special tokens in configuration order. A published vocabulary (GPT-2
// encoder.json + vocab.bpe, or a Hugging Face tokenizer.json; published_vocab.hpp) keeps its
// own ids and ranks instead: use_published(), or the options' file names, which the
// constructor loads. vocab_size() is 0 until train(), load() or a published vocabulary.
// Every byte string round-trips: decode(encode(x)) == x, including invalid UTF-8.
//
// Thread safety: encode/decode/queries are const and may run concurrently; train/load
// need exclusive access. Errors are patchbay::PluginError carrying their status code
// (INVALID_ARGUMENT for bad input, OUT_OF_RANGE for bad ids, IO_ERROR for files, INTERNAL
// for a PCRE2 failure); the SDK adapter turns them into pb_status values at the boundary.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bpe_merge.hpp"
#include "bpe_pretokenizer.hpp"
#include "bpe_trainer.hpp"
#include "pattern_pretokenizer.hpp"
#include "published_vocab.hpp"

namespace patchbay_bpe {

struct BpeOptions {
  int64_t vocab_size = 4096;  // target, specials included; >= 256 + specials
  std::vector<std::string> special_tokens{"<|endoftext|>"};
  int encode_threads = 0;               // 0: std::thread::hardware_concurrency(); 1: no threads
  size_t min_chunk_bytes = 256 * 1024;  // parallel encode cuts chunks at least this long
  // Published vocabulary to load at construction: GPT-2's pair (both or neither; the
  // special_tokens above name which of encoder.json's tokens are special) or a Hugging Face
  // tokenizer.json (its added_tokens are the specials). vocab_size is then ignored.
  std::string vocab_file;   // encoder.json
  std::string merges_file;  // vocab.bpe
  std::string tokenizer_json;
};

struct TrainReport {
  int64_t requested_vocab_size = 0;
  int64_t reached_vocab_size = 0;  // smaller when no pair occurs twice any more
  size_t merges = 0;
  size_t distinct_pretokens = 0;
};

class BpeTokenizer {
 public:
  explicit BpeTokenizer(BpeOptions options);

  // Learns merges from `text` (special-token strings in it are cut out first, so no merge
  // spans one). Replaces any earlier vocabulary; specials stay those of the options.
  // Refused (UNSUPPORTED) when the options name published files: the vocabulary is theirs.
  TrainReport train(std::string_view text);

  // Replaces the vocabulary with a published one (its ids, ranks and specials).
  void use_published(const PublishedVocabulary& vocab);
  // True when the ids are a published vocabulary's rather than Patchbay's own layout.
  bool is_published() const { return published_; }
  // The current vocabulary in published form (for a Patchbay-trained one: bytes are ids
  // 0..255, merge r creates 256 + r), e.g. to write tokenizer.json for an export.
  PublishedVocabulary published_vocabulary() const;
  // Where the vocabulary came from ("" when trained or loaded from Patchbay's format).
  const std::string& published_source() const { return published_source_; }

  std::vector<int32_t> encode(std::string_view text, bool allow_special) const;
  // Same ids as encode(); `threads` and `min_chunk_bytes` override the options (tests).
  std::vector<int32_t> encode_with(std::string_view text, bool allow_special, int threads,
                                   size_t min_chunk_bytes) const;
  std::string decode(std::span<const int32_t> ids) const;

  int64_t vocab_size() const;
  size_t merge_count() const { return merges_.size(); }
  const std::vector<Merge>& merges() const { return merges_; }
  const std::vector<std::string>& special_tokens() const { return specials_; }
  int32_t special_token_id(size_t index) const;
  // Bytes of one id (specials give their text).
  const std::string& token_bytes(int32_t id) const;

  // Patchbay's text format, versioned (README.md), or a Hugging Face tokenizer.json when
  // the vocabulary is published or `path` ends in ".json"; written to a temporary file then
  // renamed. load() reads either (a file starting with '{' is tokenizer.json).
  void save(const std::string& path) const;
  void load(const std::string& path);

 private:
  void rebuild_from_merges();
  void encode_ordinary(std::string_view text, std::vector<int32_t>& out) const;
  void encode_ordinary_parallel(std::string_view text, int threads, size_t min_chunk,
                                std::vector<int32_t>& out) const;

  BpeOptions options_;
  std::shared_ptr<const Gpt2PreTokenizer> pretokenizer_;
  // A published vocabulary's own regex sequence (LLaMA 3, SmolLM2, ...); null: GPT-2's.
  // Encoding with it stays single-threaded (safe cuts are proven for GPT-2's pattern only).
  std::shared_ptr<const PatternPreTokenizer> pattern_pretokenizer_;
  // ignore_merges (LLaMA 3): bytes of every non-special token -> its id; empty when off.
  std::unordered_map<std::string, int32_t> whole_token_ids_;
  // Bytes a published vocabulary has no token for (dropped when encoding); all false otherwise.
  std::array<bool, 256> dropped_bytes_{};
  bool drops_bytes_ = false;
  bool trained_ = false;
  std::vector<Merge> merges_;
  std::vector<std::string> specials_;
  std::vector<std::string> token_bytes_;  // by id, specials included
  std::vector<int32_t> special_ids_;      // by index into specials_
  std::vector<int32_t> merge_results_;    // id merge r creates (256 + r unless published)
  bool published_ = false;
  std::string published_source_;
  PairRankTable ranks_;  // also holds the id each byte starts as
};

}  // namespace patchbay_bpe
