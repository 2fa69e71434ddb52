// Published byte-level BPE vocabularies: reading and writing GPT-2's `encoder.json` +
// `vocab.bpe` (the files OpenAI published with GPT-2) and Hugging Face's `tokenizer.json`
// of the byte-level BPE family (model.type "BPE", ByteLevel pre-tokenizer and decoder,
// added_tokens), keeping THEIR ids and merge ranks.
//
// In both formats a token is a string of GPT-2 byte-mapped characters (gpt2_byte_map.hpp)
// and a merge "A B" creates the token whose text is A followed by B, with that token's own
// id (GPT-2's `<|endoftext|>` is 50256). Tokens are identified by their text, so two merges
// that spell the same bytes create the same id (unlike Patchbay's own format, where merge r
// always creates id 256 + r).
//
// Public C++ API (static library patchbay_tokenizer_bpe_core, SDK headers only):
//   load_gpt2_vocabulary(encoder_json, vocab_bpe, specials)  -> PublishedVocabulary
//   load_hf_tokenizer_json(path) / parse_hf_tokenizer_json(text, source)
//   hf_tokenizer_json_text(vocab) / write_hf_tokenizer_json(vocab, path)   (atomic)
//   write_gpt2_files(vocab, encoder_json_path, vocab_bpe_path)            (atomic each)
// BpeTokenizer::use_published() encodes with one; BpeTokenizer::published_vocabulary()
// gives any tokenizer (also a Patchbay-trained one) in this form for export.
// Errors: patchbay::PluginError (IO_ERROR for files, INVALID_ARGUMENT for content), with
// the file, what was expected and what was found.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace patchbay_bpe {

struct PublishedMerge {
  int32_t left = 0;
  int32_t right = 0;
  int32_t result = 0;  // id of the token spelled left + right
};

struct PublishedSpecial {
  std::string text;  // matched literally in the input (allow_special = 1)
  int32_t id = 0;
};

struct PublishedVocabulary {
  // Bytes of each id in [0, size); dense (every id has a token). Specials hold their text.
  std::vector<std::string> token_bytes;
  // id of each one-byte token; -1 when the vocabulary has none (that byte is dropped from the
  // input when encoding, as Hugging Face's BPE without unk_token and llama.cpp do)
  std::array<int32_t, 256> byte_ids{};
  std::vector<PublishedMerge> merges;  // rank order (rank = index)
  std::vector<PublishedSpecial> specials;
  std::string source;  // file name(s), for messages
  // Pre-tokenizer: empty = GPT-2's regex (ByteLevel with use_regex). Otherwise the patterns of
  // a sequence of regex splits, in Hugging Face's syntax (pattern_pretokenizer.hpp), e.g.
  // {"\\p{N}", GPT-2's} for SmolLM2 (Digits + ByteLevel) or {LLaMA 3's Split pattern}.
  std::vector<std::string> pretokenizer_patterns;
  // tokenizer.json model.ignore_merges (LLaMA 3): a pre-token that is itself a vocabulary
  // token is emitted as that id without applying merges.
  bool ignore_merges = false;
};

// GPT-2's two files. `special_texts` name tokens of encoder.json that are special tokens
// (matched as text when allow_special = 1), e.g. {"<|endoftext|>"}; each must be in the
// file. As in encoder.py, vocab.bpe's first line (`#version: 0.2`) is skipped, and a later
// duplicate of a merge pair wins (both references build a dict).
PublishedVocabulary load_gpt2_vocabulary(const std::string& encoder_json_path,
                                         const std::string& vocab_bpe_path,
                                         const std::vector<std::string>& special_texts);

// A Hugging Face tokenizer.json of the GPT-2 family: no normalizer, a ByteLevel
// pre-tokenizer with use_regex true and add_prefix_space false, or a Sequence of Split
// (Regex pattern, behavior Isolated, not inverted) and Digits steps ending in a ByteLevel
// step with or without its regex (LLaMA 3, Qwen 2, SmolLM2), a BPE model without
// dropout, byte fallback or subword prefix/suffix (ignore_merges is kept), added tokens without
// lstrip/rstrip/single_word. Every added token (special or not) becomes a special token:
// Hugging Face matches them in any input, Patchbay when allow_special = 1. Anything else is
// refused with a message naming the field, since encoding would differ.
PublishedVocabulary load_hf_tokenizer_json(const std::string& path);
PublishedVocabulary parse_hf_tokenizer_json(std::string_view json_text, const std::string& source);

// A tokenizer.json that Hugging Face `tokenizers` (and transformers' GPT2TokenizerFast)
// load as the same tokenizer: GPT-2-style fields, vocab in id order, merges as "A B".
// Refuses a vocabulary where two non-special ids spell the same bytes (tokenizer.json
// identifies tokens by text).
std::string hf_tokenizer_json_text(const PublishedVocabulary& vocab);
void write_hf_tokenizer_json(const PublishedVocabulary& vocab, const std::string& path);

// GPT-2's encoder.json (ids, specials included) and vocab.bpe (`#version: 0.2` + merges).
void write_gpt2_files(const PublishedVocabulary& vocab, const std::string& encoder_json_path,
                      const std::string& vocab_bpe_path);

// Checks the invariants above (dense ids, byte tokens, merges spell their result); throws.
void validate_published_vocabulary(const PublishedVocabulary& vocab);

}  // namespace patchbay_bpe
