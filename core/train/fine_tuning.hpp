// Fine-tuning as host-side parameter mechanisms (docs/finetuning.md): starting a run from the
// weights of another model (`[train] init_from`) and freezing parameters by name
// (`[train] freeze`). Both act on the model's named parameters (model/language_model.hpp), so
// every plugin is covered without a change to it.
//
// init_from: only the weights are taken — the run starts at step 0 with a fresh optimizer and
// schedule. Every model parameter must be present with its shape; a missing, extra or
// mis-shaped tensor is an error naming it (all of them, so one edit fixes the config).
// freeze: a frozen parameter stops requiring a gradient (autograd computes none for it), is not
// handed to the optimizer (no state, no update, no weight decay) nor to the data-parallel
// gradient reducer (no all-reduce); it is still stored in checkpoints, so a resume restores it.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/tensor.hpp"
#include "model/language_model.hpp"

namespace patchbay::train {

// Weights to start from, by Patchbay parameter name (f32 on the host).
struct InitialWeights {
  std::map<std::string, engine::Tensor> tensors;
  std::string origin;  // what they were read from, for messages ("checkpoint runs/x/.../step_0")
};

// Reads init_from's weights. The trainer's default reads Patchbay runs and checkpoints
// (read_checkpoint_weights); `patchbay train` passes core/interop's reader, which adds Hugging
// Face directories and GGUF files (the train library cannot depend on interop, which uses it).
using InitialWeightsReader = std::function<InitialWeights(const std::filesystem::path&)>;

// A run directory, its checkpoints/ folder or a checkpoint file (train/checkpoint.hpp): its
// parameters, without the optimizer's state. Throws the checkpoint errors (kNotFound, kIo).
InitialWeights read_checkpoint_weights(const std::filesystem::path& path);

// Copies `weights` into the parameters in place. Throws Error(kInvalidArgument) listing every
// parameter the weights lack, every tensor no parameter takes, and every shape mismatch
// (tensor name, both shapes), naming weights.origin.
void load_initial_weights(const std::vector<model::NamedParameter>& parameters,
                          const InitialWeights& weights);

// Name patterns (freeze, LoRA targets). A pattern matches a parameter name when it matches the
// whole name or the part before a '.' (so "blocks.0" covers every tensor of block 0, "wte"
// covers wte.weight). Inside a pattern: '*' matches any run of characters (dots included), '?'
// one character, and "A-B" (two decimal numbers) one decimal number in [A, B] ("blocks.0-3.*").
// Aliases for Hugging Face habits: a leading "layers." reads as "blocks.", and "embedding"
// (or "embeddings") as the token and position embeddings (wte, wpe).
bool name_matches(const std::string& pattern, const std::string& name);

// The parameters each pattern selects. Throws Error(kInvalidArgument) for a pattern that
// matches no parameter, listing the names there are (`key` names the config key in messages).
std::vector<std::string> names_matching(const std::vector<std::string>& patterns,
                                        const std::vector<model::NamedParameter>& parameters,
                                        const std::string& key);

// Marks every parameter the patterns select as frozen (requires_grad false, gradient dropped).
// Returns the frozen names in parameter order. Patterns as names_matching.
std::vector<std::string> freeze_parameters(const std::vector<std::string>& patterns,
                                           const std::vector<model::NamedParameter>& parameters);

}  // namespace patchbay::train
