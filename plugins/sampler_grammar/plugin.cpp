// sampler_grammar: registers the grammar / regex constraint (grammar_constraint.hpp).
#include <patchbay/plugin.hpp>

#include "grammar_constraint.hpp"

PATCHBAY_PLUGIN("sampler_grammar", "1.0.0", PATCHBAY_COMPONENT_LIST(&sampler_grammar::kGrammar));
