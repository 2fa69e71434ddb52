// `patchbay export RUN --merge-lora OUT/`: a LoRA run's checkpoint (adapters only, plus the
// reference to its base weights, train.init_from) as a plain run whose weights are
// W0 + (alpha/rank)·B·A (train/lora.hpp: LoraAdapters::merge_into_weights), so its logits equal
// the adapted model's (x·W0ᵀ + s·(x·Aᵀ)·Bᵀ) up to f32 rounding. OUT gets config.toml (the run's,
// without [train.lora] and train.init_from), tokenizer.txt and checkpoints/step_<N>.safetensors
// (every parameter, no optimizer state), which eval, generate, export --format hf and train
// (init_from or --resume) accept.
#pragma once

#include <filesystem>

#include "config/schema_registry.hpp"
#include "runtime/registry.hpp"
#include "train/fine_tuning.hpp"

namespace patchbay::train {

struct LoraMergeResult {
  std::filesystem::path checkpoint;  // OUT/checkpoints/step_<N>.safetensors
  int64_t step = 0;
  size_t adapters = 0;
};

// `run_or_checkpoint`: a LoRA run or one of its checkpoints. `read_base` reads train.init_from
// (empty: read_checkpoint_weights). Throws Error(kInvalidArgument) for a checkpoint without
// LoRA adapters, base weights that do not fit, or an OUT that already holds a run.
LoraMergeResult merge_lora_run(const std::filesystem::path& run_or_checkpoint,
                               const std::filesystem::path& out_dir, runtime::Registry& registry,
                               const config::ComponentSchemaLookup& lookup,
                               const InitialWeightsReader& read_base = {});

}  // namespace patchbay::train
