// The table of training objectives and the factory the trainer calls; see objective.hpp.
// Adding an objective: a file defining its TrainingObjective and its ObjectiveEntry, and one
// line below (README.md in this folder).
#include "train/objective.hpp"

#include "common/error.hpp"
#include "config/closest_names.hpp"

namespace patchbay::train {

const std::vector<ObjectiveEntry>& objective_entries() {
  static const std::vector<ObjectiveEntry> entries = {
      causal_lm_objective_entry(),    // "clm": objective_clm.cpp
      masked_lm_objective_entry(),    // "mlm": objective_mlm.cpp
      instruction_objective_entry(),  // "sft": objective_sft.cpp
  };
  return entries;
}

const ObjectiveEntry& find_objective(const std::string& name) {
  std::vector<std::string> names;
  for (const ObjectiveEntry& entry : objective_entries()) {
    if (entry.name == name) return entry;
    names.push_back(entry.name);
  }
  std::string offer;
  for (const ObjectiveEntry& entry : objective_entries())
    offer += "\n  " + entry.name + ": " + entry.summary;
  const std::vector<std::string> close = config::closest_names(name, names);
  throw Error(ErrorKind::kInvalidArgument,
              "train.objective = \"" + name + "\" is not a training objective" +
                  (close.empty() ? std::string() : " (did you mean \"" + close.front() + "\"?)") +
                  "; the objectives are:" + offer);
}

std::string objective_name(const config::ResolvedConfig& config) {
  const toml::node* node = config.find("train.objective");
  return node != nullptr ? node->value<std::string>().value_or("clm") : "clm";
}

std::unique_ptr<TrainingObjective> make_objective(const config::ResolvedConfig& config,
                                                  const TrainOptions& options,
                                                  const runtime::TokenizerHandle& tokenizer) {
  return find_objective(options.objective).make(ObjectiveContext{config, options, tokenizer});
}

}  // namespace patchbay::train
