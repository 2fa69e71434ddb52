// Registers the geglu_feedforward plugin: its one component, feed-forward "geglu".
#include <patchbay/plugin.hpp>

#include "geglu.hpp"

PATCHBAY_PLUGIN("geglu-feedforward", "1.0.0", PATCHBAY_COMPONENT_LIST(&geglu_feedforward::kGeglu));
