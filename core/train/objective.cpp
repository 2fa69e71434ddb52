// The table of training objectives and the factory the trainer calls; see objective.hpp.
// Adding an objective: a file defining its TrainingObjective and its ObjectiveEntry, and one
// line below (README.md in this folder).
#include "train/objective.hpp"

#include "common/error.hpp"
#include "config/closest_names.hpp"
#include "model/encoder_decoder.hpp"

namespace patchbay::train {

const std::vector<ObjectiveEntry>& objective_entries() {
  static const std::vector<ObjectiveEntry> entries = {
      causal_lm_objective_entry(),        // "clm": objective_clm.cpp
      masked_lm_objective_entry(),        // "mlm": objective_mlm.cpp
      instruction_objective_entry(),      // "sft": objective_sft.cpp
      span_corruption_objective_entry(),  // "span_corruption": objective_span_corruption.cpp
      seq2seq_objective_entry(),          // "seq2seq": objective_seq2seq.cpp
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

model::ForwardResult forward_batch(model::LanguageModel& model, const Batch& batch, bool training) {
  model::EncoderDecoderModel* seq2seq = model.encoder_decoder();
  if (batch.source.defined() && seq2seq == nullptr)
    throw Error(ErrorKind::kInvalidArgument,
                "the objective gives the model a source (encoder input), but the model is a "
                "single stack (model.architecture = \"single_stack\"); set model.architecture "
                "= \"encoder_decoder\", or choose train.objective = \"clm\" or \"mlm\"");
  if (seq2seq == nullptr)
    return batch.segment_ids.defined()
               ? model.forward_packed(batch.inputs, batch.segment_ids, training)
               : model.forward(batch.inputs, training);
  if (batch.segment_ids.defined())
    throw Error(ErrorKind::kInvalidArgument,
                "packed rows (segment ids) reached an encoder-decoder, which does not pack "
                "its batches; leave [data] pack_documents off for model.architecture = "
                "\"encoder_decoder\"");
  if (!batch.source.defined())
    throw Error(ErrorKind::kInvalidArgument,
                "the model is an encoder-decoder (model.architecture = \"encoder_decoder\") but "
                "the objective gives it no source; choose train.objective = "
                "\"span_corruption\" or \"seq2seq\"");
  return seq2seq->forward({batch.source, batch.source_padding, batch.inputs, batch.target_padding},
                          training);
}

ObjectiveEvaluation evaluate_target_tokens(const TrainingObjective& objective,
                                           model::LanguageModel& model,
                                           const ValidationWindows& windows,
                                           const EvalSettings& settings) {
  ObjectiveEvaluation result;
  result.eval = evaluate_batches(
      model, [&](int64_t b) { return objective.validation_batch(windows(b), b); }, settings);
  result.extra = {{"objective", objective.name()}};
  result.target_unit = "target token";
  return result;
}

void add_tokenizer_special_tokens(config::ResolvedConfig& config,
                                  const std::vector<std::string>& texts) {
  toml::table& root = config.table();
  if (!root.contains("tokenizer")) root.insert("tokenizer", toml::table{});
  toml::table* tokenizer = root["tokenizer"].as_table();
  if (tokenizer == nullptr) return;
  if (!tokenizer->contains("special_tokens"))
    tokenizer->insert("special_tokens", toml::array{"<|endoftext|>"});
  toml::array* specials = (*tokenizer)["special_tokens"].as_array();
  if (specials == nullptr) return;
  for (const std::string& text : texts) {
    bool listed = false;
    for (const toml::node& n : *specials) listed = listed || n.value<std::string>() == text;
    if (!listed) specials->push_back(text);
  }
}

void refuse_encoder_decoder(const config::ResolvedConfig& config, const std::string& objective) {
  if (model::model_architecture(config) != "encoder_decoder") return;
  const std::string location = config.locate("model.architecture").to_string();
  throw Error(
      ErrorKind::kInvalidArgument,
      "model.architecture = \"encoder_decoder\"" +
          (location.empty() ? std::string() : " (" + location + ")") +
          " needs a source for its encoder, which train.objective = \"" + objective +
          "\" does not give; choose train.objective = \"span_corruption\" or \"seq2seq\", or "
          "model.architecture = \"single_stack\"");
}

}  // namespace patchbay::train
