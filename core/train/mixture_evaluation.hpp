// Evaluation of a mixture ([[data.sources]]): each source's validation split scored on its
// own, and the whole as their token-weighted mean; see evaluate_mixture.
#pragma once

#include <nlohmann/json.hpp>

#include "model/language_model.hpp"
#include "train/evaluator.hpp"
#include "train/objective.hpp"
#include "train/training_data.hpp"

namespace patchbay::train {

// A mixture's evaluation: each source's validation windows scored on their own (its loss, bits
// per byte and tokens into `per_source` as "val_loss.<name>", ...), and the whole as the
// token-weighted mean over the sources (bits per byte over their bytes together). The
// objective's own fields are the first source's.
ObjectiveEvaluation evaluate_mixture(const TrainingObjective& objective,
                                     model::LanguageModel& model, const TrainingData& data,
                                     const EvalSettings& settings, nlohmann::json& per_source);

}  // namespace patchbay::train
