// optimizers_basic: registers the built-in optimizers (one file each).
#include <patchbay/plugin.hpp>

#include "adafactor.hpp"
#include "adamw.hpp"
#include "lion.hpp"
#include "sgd.hpp"

PATCHBAY_PLUGIN("optimizers_basic", "1.0.0",
                PATCHBAY_COMPONENT_LIST(&optimizers_basic::kAdamW, &optimizers_basic::kSgd,
                                        &optimizers_basic::kLion, &optimizers_basic::kAdafactor));
