// A checkpoint's model ready to decode, for the commands that generate text (generate, chat):
// the stored config with --device applied, the run's plugins, its tokenizer (checked against
// the hash the checkpoint records), the weights, and a refusal for a model whose objective
// cannot continue text (a bidirectional one).
#pragma once

#include <memory>
#include <string>

#include "cli/command.hpp"
#include "cli/component_lookup.hpp"
#include "config/config_document.hpp"
#include "eval/chat_template.hpp"
#include "model/language_model.hpp"
#include "runtime/component_instance.hpp"
#include "train/checkpoint.hpp"

namespace patchbay::cli {

struct CheckpointModel {
  train::Checkpoint checkpoint;
  config::ResolvedConfig config;
  ComponentLookup components;  // keeps the plugins loaded while the model lives
  runtime::TokenizerHandle tokenizer;
  std::unique_ptr<model::LanguageModel> model;
};

// `path` is a checkpoint file or a run directory (its latest); `device` as --device gives it
// ("" = the config's); `weights_dtype` "f32" or "bf16" (weight matrices converted at load).
// open_checkpoint_run followed by build_checkpoint_model.
CheckpointModel load_checkpoint_model(const std::string& path, const GlobalOptions& global,
                                      const std::string& device, const std::string& weights_dtype);

// The first half: the checkpoint, its stored config with --device applied, the plugins and the
// tokenizer; `model` stays empty (an encoder-decoder run is decoded by its own path).
CheckpointModel open_checkpoint_run(const std::string& path, const GlobalOptions& global,
                                    const std::string& device);

// The second half: refuses a model whose objective cannot continue text, builds the
// single-stack model and loads the weights into run.model.
void build_checkpoint_model(CheckpointModel& run, const std::string& weights_dtype);

// The chat template for a run (chat, generate --chat): `given` (--template: a built-in name, a
// file or a directory) when not empty, else the run directory's chat_template.jinja or
// tokenizer_config.json (an imported model), else the template the run was instruction-tuned
// with (train.sft.template of its stored config). Throws Error(kInvalidArgument) saying how
// to give one when there is none.
eval::ChatTemplate chat_template_of_run(const CheckpointModel& run, const std::string& given);

}  // namespace patchbay::cli
