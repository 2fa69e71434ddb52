// Registry-backed tokenizer creation/loading and token-cache encoding; see tokenizer_io.hpp.
#include "data/tokenizer_io.hpp"

#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "data/split.hpp"

namespace patchbay::data {
namespace fs = std::filesystem;

runtime::TokenizerHandle create_tokenizer(runtime::Registry& registry, const TokenizerSettings& settings) {
  const runtime::ComponentEntry& entry = registry.find(PB_KIND_TOKENIZER, settings.kind);
  runtime::ComponentConfig config(*entry.descriptor);
  if (settings.vocab_size) config.set_int("vocab_size", *settings.vocab_size);
  if (settings.special_tokens) config.set_strings("special_tokens", *settings.special_tokens);
  if (settings.encode_threads) config.set_int("encode_threads", *settings.encode_threads);
  if (settings.vocab_file) config.set_string("vocab_file", *settings.vocab_file);
  if (settings.merges_file) config.set_string("merges_file", *settings.merges_file);
  if (settings.tokenizer_json) config.set_string("tokenizer_json", *settings.tokenizer_json);
  return registry.create_tokenizer(settings.kind, config.view());
}

std::string read_text_file(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error(ErrorKind::kNotFound, "cannot open '" + path.string() + "' for reading");
  std::ostringstream content;
  content << file.rdbuf();
  if (file.bad()) throw Error(ErrorKind::kIo, "reading '" + path.string() + "' failed");
  return content.str();
}

std::string detect_tokenizer_kind(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(ErrorKind::kNotFound, "cannot open tokenizer file '" + file.string() + "'");
  std::string first_word;
  in >> first_word;
  const std::string prefix = "patchbay-";
  if (first_word.rfind(prefix, 0) != 0 || first_word.size() == prefix.size()) {
    throw Error(ErrorKind::kInvalidArgument,
                "cannot tell the tokenizer kind of '" + file.string() + "' (its first word is '" +
                    first_word.substr(0, 40) + "', not 'patchbay-<kind>'); pass --kind");
  }
  return first_word.substr(prefix.size());
}

runtime::TokenizerHandle load_tokenizer(runtime::Registry& registry, const fs::path& file,
                                        TokenizerSettings settings) {
  if (settings.kind.empty()) settings.kind = detect_tokenizer_kind(file);
  runtime::TokenizerHandle tokenizer = create_tokenizer(registry, settings);
  tokenizer.load(file.string());
  return tokenizer;
}

TokenCacheInfo encode_file_to_token_cache(const runtime::TokenizerHandle& tokenizer, const std::string& kind,
                                          const fs::path& tokenizer_file, const fs::path& text_file,
                                          const fs::path& cache_file) {
  const std::string text = read_text_file(text_file);
  const std::vector<int32_t> ids = tokenizer.encode(text, false);
  TokenCacheInfo info;
  info.vocab_size = static_cast<uint64_t>(tokenizer.vocab_size());
  info.tokenizer_hash = fnv1a64(read_text_file(tokenizer_file));
  info.source_hash = fnv1a64(text);
  info.tokenizer_kind = kind;
  write_token_cache(cache_file, ids, info);
  info.count = ids.size();
  info.bytes_per_id = info.vocab_size <= 65536 ? 2 : 4;
  return info;
}

}  // namespace patchbay::data
