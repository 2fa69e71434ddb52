// GrammarConstraint (see grammar_constraint.hpp).
#include "grammar_constraint.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "gbnf_parser.hpp"
#include "patchbay/files.hpp"
#include "regex_to_gbnf.hpp"

namespace sampler_grammar {
namespace {

using patchbay::PluginError;

Grammar compile(const std::string& kind, const std::string& text, const std::string& root,
                const std::string& source) {
  try {
    return kind == "regex" ? compile_regex(text) : parse_gbnf(text, root);
  } catch (const GrammarSyntaxError& e) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, "grammar: " + source + ": " + e.what());
  }
}

// A grammar file's text, refused past kMaxGrammarFileBytes (a device such as /dev/zero, or a
// wrong path to a large file, would otherwise be read without end).
constexpr size_t kMaxGrammarFileBytes = size_t{16} << 20;

std::string read_grammar_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr)
    throw PluginError(PB_STATUS_IO_ERROR,
                      "grammar: cannot open gbnf_file '" + path + "': " + std::strerror(errno));
  std::string text;
  char chunk[1 << 16];
  size_t n = 0;
  while (text.size() <= kMaxGrammarFileBytes && (n = std::fread(chunk, 1, sizeof chunk, f)) > 0)
    text.append(chunk, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed)
    throw PluginError(PB_STATUS_IO_ERROR, "grammar: error while reading gbnf_file '" + path + "'");
  if (text.size() > kMaxGrammarFileBytes)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, "grammar: gbnf_file '" + path +
                                                      "' is larger than " +
                                                      std::to_string(kMaxGrammarFileBytes >> 20) +
                                                      " MiB; a grammar is a short text file");
  return text;
}

}  // namespace

GrammarConstraint::GrammarConstraint(const patchbay::Host&, const patchbay::ConfigView& config) {
  const std::string gbnf = config.get_string("gbnf");
  const std::string file = config.get_string("gbnf_file");
  const std::string regex = config.get_string("regex");
  const int given = (gbnf.empty() ? 0 : 1) + (file.empty() ? 0 : 1) + (regex.empty() ? 0 : 1);
  if (given != 1) {
    throw PluginError(
        PB_STATUS_INVALID_ARGUMENT,
        "grammar: give exactly one of gbnf (grammar text), gbnf_file (a .gbnf file) or regex; " +
            std::string(given == 0 ? "none was given" : "several were given"));
  }
  const std::string root = config.get_string("root");
  if (!regex.empty()) {
    grammar_ = std::make_shared<const Grammar>(compile("regex", regex, root, "regex"));
  } else if (!file.empty()) {
    grammar_ =
        std::make_shared<const Grammar>(compile("gbnf", read_grammar_file(file), root, file));
  } else {
    grammar_ = std::make_shared<const Grammar>(compile("gbnf", gbnf, root, "gbnf"));
  }
}

GrammarConstraint::GrammarConstraint(const std::string& kind, const std::string& text,
                                     const std::string& root)
    : grammar_(std::make_shared<const Grammar>(compile(kind, text, root, kind))) {}

void GrammarConstraint::set_vocabulary(const patchbay::SamplerVocabulary& vocabulary) {
  std::vector<std::string> bytes(vocabulary.size());
  std::vector<uint8_t> ends(vocabulary.size());
  for (size_t id = 0; id < vocabulary.size(); ++id) {
    ends[id] = vocabulary.end_of_sequence(id) ? 1 : 0;
    if (ends[id] == 0) bytes[id] = std::string(vocabulary.bytes(id));
  }
  try {
    index_ = std::make_shared<GrammarIndex>(*grammar_, std::move(bytes), std::move(ends));
  } catch (const std::runtime_error& e) {  // a grammar too deep to expand (kMaxExpansionDepth)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, std::string("grammar: ") + e.what());
  }
  if (index_->initial_state() == GrammarAutomaton::kDead) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, "grammar: the start rule matches nothing");
  }
  reset();
}

void GrammarConstraint::require_index(const char* operation) const {
  if (!index_) {
    throw PluginError(
        PB_STATUS_INVALID_ARGUMENT,
        std::string("grammar: ") + operation +
            " before set_vocabulary: the host must hand over the token bytes (sampler interface "
            "1.1; patchbay generate does)");
  }
}

void GrammarConstraint::apply(std::span<float> logits, std::span<const int32_t>, size_t) {
  require_index("apply");
  if (logits.size() != index_->vocab()) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "grammar: logits have " + std::to_string(logits.size()) +
                          " entries but the vocabulary has " + std::to_string(index_->vocab()));
  }
  for (size_t id = 0; id < logits.size(); ++id) {
    if (std::isnan(logits[id]) || logits[id] == INFINITY) {
      throw PluginError(PB_STATUS_INVALID_ARGUMENT, "grammar: logit " + std::to_string(id) +
                                                        " is " +
                                                        (std::isnan(logits[id]) ? "NaN" : "+inf") +
                                                        "; logits must be finite or -inf");
    }
  }
  size_t finite = 0;
  try {
    finite = index_->mask_logits(state_, finished_, logits);
  } catch (const std::runtime_error& e) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, std::string("grammar: ") + e.what());
  }
  if (finite == 0) {
    throw PluginError(
        PB_STATUS_INVALID_ARGUMENT,
        finished_ ? "grammar: the sequence ended and no end-of-sequence token is left"
                  : "grammar: no token that continues the grammar is left (either the vocabulary "
                    "cannot spell the next character, or an earlier processor removed every "
                    "allowed token: put grammar first in the chain)");
  }
}

void GrammarConstraint::accept(int32_t token) {
  require_index("accept");
  if (token < 0 || static_cast<size_t>(token) >= index_->vocab()) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "grammar: token " + std::to_string(token) + " is out of range");
  }
  if (index_->end_of_sequence(token)) {
    if (!finished_ && !index_->accepting(state_)) {
      throw PluginError(PB_STATUS_INVALID_ARGUMENT, "grammar: end-of-sequence token " +
                                                        std::to_string(token) +
                                                        " before the grammar is complete");
    }
    finished_ = true;
    return;
  }
  if (finished_) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, "grammar: token " + std::to_string(token) +
                                                      " after the end-of-sequence token");
  }
  int32_t next = GrammarAutomaton::kDead;
  try {
    next = index_->advance(state_, token);
  } catch (const std::runtime_error& e) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, std::string("grammar: ") + e.what());
  }
  if (next == GrammarAutomaton::kDead) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, "grammar: token " + std::to_string(token) +
                                                      " cannot continue the grammar here");
  }
  state_ = next;
}

void GrammarConstraint::reset() {
  finished_ = false;
  if (index_) state_ = index_->initial_state();
}

bool GrammarConstraint::accepting() const {
  require_index("accepting");
  return index_->accepting(state_);
}

}  // namespace sampler_grammar
