// Patchbay tokenizer files <-> Hugging Face `tokenizers` files (tokenizer.json), keeping
// Patchbay's ids. Only the two built-in layouts map, and only from their documented save
// formats (plugins/tokenizer_char/README.md, plugins/tokenizer_bpe/README.md):
//
//   char ("patchbay-char 1"): ids [0, C) the characters (sorted), [C, C+256) one per byte,
//     then the specials. tokenizer.json: a BPE model with no merges and byte_fallback, vocab
//     = the characters, "<0xNN>" for byte NN, no normalizer and no pre-tokenizer, specials as
//     added tokens; decoder ByteFallback + Fuse. HF then splits the text into characters,
//     emits a character's id when it is in the vocabulary and its UTF-8 bytes' "<0xNN>" ids
//     otherwise: Patchbay's rule, id for id.
//   bpe ("patchbay-bpe 1", GPT-2 pre-tokens): ids [0, 256) the raw bytes, 256 + r the merge
//     of rank r, then the specials. tokenizer.json: GPT-2's layout (ByteLevel pre-tokenizer
//     with GPT-2's regex, ByteLevel decoder), vocab keyed by GPT-2's byte-to-unicode spelling
//     with Patchbay's ids, merges in rank order. Exact unless two merges spell the same bytes
//     (a vocab is keyed by spelling): then `exact` is false and the reason is in `notes`.
//
// Differences that remain (docs/interop.md): HF always splits special-token texts out of the
// input (Patchbay only with allow_special); HF takes Python str, so invalid UTF-8 cannot be
// encoded there (Patchbay encodes any bytes); decoding byte tokens that are not valid UTF-8
// gives U+FFFD in HF and the raw bytes in Patchbay.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace patchbay::interop {

struct HfTokenizerFiles {
  nlohmann::json tokenizer;         // tokenizer.json
  nlohmann::json tokenizer_config;  // tokenizer_config.json (PreTrainedTokenizerFast)
  nlohmann::json special_tokens_map;
  std::vector<std::string> specials;  // Patchbay's special tokens, in id order
  int64_t first_special_id = 0;       // id of specials[0]
  int64_t vocab_size = 0;
  bool exact = true;               // tokenizer.json gives Patchbay's ids on every valid UTF-8 text
  std::vector<std::string> notes;  // what differs, when !exact
};

// `kind` is the run's [tokenizer] kind ("char" or "bpe"), `file_text` the saved file.
// Throws Error(kInvalidArgument) for another kind or a file not in the documented format.
HfTokenizerFiles tokenizer_to_hf(const std::string& kind, const std::string& file_text,
                                 int64_t model_max_length);

struct PatchbayTokenizerFile {
  std::string kind;       // "char" or "bpe"
  std::string file_text;  // in the plugin's save format
  std::vector<std::string> specials;
  int64_t vocab_size = 0;
  bool published =
      false;  // a byte-level BPE with its own ids (GPT-2's): file_text is the tokenizer.json
};

// The inverse, for tokenizer.json files of the two layouts above (as tokenizer_to_hf writes
// them, or any file with the same ids). A byte-level BPE with other ids (GPT-2's published
// vocabulary) becomes a "bpe" tokenizer whose file is the tokenizer.json itself (`published`;
// tokenizer_bpe >= 1.1 loads it keeping its ids), and so does one whose pre-tokenizer is a
// Sequence of Split/Digits steps ending in ByteLevel (LLaMA 3, Qwen 2, SmolLM2). Anything else
// (SentencePiece, WordPiece, Unigram) is Error(kInvalidArgument) saying what was found and what is
// supported. Export of a run whose BPE tokenizer is a published vocabulary (its saved file is a
// tokenizer.json) writes that file as it is.
PatchbayTokenizerFile tokenizer_from_hf(const nlohmann::json& tokenizer_json);

// GPT-2's byte-to-unicode table (openai/gpt-2 encoder.py bytes_to_unicode), UTF-8 encoded.
const std::vector<std::string>& gpt2_byte_spellings();

}  // namespace patchbay::interop
