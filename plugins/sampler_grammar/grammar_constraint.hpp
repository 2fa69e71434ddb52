// grammar: a logits processor that keeps only the tokens whose bytes can continue a string of
// a grammar (llama.cpp GBNF, gbnf_parser.hpp) or a regular expression (regex_to_gbnf.hpp),
// and allows an end-of-sequence token only where the text so far is a complete sentence.
//
// Config (exactly one of gbnf, gbnf_file, regex):
//   [[generate.chain]]
//   name = "grammar"
//   gbnf_file = "configs/grammars/json.gbnf"    # or gbnf = "root ::= ..." or regex = "[0-9]+"
//   root = "root"                              # start rule of a GBNF grammar
// Put it first in the chain, so truncation (top_k, top_p) chooses among allowed tokens.
//
// Sampler interface 1.1: it needs the vocabulary (PB_SAMPLER_CAP_NEEDS_VOCABULARY); the
// grammar is parsed at create (a syntax error fails the create with line and column), the
// token index (token_index.hpp) is built in set_vocabulary. State per sequence: the
// automaton state and whether an end-of-sequence token was accepted; accept() advances it by
// the token's bytes (a token the grammar cannot read is PB_STATUS_INVALID_ARGUMENT), reset()
// returns to the start, clone() copies the state and shares the index (beam search).
// The generated text only is constrained (the prompt is not parsed).
#ifndef PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_GRAMMAR_CONSTRAINT_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_GRAMMAR_CONSTRAINT_HPP_

#include <memory>
#include <string>

#include "grammar_rules.hpp"
#include "patchbay/sampler.hpp"
#include "token_index.hpp"

namespace sampler_grammar {

class GrammarConstraint : public patchbay::Sampler {
 public:
  static constexpr uint64_t kCapabilities =
      PB_SAMPLER_CAP_PROCESSOR | PB_SAMPLER_CAP_STATEFUL | PB_SAMPLER_CAP_NEEDS_VOCABULARY;
  GrammarConstraint(const patchbay::Host&, const patchbay::ConfigView& config);
  // From source text: kind "gbnf" or "regex" (tests, benchmarks).
  GrammarConstraint(const std::string& kind, const std::string& text,
                    const std::string& root = "root");

  void set_vocabulary(const patchbay::SamplerVocabulary& vocabulary) override;
  void apply(std::span<float> logits, std::span<const int32_t> history, size_t prompt_len) override;
  void accept(int32_t token) override;
  void reset() override;

  // The text so far is a complete sentence of the grammar.
  bool accepting() const;
  const std::shared_ptr<GrammarIndex>& index() const { return index_; }

 private:
  void require_index(const char* operation) const;

  std::shared_ptr<const Grammar> grammar_;  // immutable, shared by clones
  std::shared_ptr<GrammarIndex> index_;     // memo only (answers never change); locks inside
  int32_t state_ = GrammarAutomaton::kDead;
  bool finished_ = false;
};

inline constexpr pb_config_field kGrammarFields[] = {
    patchbay::Field::string("gbnf", "\"\"", "grammar text in llama.cpp GBNF notation"),
    patchbay::Field::string("gbnf_file", "\"\"",
                            "file holding a GBNF grammar (e.g. configs/grammars/json.gbnf)"),
    patchbay::Field::string("regex", "\"\"",
                            "regular expression the whole generated text must match"),
    patchbay::Field::string("root", "\"root\"", "start rule of the GBNF grammar"),
};
inline constexpr pb_component_descriptor kGrammar =
    patchbay::make_sampler_component<GrammarConstraint>(
        "grammar", "1.0.0",
        "keeps tokens that continue a GBNF grammar or regex; EOS only when complete",
        kGrammarFields);

}  // namespace sampler_grammar

#endif  // PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_GRAMMAR_CONSTRAINT_HPP_
