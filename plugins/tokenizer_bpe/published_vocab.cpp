// Loading and writing published byte-level BPE files; see published_vocab.hpp.
#include "published_vocab.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "gpt2_byte_map.hpp"
#include "patchbay/component.hpp"
#include "patchbay/files.hpp"
#include "pattern_pretokenizer.hpp"

namespace patchbay_bpe {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT, source + ": " + what);
}

std::string read_whole_file(const std::string& path, const std::string& what) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    throw patchbay::PluginError(PB_STATUS_IO_ERROR, "cannot open " + what + " '" + path +
                                                        "' (check the path in [tokenizer])");
  }
  std::ostringstream content;
  content << file.rdbuf();
  return content.str();
}

json parse_json(std::string_view text, const std::string& source) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    fail(source, std::string("is not valid JSON: ") + e.what());
  }
}

struct MergeLine {
  std::string left, right;  // byte-mapped texts
  size_t line = 0;          // 1-based, for messages (merge index + 1 for JSON arrays)
};

// Assembles and checks a vocabulary from (text -> id) entries, merges and specials.
PublishedVocabulary build_vocabulary(const std::vector<std::pair<std::string, int64_t>>& entries,
                                     const std::vector<MergeLine>& merge_lines,
                                     const std::vector<PublishedSpecial>& specials,
                                     const std::string& source, const std::string& merges_source) {
  PublishedVocabulary vocab;
  vocab.source = source;
  int64_t max_id = -1;
  for (const auto& [text, id] : entries) max_id = std::max(max_id, id);
  for (const PublishedSpecial& s : specials) max_id = std::max<int64_t>(max_id, s.id);
  if (max_id < 0) fail(source, "the vocabulary is empty");
  if (max_id >= INT32_MAX)
    fail(source, "token id " + std::to_string(max_id) + " does not fit in 31 bits");
  // Ids run 0..max_id without gaps, so there are at least max_id + 1 tokens. Checked before the
  // tables of max_id + 1 entries are allocated: a file with one huge id must not take gigabytes.
  std::unordered_set<int64_t> distinct_ids;
  for (const auto& entry : entries) distinct_ids.insert(entry.second);
  for (const PublishedSpecial& s : specials) distinct_ids.insert(s.id);
  if (static_cast<size_t>(max_id) >= distinct_ids.size())
    fail(source, "token id " + std::to_string(max_id) + " is larger than the " +
                     std::to_string(distinct_ids.size()) + " distinct ids allow (ids must run 0.." +
                     std::to_string(distinct_ids.size() - 1) + " without gaps)");
  std::vector<char> defined(static_cast<size_t>(max_id) + 1, 0);
  vocab.token_bytes.resize(static_cast<size_t>(max_id) + 1);
  std::unordered_set<std::string> special_texts;
  for (const PublishedSpecial& s : specials) special_texts.insert(s.text);
  std::unordered_map<std::string, int32_t> id_of_text;
  id_of_text.reserve(entries.size());
  std::string bytes;
  for (const auto& [text, id] : entries) {
    if (id < 0) fail(source, "token '" + text + "' has negative id " + std::to_string(id));
    const auto index = static_cast<size_t>(id);
    if (defined[index] != 0)
      fail(source, "id " + std::to_string(id) + " is given to two tokens (second: '" + text + "')");
    defined[index] = 1;
    if (gpt2_text_to_bytes(text, bytes)) {
      vocab.token_bytes[index] = bytes;
    } else if (special_texts.count(text) != 0) {
      vocab.token_bytes[index] = text;
    } else {
      fail(source,
           "token '" + text + "' (id " + std::to_string(id) +
               ") is not GPT-2 byte-mapped text; only byte-level BPE vocabularies are supported");
    }
    id_of_text.emplace(text, static_cast<int32_t>(id));
  }
  for (const PublishedSpecial& s : specials) {
    if (s.text.empty())
      fail(source, "special token with id " + std::to_string(s.id) + " has empty text");
    defined[static_cast<size_t>(s.id)] = 1;
    vocab.token_bytes[static_cast<size_t>(s.id)] = s.text;
  }
  for (size_t id = 0; id < defined.size(); ++id) {
    if (defined[id] == 0) {
      fail(source, "no token has id " + std::to_string(id) + " (ids must run 0.." +
                       std::to_string(max_id) + " without gaps)");
    }
  }
  for (int b = 0; b < 256; ++b) {
    const std::string text = gpt2_bytes_to_text(std::string(1, static_cast<char>(b)));
    auto it = id_of_text.find(text);
    // A byte without a token (SmolLM2 has none for some control bytes) is dropped from the
    // input, as Hugging Face's BPE without unk_token and llama.cpp do.
    vocab.byte_ids[static_cast<size_t>(b)] = it == id_of_text.end() ? -1 : it->second;
  }
  vocab.merges.reserve(merge_lines.size());
  for (const MergeLine& m : merge_lines) {
    auto find = [&](const std::string& text) {
      auto it = id_of_text.find(text);
      if (it == id_of_text.end()) {
        fail(merges_source, "merge " + std::to_string(m.line) + " '" + m.left + " " + m.right +
                                "' needs token '" + text + "', which the vocabulary does not have");
      }
      return it->second;
    };
    vocab.merges.push_back(PublishedMerge{find(m.left), find(m.right), find(m.left + m.right)});
  }
  vocab.specials = specials;
  return vocab;
}

// "A B" -> (A, B); byte-mapped texts never contain a space.
MergeLine split_merge_line(const std::string& line, size_t number, const std::string& source) {
  const size_t space = line.find(' ');
  if (space == std::string::npos || space == 0 || space + 1 >= line.size() ||
      line.find(' ', space + 1) != std::string::npos) {
    fail(source, "merge " + std::to_string(number) + " is '" + line +
                     "', expected two tokens separated by one space");
  }
  return MergeLine{line.substr(0, space), line.substr(space + 1), number};
}

bool json_true(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

bool json_nonempty_string(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() && !it->get<std::string>().empty();
}

std::string json_type(const json& node) {
  if (node.is_object() && node.contains("type") && node["type"].is_string())
    return node["type"].get<std::string>();
  return node.dump().substr(0, 60);
}

// The regex splits a pre_tokenizer performs, in order (pattern_pretokenizer.hpp): ByteLevel
// alone (GPT-2's regex), or a Sequence of Split / Digits steps ending in ByteLevel. Anything
// else is refused naming the step, since encoding would differ.
std::vector<std::string> pretokenizer_patterns_of(const json& pre, const std::string& source) {
  std::vector<json> steps;
  if (json_type(pre) == "Sequence" && pre.contains("pretokenizers") &&
      pre["pretokenizers"].is_array()) {
    for (const json& step : pre["pretokenizers"]) steps.push_back(step);
  } else {
    steps.push_back(pre);
  }
  std::vector<std::string> patterns;
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& step = steps[i];
    const std::string type = json_type(step);
    const std::string where = "pre_tokenizer step " + std::to_string(i) + " (" + type + ")";
    const bool last = i + 1 == steps.size();
    if (type == "ByteLevel") {
      if (!last) fail(source, where + " must be the last step");
      if (json_true(step, "add_prefix_space"))
        fail(source, where + ": add_prefix_space is true; only false is supported");
      if (!step.contains("use_regex") || json_true(step, "use_regex"))
        patterns.push_back(kGpt2HfPattern);
      return patterns;
    }
    if (last) break;
    if (type == "Digits") {
      patterns.push_back(hf_digits_pattern(json_true(step, "individual_digits")));
    } else if (type == "Split") {
      const json pattern = step.value("pattern", json());
      if (!pattern.is_object() || !pattern.contains("Regex") || !pattern["Regex"].is_string())
        fail(source, where + ": only a {\"Regex\": ...} pattern is supported, found " +
                         pattern.dump().substr(0, 80));
      if (step.value("behavior", std::string()) != "Isolated" || json_true(step, "invert"))
        fail(source, where + ": only behavior \"Isolated\" without invert is supported, found " +
                         step.value("behavior", std::string("?")));
      patterns.push_back(pattern["Regex"].get<std::string>());
    } else {
      fail(source, where +
                       " is not supported (supported: Split with a Regex, Digits, then "
                       "ByteLevel)");
    }
  }
  fail(source, "pre_tokenizer is '" + json_type(pre) +
                   "'; expected ByteLevel, or a Sequence of Split/Digits steps ending in "
                   "ByteLevel (a byte-level BPE)");
}

}  // namespace

PublishedVocabulary load_gpt2_vocabulary(const std::string& encoder_json_path,
                                         const std::string& vocab_bpe_path,
                                         const std::vector<std::string>& special_texts) {
  const json encoder = parse_json(
      read_whole_file(encoder_json_path, "GPT-2 encoder.json (vocab_file)"), encoder_json_path);
  if (!encoder.is_object()) fail(encoder_json_path, "expected a JSON object {\"token\": id, ...}");
  std::vector<std::pair<std::string, int64_t>> entries;
  entries.reserve(encoder.size());
  for (auto it = encoder.begin(); it != encoder.end(); ++it) {
    if (!it.value().is_number_integer())
      fail(encoder_json_path, "the id of '" + it.key() + "' is not an integer");
    entries.emplace_back(it.key(), it.value().get<int64_t>());
  }
  std::vector<PublishedSpecial> specials;
  for (const std::string& text : special_texts) {
    auto it = encoder.find(gpt2_bytes_to_text(text));
    if (it == encoder.end()) {
      fail(encoder_json_path,
           "special token '" + text +
               "' (from special_tokens) is not in the file; list only tokens it has");
    }
    specials.push_back(PublishedSpecial{text, static_cast<int32_t>(it.value().get<int64_t>())});
  }
  // encoder.py: bpe_data.split('\n')[1:-1], each line split on whitespace. Hugging Face
  // skips lines starting with "#version". Both skip the header; empty lines are skipped.
  const std::string merges_text = read_whole_file(vocab_bpe_path, "GPT-2 vocab.bpe (merges_file)");
  std::vector<MergeLine> merges;
  std::istringstream lines(merges_text);
  std::string line;
  size_t number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (number == 1 && line.rfind("#version", 0) == 0)) continue;
    merges.push_back(split_merge_line(line, number, vocab_bpe_path));
  }
  return build_vocabulary(entries, merges, specials, encoder_json_path + " + " + vocab_bpe_path,
                          vocab_bpe_path);
}

PublishedVocabulary load_hf_tokenizer_json(const std::string& path) {
  return parse_hf_tokenizer_json(read_whole_file(path, "tokenizer.json (tokenizer_json)"), path);
}

PublishedVocabulary parse_hf_tokenizer_json(std::string_view json_text, const std::string& source) {
  const json root = parse_json(json_text, source);
  if (!root.is_object() || !root.contains("model"))
    fail(source, "expected a Hugging Face tokenizer.json with a \"model\"");
  const json& model = root["model"];
  if (json_type(model) != "BPE")
    fail(source, "model.type is '" + json_type(model) + "'; only \"BPE\" is supported");
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      model["dropout"].get<double>() != 0.0) {
    fail(source,
         "model.dropout is set; BPE dropout is a training-time randomisation and is not supported");
  }
  if (json_true(model, "byte_fallback"))
    fail(source, "model.byte_fallback is true; not supported (GPT-2 family has false)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (json_nonempty_string(model, key))
      fail(source, std::string("model.") + key + " is set; not supported for byte-level BPE");
  }
  if (root.contains("normalizer") && !root["normalizer"].is_null()) {
    fail(source, "has normalizer '" + json_type(root["normalizer"]) +
                     "'; only tokenizers without one are supported");
  }
  const std::vector<std::string> patterns =
      pretokenizer_patterns_of(root.value("pre_tokenizer", json()), source);
  if (root.contains("decoder") && !root["decoder"].is_null() &&
      json_type(root["decoder"]) != "ByteLevel") {
    fail(source, "decoder is '" + json_type(root["decoder"]) + "'; only ByteLevel is supported");
  }
  if (!model.contains("vocab") || !model["vocab"].is_object())
    fail(source, "model.vocab is missing or not an object");
  std::vector<std::pair<std::string, int64_t>> entries;
  entries.reserve(model["vocab"].size());
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    if (!it.value().is_number_integer())
      fail(source, "model.vocab: the id of '" + it.key() + "' is not an integer");
    entries.emplace_back(it.key(), it.value().get<int64_t>());
  }
  std::vector<MergeLine> merges;
  if (model.contains("merges")) {
    const json& list = model["merges"];
    if (!list.is_array()) fail(source, "model.merges is not an array");
    merges.reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      const json& m = list[i];
      if (m.is_string()) {  // "A B" (tokenizers < 0.20)
        merges.push_back(split_merge_line(m.get<std::string>(), i + 1, source + " model.merges"));
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() &&
                 m[1].is_string()) {  // ["A", "B"]
        merges.push_back(MergeLine{m[0].get<std::string>(), m[1].get<std::string>(), i + 1});
      } else {
        fail(source,
             "model.merges[" + std::to_string(i) + "] is neither \"A B\" nor [\"A\", \"B\"]");
      }
    }
  }
  std::vector<PublishedSpecial> specials;
  if (root.contains("added_tokens") && root["added_tokens"].is_array()) {
    for (const json& token : root["added_tokens"]) {
      if (!token.contains("id") || !token.contains("content") || !token["content"].is_string()) {
        fail(source, "an added_tokens entry lacks id or content");
      }
      const std::string content = token["content"].get<std::string>();
      for (const char* key : {"lstrip", "rstrip", "single_word"}) {
        if (json_true(token, key))
          fail(source, "added token '" + content + "' has " + key + " = true; not supported");
      }
      specials.push_back(PublishedSpecial{content, token["id"].get<int32_t>()});
    }
  }
  PublishedVocabulary vocab = build_vocabulary(entries, merges, specials, source, source);
  if (!(patterns.size() == 1 && patterns[0] == kGpt2HfPattern))
    vocab.pretokenizer_patterns = patterns;
  if (!vocab.pretokenizer_patterns.empty())
    PatternPreTokenizer compiles(vocab.pretokenizer_patterns);  // refuses a bad pattern now
  vocab.ignore_merges = json_true(model, "ignore_merges");
  return vocab;
}

void validate_published_vocabulary(const PublishedVocabulary& vocab) {
  const std::string& source = vocab.source.empty() ? std::string("vocabulary") : vocab.source;
  const auto size = static_cast<int64_t>(vocab.token_bytes.size());
  auto check_id = [&](int64_t id, const std::string& what) {
    if (id < 0 || id >= size)
      fail(source,
           what + " id " + std::to_string(id) + " outside [0, " + std::to_string(size) + ")");
  };
  for (int b = 0; b < 256; ++b) {
    if (vocab.byte_ids[static_cast<size_t>(b)] == -1) continue;  // no token: dropped
    check_id(vocab.byte_ids[static_cast<size_t>(b)], "byte");
    if (vocab.token_bytes[static_cast<size_t>(vocab.byte_ids[static_cast<size_t>(b)])] !=
        std::string(1, static_cast<char>(b))) {
      fail(source, "the token of byte " + std::to_string(b) + " does not spell that byte");
    }
  }
  for (size_t r = 0; r < vocab.merges.size(); ++r) {
    const PublishedMerge& m = vocab.merges[r];
    check_id(m.left, "merge");
    check_id(m.right, "merge");
    check_id(m.result, "merge");
    if (vocab.token_bytes[static_cast<size_t>(m.left)] +
            vocab.token_bytes[static_cast<size_t>(m.right)] !=
        vocab.token_bytes[static_cast<size_t>(m.result)]) {
      fail(source, "merge " + std::to_string(r) + " does not spell its result token");
    }
  }
  for (const PublishedSpecial& s : vocab.specials) {
    check_id(s.id, "special token");
    if (s.text.empty()) fail(source, "a special token has empty text");
  }
}

namespace {

// JSON string literal (quotes and escapes) of UTF-8 text.
std::string json_quoted(const std::string& text) { return json(text).dump(); }

// The vocabulary object {"token": id, ...} in id order, and the merges ["A B", ...], written
// by hand: nlohmann's ordered_json looks keys up linearly, quadratic for 50k tokens.
struct VocabText {
  std::string vocab;                // without braces, one entry per line, indented
  std::vector<std::string> merges;  // "A B" texts
  std::vector<std::pair<std::string, int32_t>>
      encoder_entries;  // (mapped text, id), specials included
};

VocabText vocab_text(const PublishedVocabulary& vocab) {
  validate_published_vocabulary(vocab);
  std::vector<char> is_special(vocab.token_bytes.size(), 0);
  for (const PublishedSpecial& s : vocab.specials) is_special[static_cast<size_t>(s.id)] = 1;
  VocabText out;
  std::unordered_map<std::string, size_t> seen;
  seen.reserve(vocab.token_bytes.size());
  for (size_t id = 0; id < vocab.token_bytes.size(); ++id) {
    const std::string text = gpt2_bytes_to_text(vocab.token_bytes[id]);
    auto [it, inserted] = seen.emplace(text, id);
    if (!inserted) {
      if (is_special[id] != 0)
        continue;  // a special spelled like a token keeps only its added_tokens entry
      fail(vocab.source,
           "ids " + std::to_string(it->second) + " and " + std::to_string(id) +
               " spell the same bytes; tokenizer.json identifies tokens by text, so this "
               "vocabulary cannot be written as one");
    }
    if (!out.vocab.empty()) out.vocab += ",\n";
    out.vocab += "      " + json_quoted(text) + ": " + std::to_string(id);
    out.encoder_entries.emplace_back(text, static_cast<int32_t>(id));
  }
  out.merges.reserve(vocab.merges.size());
  for (const PublishedMerge& m : vocab.merges) {
    out.merges.push_back(gpt2_bytes_to_text(vocab.token_bytes[static_cast<size_t>(m.left)]) + " " +
                         gpt2_bytes_to_text(vocab.token_bytes[static_cast<size_t>(m.right)]));
  }
  return out;
}

}  // namespace

std::string hf_tokenizer_json_text(const PublishedVocabulary& vocab) {
  const VocabText body = vocab_text(vocab);
  const std::string byte_level =
      R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})";
  // A pattern sequence: one Split per pattern, then ByteLevel without its own regex.
  std::string pre_tokenizer = byte_level;
  if (!vocab.pretokenizer_patterns.empty()) {
    pre_tokenizer = R"({"type": "Sequence", "pretokenizers": [)";
    for (const std::string& pattern : vocab.pretokenizer_patterns)
      pre_tokenizer += R"({"type": "Split", "pattern": {"Regex": )" + json_quoted(pattern) +
                       R"(}, "behavior": "Isolated", "invert": false}, )";
    pre_tokenizer +=
        R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})";
  }
  std::string text =
      "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  "
      "\"added_tokens\": [";
  for (size_t i = 0; i < vocab.specials.size(); ++i) {
    text += (i == 0 ? "\n" : ",\n");
    text +=
        "    {\"id\": " + std::to_string(vocab.specials[i].id) +
        ", \"content\": " + json_quoted(vocab.specials[i].text) +
        R"(, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true})";
  }
  text += vocab.specials.empty() ? "],\n" : "\n  ],\n";
  text += "  \"normalizer\": null,\n";
  text += "  \"pre_tokenizer\": " + pre_tokenizer + ",\n";
  text += "  \"post_processor\": " + byte_level + ",\n";
  text += "  \"decoder\": " + byte_level + ",\n";
  text +=
      "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n"
      "    \"continuing_subword_prefix\": \"\",\n    \"end_of_word_suffix\": \"\",\n    "
      "\"fuse_unk\": false,\n"
      "    \"byte_fallback\": false,\n    \"ignore_merges\": " +
      std::string(vocab.ignore_merges ? "true" : "false") + ",\n    \"vocab\": {\n";
  text += body.vocab;
  text += "\n    },\n    \"merges\": [";
  for (size_t i = 0; i < body.merges.size(); ++i) {
    text += (i == 0 ? "\n      " : ",\n      ") + json_quoted(body.merges[i]);
  }
  text += body.merges.empty() ? "]\n  }\n}\n" : "\n    ]\n  }\n}\n";
  return text;
}

void write_hf_tokenizer_json(const PublishedVocabulary& vocab, const std::string& path) {
  patchbay::write_file_atomically(path, hf_tokenizer_json_text(vocab));
}

void write_gpt2_files(const PublishedVocabulary& vocab, const std::string& encoder_json_path,
                      const std::string& vocab_bpe_path) {
  VocabText body = vocab_text(vocab);
  // encoder.json lists every id, specials included (GPT-2's has <|endoftext|> = 50256).
  std::unordered_set<std::string> present;
  for (const auto& entry : body.encoder_entries) present.insert(entry.first);
  for (const PublishedSpecial& s : vocab.specials) {
    const std::string text = gpt2_bytes_to_text(s.text);
    if (present.insert(text).second) body.encoder_entries.emplace_back(text, s.id);
  }
  std::string encoder = "{";
  for (size_t i = 0; i < body.encoder_entries.size(); ++i) {
    if (i != 0) encoder += ", ";
    encoder += json_quoted(body.encoder_entries[i].first) + ": " +
               std::to_string(body.encoder_entries[i].second);
  }
  encoder += "}";
  std::string merges = "#version: 0.2\n";
  for (const std::string& line : body.merges) merges += line + "\n";
  patchbay::write_file_atomically(encoder_json_path, encoder);
  patchbay::write_file_atomically(vocab_bpe_path, merges);
}

}  // namespace patchbay_bpe
