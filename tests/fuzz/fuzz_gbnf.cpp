// GBNF parser and matcher (plugins/sampler_grammar): the input's first line picks the bytes to
// match, the rest is the grammar; a grammar that parses is compiled to the automaton and run.
#include <stdexcept>

#include "fuzz_input.hpp"
#include "gbnf_parser.hpp"
#include "grammar_automaton.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = patchbay_fuzz::text(data, size);
  const size_t newline = input.find('\n');
  const std::string_view sample =
      newline == std::string_view::npos ? std::string_view() : input.substr(0, newline);
  const std::string_view grammar =
      newline == std::string_view::npos ? input : input.substr(newline + 1);
  try {
    const sampler_grammar::Grammar g = sampler_grammar::parse_gbnf(grammar);
    sampler_grammar::GrammarAutomaton automaton(g);
    (void)automaton.accepting(automaton.step_bytes(automaton.initial_state(), sample));
  } catch (const sampler_grammar::GrammarSyntaxError&) {
  } catch (const std::runtime_error& e) {  // the matcher's documented depth and size limits only
    const std::string_view what = e.what();
    if (what.find("rules in a row") == std::string_view::npos &&
        what.find("simplify the grammar") == std::string_view::npos)
      throw;
  }
  return 0;
}
