// Tokenizer files (plugins/tokenizer_bpe, plugins/tokenizer_char, core/interop): Patchbay's
// BPE and char formats through load(), Hugging Face tokenizer.json (the plugin's parser and
// the host's conversion), and GPT-2's encoder.json + vocab.bpe (the input split at the first
// NUL byte). A vocabulary that loads also encodes and decodes a short text.
#include <nlohmann/json.hpp>

#include "bpe_tokenizer.hpp"
#include "char_tokenizer.hpp"
#include "common/error.hpp"
#include "fuzz_input.hpp"
#include "interop/hf_tokenizer.hpp"
#include "patchbay/component.hpp"
#include "published_vocab.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = patchbay_fuzz::text(data, size);
  const std::string file = patchbay_fuzz::as_file(data, size, "tokenizer").string();
  try {
    patchbay_bpe::BpeOptions options;
    options.encode_threads = 1;
    patchbay_bpe::BpeTokenizer bpe(options);
    bpe.load(file);
    (void)bpe.decode(bpe.encode("Hello, world 123", true));
  } catch (const patchbay::PluginError&) {
  }
  try {
    patchbay_char::CharTokenizer chars;
    chars.load(file);
    (void)chars.decode(chars.encode("Hello", true));
  } catch (const patchbay::PluginError&) {
  }
  try {
    (void)patchbay_bpe::parse_hf_tokenizer_json(input, "fuzz tokenizer.json");
  } catch (const patchbay::PluginError&) {
  }
  // The host reads tokenizer.json with hf_import's read_json, which turns every
  // nlohmann::json::exception of the parse (syntax, number overflow) into an error naming the
  // file; what is fuzzed here is the conversion of what parsed.
  nlohmann::json parsed;
  bool is_json = true;
  try {
    parsed = nlohmann::json::parse(input);
  } catch (const nlohmann::json::exception&) {
    is_json = false;
  }
  if (is_json) {
    try {
      (void)patchbay::interop::tokenizer_from_hf(parsed);
    } catch (const patchbay::Error&) {
    }
  }
  const size_t nul = input.find('\0');
  if (nul != std::string_view::npos) {
    const std::string encoder = patchbay_fuzz::as_file(data, nul, "encoder.json").string();
    const std::string merges =
        patchbay_fuzz::as_file(data + nul + 1, size - nul - 1, "vocab.bpe").string();
    try {
      (void)patchbay_bpe::load_gpt2_vocabulary(encoder, merges, {});
    } catch (const patchbay::PluginError&) {
    }
  }
  return 0;
}
