// Regex constraints (plugins/sampler_grammar/regex_to_gbnf.cpp): translation to GBNF, the
// GBNF parser on the translation, and the matcher on the regex text itself.
#include <stdexcept>

#include "fuzz_input.hpp"
#include "gbnf_parser.hpp"
#include "grammar_automaton.hpp"
#include "regex_to_gbnf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view regex = patchbay_fuzz::text(data, size);
  try {
    const sampler_grammar::Grammar g = sampler_grammar::compile_regex(regex);
    sampler_grammar::GrammarAutomaton automaton(g);
    (void)automaton.accepting(automaton.step_bytes(automaton.initial_state(), regex));
  } catch (const sampler_grammar::GrammarSyntaxError&) {
  } catch (const std::runtime_error& e) {
    if (std::string_view(e.what()).find("rules in a row") == std::string_view::npos) throw;
  }
  return 0;
}
