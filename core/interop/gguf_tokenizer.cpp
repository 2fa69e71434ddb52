// The tokenizer of a GGUF file as a Hugging Face tokenizer.json (byte-level BPE with the
// file's ids), and llama.cpp's pre-tokenizer names as Split patterns; see gguf_import.hpp.
#include <map>
#include <unordered_map>

#include "common/error.hpp"
#include "interop/gguf_import.hpp"

namespace patchbay::interop {

namespace {

using nlohmann::json;

// GPT-2's regex as Hugging Face's ByteLevel writes it, and the Split patterns of LLaMA 3
// (Meta's tiktoken pattern) and Qwen 2, as their tokenizer.json files hold them.
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
constexpr const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// llama.cpp's token types (llama_token_type).
constexpr int64_t kTokenControl = 3;
constexpr int64_t kTokenUserDefined = 4;

json split_step(const std::string& pattern) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", pattern}}},
          {"behavior", "Isolated"},
          {"invert", false}};
}

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

[[noreturn]] void bad_tokenizer(const GgufFile& file, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument,
              "cannot import " + file.path().string() + ": its tokenizer " + what);
}

}  // namespace

std::vector<std::string> gguf_pretokenizer_patterns(const std::string& pre_name) {
  if (pre_name == "default" || pre_name == "gpt2" || pre_name == "gpt-2") return {};
  // llama.cpp gives these the digit split then GPT-2's regex (llama-vocab.cpp).
  if (pre_name == "smollm" || pre_name == "starcoder" || pre_name == "refact" ||
      pre_name == "codeshell")
    return {"\\p{N}", kGpt2Pattern};
  if (pre_name == "llama-bpe" || pre_name == "llama3" || pre_name == "smaug-bpe")
    return {kLlama3Pattern};
  if (pre_name == "qwen2") return {kQwen2Pattern};
  throw Error(ErrorKind::kInvalidArgument,
              "cannot import: tokenizer.ggml.pre = \"" + pre_name +
                  "\" names a pre-tokenizer Patchbay does not know (known: default, gpt2, "
                  "smollm, starcoder, refact, codeshell, llama-bpe, smaug-bpe, qwen2)");
}

json gguf_tokenizer_json(const GgufFile& file) {
  const std::string model = file.get_string("tokenizer.ggml.model").value_or("");
  if (model != "gpt2")
    bad_tokenizer(file, "is tokenizer.ggml.model = \"" + model +
                            "\"; only \"gpt2\" (byte-level BPE) is imported" +
                            (model == "llama" ? " (\"llama\" is SentencePiece)" : ""));
  const std::vector<std::string> tokens = file.get_strings("tokenizer.ggml.tokens");
  const std::vector<std::string> merges = file.get_strings("tokenizer.ggml.merges");
  const std::vector<int64_t> types = file.get_ints("tokenizer.ggml.token_type");
  if (tokens.empty()) bad_tokenizer(file, "has no tokenizer.ggml.tokens");
  if (!types.empty() && types.size() != tokens.size())
    bad_tokenizer(file, "has " + std::to_string(types.size()) + " token types for " +
                            std::to_string(tokens.size()) + " tokens");
  const std::vector<std::string> patterns =
      gguf_pretokenizer_patterns(file.get_string("tokenizer.ggml.pre").value_or("default"));

  json vocab = json::object();
  json added = json::array();
  std::unordered_map<std::string, size_t> first_id;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const auto [it, inserted] = first_id.emplace(tokens[id], id);
    if (!inserted)
      bad_tokenizer(file, "spells token '" + tokens[id] + "' twice (ids " +
                              std::to_string(it->second) + " and " + std::to_string(id) +
                              "); a tokenizer.json vocabulary is keyed by text");
    vocab[tokens[id]] = static_cast<int64_t>(id);
    const int64_t type = types.empty() ? 1 : types[id];
    if (type == kTokenControl || type == kTokenUserDefined)
      added.push_back({{"id", static_cast<int64_t>(id)},
                       {"content", tokens[id]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", type == kTokenUserDefined},
                       {"special", type == kTokenControl}});
  }
  json pre = byte_level(true);
  if (!patterns.empty()) {
    json steps = json::array();
    const bool gpt2_last = patterns.back() == kGpt2Pattern;
    for (size_t i = 0; i + (gpt2_last ? 1 : 0) < patterns.size(); ++i)
      steps.push_back(split_step(patterns[i]));
    steps.push_back(byte_level(gpt2_last));
    pre = {{"type", "Sequence"}, {"pretokenizers", steps}};
  }
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre},
          {"post_processor", nullptr},
          {"decoder", byte_level(true)},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", merges}}}};
}

}  // namespace patchbay::interop
