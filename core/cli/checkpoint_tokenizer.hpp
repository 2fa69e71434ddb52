// The tokenizer file a checkpoint's run saved, for the commands that load a run (generate,
// eval --tasks).
#pragma once

#include <filesystem>

#include "train/checkpoint.hpp"

namespace patchbay::cli {

// The stored path, else the same name beside the run's checkpoints/ folder (a run directory
// that was moved); throws Error(kNotFound) naming both places.
std::filesystem::path tokenizer_file_of(const train::Checkpoint& checkpoint);

}  // namespace patchbay::cli
