// "clm": next-token prediction of a causal LM (model.causal = true), the default objective.
// A window of T + 1 ids gives inputs = window[0 .. T) and targets = window[1 .. T] (every
// position carries loss in training; evaluation leaves special-token targets out, as they
// stand for no bytes: evaluator.hpp). Samples continue a prompt.
#include <string>

#include "common/error.hpp"
#include "train/objective.hpp"

namespace patchbay::train {

namespace {

// " (model.causal set at configs/x.toml:12)", or "" when the key has no recorded source.
std::string where(const config::ResolvedConfig& config, const std::string& key) {
  const std::string location = config.locate(key).to_string();
  return location.empty() ? "" : " (" + key + " set at " + location + ")";
}

class CausalLmObjective final : public TrainingObjective {
 public:
  const std::string& name() const override { return name_; }

  Batch training_batch(const TokenWindows& windows, uint64_t, int64_t, int64_t) const override {
    return causal_batch(windows);
  }

  Batch validation_batch(const TokenWindows& windows, int64_t) const override {
    return causal_batch(windows);
  }

  ObjectiveEvaluation evaluate(model::LanguageModel& model, const ValidationWindows& windows,
                               const EvalSettings& settings) const override {
    ObjectiveEvaluation result;
    result.eval = evaluate_batches(
        model, [&](int64_t b) { return validation_batch(windows(b), b); }, settings);
    return result;
  }

  bool makes_samples() const override { return true; }

  bool packs_segments() const override { return true; }  // causal_batch keeps them

  std::string batch_rule() const override {
    return "next token: inputs window[0, T), targets window[1, T]";
  }

 private:
  std::string name_ = "clm";
};

void check_causal_model(const config::ResolvedConfig& config) {
  refuse_encoder_decoder(config, "clm");
  const toml::node* causal = config.find("model.causal");
  if (causal != nullptr && causal->is_boolean() && !causal->as_boolean()->get())
    throw Error(
        ErrorKind::kInvalidArgument,
        "model.causal = false builds a bidirectional model, whose every position sees the "
        "tokens after it: next-token prediction (train.objective = \"clm\", the default) would "
        "read its own targets. Set train.objective = \"mlm\" (masked-token prediction), or "
        "model.causal = true" +
            where(config, "model.causal"));
}

}  // namespace

ObjectiveEntry causal_lm_objective_entry() {
  ObjectiveEntry entry;
  entry.name = "clm";
  entry.summary = "next-token prediction of a causal LM (model.causal = true)";
  entry.check = check_causal_model;
  entry.make = [](const ObjectiveContext&) { return std::make_unique<CausalLmObjective>(); };
  return entry;
}

}  // namespace patchbay::train
