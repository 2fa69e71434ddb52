// Per-source and whole evaluation of a mixture; see mixture_evaluation.hpp.
#include "train/mixture_evaluation.hpp"

#include <spdlog/spdlog.h>

#include <cmath>

#include "train/batches.hpp"

namespace patchbay::train {

ObjectiveEvaluation evaluate_mixture(const TrainingObjective& objective,
                                     model::LanguageModel& model, const TrainingData& data,
                                     const EvalSettings& settings, nlohmann::json& per_source) {
  ObjectiveEvaluation total;
  double loss_sum = 0;
  for (size_t i = 0; i < data.mixture.size(); ++i) {
    const MixtureData& m = data.mixture[i];
    const ValidationWindows windows = [&](int64_t b) {
      return validation_windows(m.val, b, settings.batches, settings.batch_size, settings.seq_len);
    };
    const ObjectiveEvaluation e = objective.evaluate(model, windows, settings);
    per_source["val_loss." + m.name] = e.eval.loss;
    per_source["val_bpb." + m.name] = e.eval.bits_per_byte;
    per_source["val_tokens." + m.name] = e.eval.tokens;
    spdlog::info("  source {}: val loss {:.4f}, {:.4f} bits/byte", m.name, e.eval.loss,
                 e.eval.bits_per_byte);
    if (i == 0) {
      total.extra = e.extra;
      total.summary = e.summary;
      total.eval.layer_stats = e.eval.layer_stats;
    }
    loss_sum += e.eval.loss * static_cast<double>(e.eval.tokens);
    total.eval.tokens += e.eval.tokens;
    total.eval.bytes += e.eval.bytes;
  }
  total.eval.loss =
      total.eval.tokens > 0 ? loss_sum / static_cast<double>(total.eval.tokens) : std::nan("");
  total.eval.perplexity = std::exp(total.eval.loss);
  total.eval.bits_per_byte =
      bits_per_byte(total.eval.loss, static_cast<uint64_t>(total.eval.tokens),
                    static_cast<uint64_t>(total.eval.bytes));
  return total;
}

}  // namespace patchbay::train
