// Registers the epsilon_sampler plugin: its one component, sampler processor "epsilon".
#include <patchbay/plugin.hpp>

#include "epsilon.hpp"

PATCHBAY_PLUGIN("epsilon-sampler", "1.0.0", PATCHBAY_COMPONENT_LIST(&epsilon_sampler::kEpsilon));
