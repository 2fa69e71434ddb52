// What `patchbay config check` verifies beyond the schemas, so that a config it calls valid is
// not refused by `patchbay train` for a reason knowable before training (issue 39):
//   - the model options' own rules (n_heads divides d_model, ...; model_options_from_config);
//   - the [train] rules the schema cannot state (min_lr <= lr, warmup_steps <= max_steps;
//     train_options_from_config), and train.seq_len <= model.context_length;
//   - the chosen objective's own checks (objective.hpp: the objective against model.causal);
//   - the optimizer plugin's own checks of its options (it is created once, with no
//     parameters: sgd's nesterov without momentum, ...);
//   - [eval] tasks: every name or file resolves, reads and builds its items
//     (training_tasks.hpp), and the model is causal when there are any.
// The model itself is not built (that allocates its weights); its plugins check their layer
// options when `train` builds it.
#pragma once

#include "config/config_document.hpp"
#include "config/schema_registry.hpp"

namespace patchbay::runtime {
class Registry;
}

namespace patchbay::train {

// `config` is validated with defaults applied (validate_training_config). Throws
// patchbay::Error (kInvalidArgument or the plugin's refusal) naming the key and the rule.
void preflight_training_config(const config::ResolvedConfig& config, runtime::Registry& registry,
                               const config::ComponentSchemaLookup& lookup);

}  // namespace patchbay::train
