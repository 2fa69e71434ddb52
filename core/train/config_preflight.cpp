// The checks of config_preflight.hpp, each the one `patchbay train` makes, in its order.
#include "train/config_preflight.hpp"

#include <string>

#include "common/error.hpp"
#include "config/component_view.hpp"
#include "model/encoder_decoder.hpp"
#include "model/language_model.hpp"
#include "runtime/registry.hpp"
#include "train/objective.hpp"
#include "train/train_config.hpp"
#include "train/training_tasks.hpp"

namespace patchbay::train {

void preflight_training_config(const config::ResolvedConfig& config, runtime::Registry& registry,
                               const config::ComponentSchemaLookup& lookup) {
  // vocab_size comes from the tokenizer at training time; any positive value checks the rest.
  const model::ModelOptions model_options =
      model::model_architecture(config) == "encoder_decoder"
          ? model::encoder_decoder_options_from_config(config, 1).base
          : model::model_options_from_config(config, 1);
  const TrainOptions options = train_options_from_config(config);
  if (options.seq_len > model_options.context_length)
    throw Error(ErrorKind::kInvalidArgument,
                "train.seq_len (" + std::to_string(options.seq_len) + ", " +
                    config.locate("train.seq_len").to_string() +
                    ") exceeds model.context_length (" +
                    std::to_string(model_options.context_length) +
                    "); lower train.seq_len or raise model.context_length");
  // The chosen objective's own checks (objective vs model.causal, its rates).
  const ObjectiveEntry& objective = find_objective(objective_name(config));
  if (objective.check) objective.check(config);
  const config::SelectedComponent optimizer =
      config::select_component(config, make_training_schema(), lookup, "optimizer");
  (void)registry.create(PB_KIND_OPTIMIZER, optimizer.name,
                        *optimizer.config.view());  // its own checks
  check_training_tasks(config);  // [eval] tasks resolve, read and build (training_tasks.hpp)
}

}  // namespace patchbay::train
