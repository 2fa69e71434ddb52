// Tokenizers as the data pipeline and the CLI use them: created through the plugin
// registry (real .so files, never linked in), trained, saved, loaded by file, and used to
// encode a text file into a token cache.
//
// Tokenizer files name their kind in their first word ("patchbay-bpe 1", "patchbay-char 1",
// see each plugin's README), so a kind can be detected from a file; any other first word
// "patchbay-<kind>" maps to component "<kind>" too, which lets third-party tokenizers that
// follow the convention work without --kind.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/token_cache.hpp"
#include "runtime/registry.hpp"

namespace patchbay::data {

struct TokenizerSettings {
  std::string kind;                                  // component name: "bpe", "char", ...
  std::optional<int64_t> vocab_size;                 // unset: the component's default
  std::optional<std::vector<std::string>> special_tokens;
  std::optional<int64_t> encode_threads;
  // bpe: a published vocabulary instead of training (GPT-2's pair, or a tokenizer.json).
  std::optional<std::string> vocab_file;
  std::optional<std::string> merges_file;
  std::optional<std::string> tokenizer_json;
};

// A fresh (untrained) tokenizer. Keys the component does not declare are an error naming
// the component and the keys it has. Throws patchbay::Error.
runtime::TokenizerHandle create_tokenizer(runtime::Registry& registry, const TokenizerSettings& settings);

// "bpe" for a file starting "patchbay-bpe ..."; throws Error(kInvalidArgument) when the
// first word does not follow the convention (then pass the kind explicitly).
std::string detect_tokenizer_kind(const std::filesystem::path& file);

// create_tokenizer + load(file). settings.kind empty: detected from the file.
runtime::TokenizerHandle load_tokenizer(runtime::Registry& registry, const std::filesystem::path& file,
                                        TokenizerSettings settings = {});

std::string read_text_file(const std::filesystem::path& path);

// Encodes `text_file` (special-token strings in it are ordinary text) and writes a token
// cache whose header records the tokenizer's kind, vocab size and file hash.
TokenCacheInfo encode_file_to_token_cache(const runtime::TokenizerHandle& tokenizer,
                                          const std::string& kind,
                                          const std::filesystem::path& tokenizer_file,
                                          const std::filesystem::path& text_file,
                                          const std::filesystem::path& cache_file);

}  // namespace patchbay::data
