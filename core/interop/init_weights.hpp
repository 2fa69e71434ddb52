// `[train] init_from` for every format Patchbay reads (docs/finetuning.md): a Patchbay run or
// checkpoint (core/train), a Hugging Face transformers directory (config.json + safetensors) or
// a GGUF file, each turned into Patchbay parameter names and f32 tensors with the same rules as
// `patchbay import` (import_run.hpp), without writing a run. `patchbay train` hands this reader
// to the trainer (TrainRequest::read_initial_weights).
#pragma once

#include <filesystem>

#include "train/fine_tuning.hpp"

namespace patchbay::interop {

// By what `path` is: a directory with config.json -> Hugging Face; a file starting with the
// magic "GGUF" -> GGUF; anything else -> train::read_checkpoint_weights. Throws the readers'
// errors (unknown architecture or quantisation, missing or mis-shaped tensors, named).
train::InitialWeights read_initial_weights(const std::filesystem::path& path);

}  // namespace patchbay::interop
