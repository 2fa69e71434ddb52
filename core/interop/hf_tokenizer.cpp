// Patchbay tokenizer files <-> tokenizer.json; see hf_tokenizer.hpp for the two layouts.
#include "interop/hf_tokenizer.hpp"

#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "common/parse_number.hpp"

namespace patchbay::interop {

namespace {

using nlohmann::json;

[[noreturn]] void bad_file(const std::string& kind, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument,
              "the run's '" + kind + "' tokenizer file is not in the documented format (" + what +
                  "); expected what the plugin's save() writes");
}

std::string hex_decode(const std::string& hex, const std::string& kind) {
  if (hex.size() % 2 != 0) bad_file(kind, "odd-length hex '" + hex + "'");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    unsigned value = 0;
    if (std::sscanf(hex.substr(i, 2).c_str(), "%2x", &value) != 1)
      bad_file(kind, "bad hex '" + hex + "'");
    out.push_back(static_cast<char>(value));
  }
  return out;
}

std::string hex_encode(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string byte_token(int b) {
  char text[8];
  std::snprintf(text, sizeof text, "<0x%02X>", b);
  return text;
}

// Reads "<keyword> <count>" then `count` lines (each split into words).
std::vector<std::vector<std::string>> read_section(std::istringstream& in,
                                                   const std::string& keyword,
                                                   const std::string& kind) {
  std::string word;
  size_t count = 0;
  if (!(in >> word >> count) || word != keyword)
    bad_file(kind, "expected '" + keyword + " <count>'");
  std::string line;
  std::getline(in, line);  // rest of the count line
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < count; ++i) {
    if (!std::getline(in, line)) bad_file(kind, "the " + keyword + " section is truncated");
    std::istringstream words(line);
    std::vector<std::string> row;
    while (words >> word) row.push_back(word);
    rows.push_back(row);
  }
  return rows;
}

void expect_header(std::istringstream& in, const std::string& header, const std::string& kind) {
  std::string line;
  if (!std::getline(in, line) || line != header)
    bad_file(kind, "first line is not '" + header + "'");
}

void expect_end(std::istringstream& in, const std::string& kind) {
  std::string word;
  if (!(in >> word) || word != "end") bad_file(kind, "no 'end' line");
}

json added_token(int64_t id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

json bpe_model(json vocab, json merges, bool byte_fallback) {
  return {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", nullptr},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", false},
          {"byte_fallback", byte_fallback},
          {"ignore_merges", false},
          {"vocab", std::move(vocab)},
          {"merges", std::move(merges)}};
}

json byte_level(bool add_prefix_space) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", add_prefix_space},
          {"trim_offsets", true},
          {"use_regex", true}};
}

// `add_specials`: put the specials into tokenizer.json (ids first_special_id + i) as added tokens.
void finish_files(HfTokenizerFiles& files, int64_t model_max_length, bool add_specials) {
  if (add_specials) {
    json added = json::array();
    for (size_t i = 0; i < files.specials.size(); ++i) {
      added.push_back(
          added_token(files.first_special_id + static_cast<int64_t>(i), files.specials[i]));
      files.tokenizer["model"]["vocab"][files.specials[i]] =
          files.first_special_id + static_cast<int64_t>(i);
    }
    files.tokenizer["added_tokens"] = added;
  }
  files.tokenizer_config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                            {"model_max_length", model_max_length},
                            {"clean_up_tokenization_spaces", false},
                            {"add_bos_token", false},
                            {"add_eos_token", false}};
  files.special_tokens_map = json::object();
  if (!files.specials.empty()) {
    // The first special (Patchbay's default "<|endoftext|>") ends a document: eos, as GPT-2.
    for (const char* key : {"eos_token", "bos_token", "unk_token"}) {
      files.tokenizer_config[key] = files.specials[0];
      files.special_tokens_map[key] = files.specials[0];
    }
  }
}

// id -> token text of a tokenizer.json model vocab (ids must be distinct).
std::map<int64_t, std::string> vocab_by_id(const json& vocab) {
  std::map<int64_t, std::string> by_id;
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || !by_id.emplace(id.get<int64_t>(), token).second)
      throw Error(ErrorKind::kInvalidArgument,
                  "tokenizer.json: vocab id of '" + token + "' is not a distinct integer");
  }
  return by_id;
}

// Added tokens flagged special, by id.
std::map<int64_t, std::string> special_added_tokens(const json& tokenizer) {
  std::map<int64_t, std::string> specials;
  if (tokenizer.contains("added_tokens") && tokenizer["added_tokens"].is_array())
    for (const json& t : tokenizer["added_tokens"])
      if (t.value("special", false))
        specials[t.at("id").get<int64_t>()] = t.at("content").get<std::string>();
  return specials;
}

// Specials must be exactly the ids [first, first + K) and the last ids of the vocabulary.
std::vector<std::string> trailing_specials(const std::map<int64_t, std::string>& specials,
                                           int64_t first, const char* layout) {
  std::vector<std::string> out;
  int64_t expected = first;
  for (const auto& [id, content] : specials) {
    if (id != expected)
      throw Error(ErrorKind::kInvalidArgument,
                  std::string("tokenizer.json looks like Patchbay's ") + layout +
                      " layout but special token '" + content + "' has id " + std::to_string(id) +
                      " where " + std::to_string(expected) +
                      " was expected (specials follow the other ids)");
    out.push_back(content);
    ++expected;
  }
  return out;
}

size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 6) return 2;
  if ((lead >> 4) == 14) return 3;
  if ((lead >> 3) == 30) return 4;
  return 0;
}

std::string merge_text(const json& merge, std::string* right) {
  if (merge.is_array() && merge.size() == 2) {
    *right = merge[1].get<std::string>();
    return merge[0].get<std::string>();
  }
  const std::string text = merge.get<std::string>();
  const size_t space = text.find(' ');
  if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos)
    throw Error(ErrorKind::kInvalidArgument,
                "tokenizer.json: merge '" + text + "' is not two tokens");
  *right = text.substr(space + 1);
  return text.substr(0, space);
}

PatchbayTokenizerFile char_from_hf(const json& tokenizer,
                                   const std::map<int64_t, std::string>& by_id) {
  const std::map<int64_t, std::string> specials = special_added_tokens(tokenizer);
  int64_t chars = 0;
  while (by_id.count(chars) != 0 && by_id.at(chars).rfind("<0x", 0) != 0 &&
         specials.count(chars) == 0)
    ++chars;
  std::ostringstream file;
  file << "patchbay-char 1\ncharacters " << chars << "\n";
  std::string previous;
  for (int64_t i = 0; i < chars; ++i) {
    const std::string& c = by_id.at(i);
    if (c.empty() || utf8_length(static_cast<unsigned char>(c[0])) != c.size() ||
        (i > 0 && !(previous < c)))
      throw Error(
          ErrorKind::kInvalidArgument,
          "tokenizer.json (BPE without merges, byte fallback) is not Patchbay's char layout: id " +
              std::to_string(i) + " ('" + c +
              "') is not one character in byte order after the previous");
    previous = c;
    file << hex_encode(c) << "\n";
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = by_id.find(chars + b);
    if (it == by_id.end() || it->second != byte_token(b))
      throw Error(ErrorKind::kInvalidArgument, "tokenizer.json is not Patchbay's char layout: id " +
                                                   std::to_string(chars + b) + " should be " +
                                                   byte_token(b));
  }
  PatchbayTokenizerFile out;
  out.kind = "char";
  out.specials = trailing_specials(specials, chars + 256, "char");
  out.vocab_size = chars + 256 + static_cast<int64_t>(out.specials.size());
  if (static_cast<int64_t>(by_id.size()) != out.vocab_size)
    throw Error(ErrorKind::kInvalidArgument, "tokenizer.json has " + std::to_string(by_id.size()) +
                                                 " vocab entries; Patchbay's char layout gives " +
                                                 std::to_string(out.vocab_size));
  file << "specials " << out.specials.size() << "\n";
  for (const std::string& s : out.specials) file << hex_encode(s) << "\n";
  file << "end\n";
  out.file_text = file.str();
  return out;
}

// A published vocabulary (GPT-2's ids: "!" is 0, or a pre-tokenizer other than GPT-2's): the
// BPE plugin (>= 1.1) loads the tokenizer.json itself and keeps its ids and pre-tokenizer;
// the run's tokenizer file is that JSON.
PatchbayTokenizerFile published_bpe_from_hf(const json& tokenizer,
                                            const std::map<int64_t, std::string>& by_id) {
  PatchbayTokenizerFile out;
  out.kind = "bpe";
  out.published = true;
  out.file_text = tokenizer.dump();
  for (const auto& [id, content] : special_added_tokens(tokenizer)) out.specials.push_back(content);
  out.vocab_size = by_id.empty() ? 0 : by_id.rbegin()->first + 1;
  return out;
}

PatchbayTokenizerFile bpe_from_hf(const json& tokenizer,
                                  const std::map<int64_t, std::string>& by_id) {
  const std::vector<std::string>& spell = gpt2_byte_spellings();
  bool native = true;
  for (int b = 0; b < 256 && native; ++b) {
    const auto it = by_id.find(b);
    native = it != by_id.end() && it->second == spell[static_cast<size_t>(b)];
  }
  if (!native) return published_bpe_from_hf(tokenizer, by_id);
  const json& vocab = tokenizer["model"]["vocab"];
  std::map<std::string, std::string> bytes_of_spelling;  // GPT-2 spelling -> raw bytes
  auto raw_bytes = [&](const std::string& spelled) {
    std::string out;
    for (size_t i = 0; i < spelled.size();) {
      const size_t n = utf8_length(static_cast<unsigned char>(spelled[i]));
      const std::string c = spelled.substr(i, n == 0 ? 1 : n);
      int found = -1;
      for (int b = 0; b < 256; ++b)
        if (spell[static_cast<size_t>(b)] == c) found = b;
      if (found < 0)
        throw Error(ErrorKind::kInvalidArgument,
                    "tokenizer.json: '" + spelled + "' is not byte-level");
      out.push_back(static_cast<char>(found));
      i += c.size();
    }
    return out;
  };
  const json& merges = tokenizer["model"]["merges"];
  std::ostringstream file;
  file << "patchbay-bpe 1\npretokenizer gpt2\nmerges " << merges.size() << "\n";
  for (size_t r = 0; r < merges.size(); ++r) {
    std::string right;
    const std::string left = merge_text(merges[r], &right);
    const int64_t expected = 256 + static_cast<int64_t>(r);
    if (!vocab.contains(left) || !vocab.contains(right) || !vocab.contains(left + right) ||
        vocab[left + right].get<int64_t>() != expected)
      throw Error(ErrorKind::kInvalidArgument,
                  "tokenizer.json is not Patchbay's native BPE layout: merge " + std::to_string(r) +
                      " ('" + left + "' '" + right + "') should make id " +
                      std::to_string(expected));
    file << vocab[left].get<int64_t>() << " " << vocab[right].get<int64_t>() << " "
         << hex_encode(raw_bytes(left + right)) << "\n";
  }
  PatchbayTokenizerFile out;
  out.kind = "bpe";
  const int64_t first_special = 256 + static_cast<int64_t>(merges.size());
  out.specials = trailing_specials(special_added_tokens(tokenizer), first_special, "BPE");
  out.vocab_size = first_special + static_cast<int64_t>(out.specials.size());
  if (static_cast<int64_t>(by_id.size()) != out.vocab_size)
    throw Error(ErrorKind::kInvalidArgument, "tokenizer.json has " + std::to_string(by_id.size()) +
                                                 " vocab entries; Patchbay's BPE layout gives " +
                                                 std::to_string(out.vocab_size));
  file << "specials " << out.specials.size() << "\n";
  for (const std::string& s : out.specials) file << hex_encode(s) << "\n";
  file << "end\n";
  out.file_text = file.str();
  return out;
}

}  // namespace

const std::vector<std::string>& gpt2_byte_spellings() {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> spellings(256);
    auto utf8 = [](unsigned cp) {
      std::string s;
      if (cp < 0x80) {
        s.push_back(static_cast<char>(cp));
      } else {  // every code point here is < 0x800
        s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
      return s;
    };
    unsigned next = 256;
    for (unsigned b = 0; b < 256; ++b) {
      const bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      spellings[b] = utf8(printable ? b : next++);
    }
    return spellings;
  }();
  return table;
}

HfTokenizerFiles tokenizer_to_hf(const std::string& kind, const std::string& file_text,
                                 int64_t model_max_length) {
  std::istringstream in(file_text);
  HfTokenizerFiles files;
  json vocab = json::object();
  if (kind == "char") {
    expect_header(in, "patchbay-char 1", kind);
    const auto chars = read_section(in, "characters", kind);
    for (size_t i = 0; i < chars.size(); ++i) {
      if (chars[i].size() != 1) bad_file(kind, "a character line is not one hex word");
      vocab[hex_decode(chars[i][0], kind)] = static_cast<int64_t>(i);
    }
    const auto c = static_cast<int64_t>(chars.size());
    for (int b = 0; b < 256; ++b) vocab[byte_token(b)] = c + b;
    for (const auto& row : read_section(in, "specials", kind))
      files.specials.push_back(hex_decode(row.at(0), kind));
    expect_end(in, kind);
    files.first_special_id = c + 256;
    files.tokenizer = {
        {"version", "1.0"},
        {"truncation", nullptr},
        {"padding", nullptr},
        {"normalizer", nullptr},
        {"pre_tokenizer", nullptr},
        {"post_processor", nullptr},
        {"decoder",
         {{"type", "Sequence"},
          {"decoders", json::array({{{"type", "ByteFallback"}}, {{"type", "Fuse"}}})}}},
        {"model", bpe_model(vocab, json::array(), true)}};
  } else if (kind == "bpe" && !file_text.empty() && file_text[0] == '{') {
    // A published vocabulary (GPT-2's files or a tokenizer.json, tokenizer_bpe >= 1.1): the
    // plugin saves it as a tokenizer.json with the published ids, which is what HF reads.
    files.tokenizer = json::parse(file_text);
    const std::map<int64_t, std::string> specials = special_added_tokens(files.tokenizer);
    for (const auto& [id, content] : specials) files.specials.push_back(content);
    files.first_special_id = specials.empty() ? 0 : specials.begin()->first;
    int64_t largest = -1;
    for (const auto& [token, id] : files.tokenizer["model"]["vocab"].items())
      largest = std::max(largest, id.get<int64_t>());
    if (!specials.empty()) largest = std::max(largest, specials.rbegin()->first);
    files.vocab_size = largest + 1;
    finish_files(files, model_max_length, false);
    return files;
  } else if (kind == "bpe") {
    expect_header(in, "patchbay-bpe 1", kind);
    std::string word, value;
    if (!(in >> word >> value) || word != "pretokenizer" || value != "gpt2")
      bad_file(kind, "expected 'pretokenizer gpt2'");
    const std::vector<std::string>& spell = gpt2_byte_spellings();
    std::vector<std::string> spelling(spell.begin(), spell.end());  // id -> GPT-2 spelling
    for (int b = 0; b < 256; ++b) vocab[spelling[static_cast<size_t>(b)]] = b;
    json merges = json::array();
    int64_t duplicates = 0;
    std::string first_duplicate;
    for (const auto& row : read_section(in, "merges", kind)) {
      if (row.size() != 3) bad_file(kind, "a merge line is not '<left> <right> <hex>'");
      const std::optional<uint64_t> left_id = parse_uint64(row[0]), right_id = parse_uint64(row[1]);
      if (!left_id || !right_id)
        bad_file(kind,
                 "a merge line '" + row[0] + " " + row[1] + "' does not start with two token ids");
      const size_t left = *left_id, right = *right_id;
      if (left >= spelling.size() || right >= spelling.size())
        bad_file(kind, "a merge names a later id");
      const std::string text = spelling[left] + spelling[right];
      merges.push_back(spelling[left] + " " + spelling[right]);
      if (vocab.contains(text)) {
        if (duplicates++ == 0) first_duplicate = hex_decode(row[2], kind);
      } else {
        vocab[text] = static_cast<int64_t>(spelling.size());
      }
      spelling.push_back(text);
    }
    for (const auto& row : read_section(in, "specials", kind))
      files.specials.push_back(hex_decode(row.at(0), kind));
    expect_end(in, kind);
    files.first_special_id = static_cast<int64_t>(spelling.size());
    if (duplicates > 0) {
      files.exact = false;
      files.notes.push_back(
          std::to_string(duplicates) +
          " merge(s) spell the same bytes as an earlier token (first: '" + first_duplicate +
          "'); a tokenizer.json vocabulary is keyed by spelling, so those ids cannot be expressed "
          "and tokenizer.json gives the earlier id where Patchbay gives the later one");
    }
    files.tokenizer = {{"version", "1.0"},
                       {"truncation", nullptr},
                       {"padding", nullptr},
                       {"normalizer", nullptr},
                       {"pre_tokenizer", byte_level(false)},
                       {"post_processor", byte_level(true)},
                       {"decoder", byte_level(true)},
                       {"model", bpe_model(vocab, merges, false)}};
  } else {
    throw Error(ErrorKind::kInvalidArgument, "tokenizer kind '" + kind +
                                                 "' has no Hugging Face counterpart here: only the "
                                                 "built-in 'char' and 'bpe' files are converted");
  }
  files.vocab_size = files.first_special_id + static_cast<int64_t>(files.specials.size());
  finish_files(files, model_max_length, true);
  return files;
}

namespace {

PatchbayTokenizerFile convert_tokenizer_json(const json& tokenizer) {
  if (!tokenizer.contains("model") || tokenizer["model"].value("type", "") != "BPE")
    throw Error(
        ErrorKind::kInvalidArgument,
        "tokenizer.json: model type '" +
            (tokenizer.contains("model") ? tokenizer["model"].value("type", std::string("?"))
                                         : std::string("?")) +
            "' is not BPE; only Patchbay's char and native byte-level BPE layouts are imported");
  const json& model = tokenizer["model"];
  std::map<int64_t, std::string> by_id = vocab_by_id(model.at("vocab"));
  for (const auto& [id, content] : special_added_tokens(tokenizer))
    by_id.emplace(id, content);  // not always in vocab
  const bool no_merges = !model.contains("merges") || model["merges"].empty();
  const bool byte_fallback = model.value("byte_fallback", false);
  const json pre = tokenizer.value("pre_tokenizer", json());
  if (no_merges && byte_fallback && pre.is_null()) return char_from_hf(tokenizer, by_id);
  if (pre.is_object() && pre.value("type", "") == "ByteLevel") {
    if (pre.value("add_prefix_space", false) || !pre.value("use_regex", true))
      throw Error(ErrorKind::kInvalidArgument,
                  "tokenizer.json: the ByteLevel pre-tokenizer must have add_prefix_space = false "
                  "and use_regex = true "
                  "(GPT-2's pattern, as Patchbay's BPE)");
    return bpe_from_hf(tokenizer, by_id);
  }
  // LLaMA 3 / Qwen 2 / SmolLM2: Split or Digits steps, then ByteLevel (with or without its
  // regex). The BPE plugin checks each step when it loads the file and refuses others by name.
  if (pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers") &&
      pre["pretokenizers"].is_array() && !pre["pretokenizers"].empty() &&
      pre["pretokenizers"].back().value("type", "") == "ByteLevel")
    return published_bpe_from_hf(tokenizer, by_id);
  throw Error(ErrorKind::kInvalidArgument,
              "tokenizer.json is neither Patchbay's char layout (BPE, no merges, byte_fallback, no "
              "pre-tokenizer) nor "
              "a byte-level BPE (ByteLevel pre-tokenizer, alone or after Split/Digits steps): "
              "found pre_tokenizer " +
                  pre.dump() +
                  "; SentencePiece/WordPiece/Unigram tokenizers have no Patchbay counterpart");
}

}  // namespace

// The conversion reads fields with nlohmann's checked accessors (at, value, get); a file whose
// structure differs from tokenizer.json's (a missing "vocab", a number where an object goes)
// surfaces as a json exception, turned here into an input error that says what was expected.
PatchbayTokenizerFile tokenizer_from_hf(const json& tokenizer) {
  try {
    return convert_tokenizer_json(tokenizer);
  } catch (const json::exception& error) {
    throw Error(ErrorKind::kInvalidArgument,
                std::string("tokenizer.json does not have the structure of a Hugging Face "
                            "tokenizers file (") +
                    error.what() +
                    "); expected {\"model\": {\"type\": \"BPE\", \"vocab\": {...}, "
                    "\"merges\": [...]}, \"pre_tokenizer\": ..., \"added_tokens\": [...]} as "
                    "transformers saves it");
  }
}

}  // namespace patchbay::interop
