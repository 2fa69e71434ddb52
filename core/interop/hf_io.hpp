// `patchbay export RUN --format hf OUT/` and `patchbay import HF_DIR RUN/`.
//
// Export writes, from a run's latest checkpoint (or a given one):
//   OUT/config.json              transformers config (hf_architecture.hpp)
//   OUT/model.safetensors        f32 tensors under transformers' names (hf_tensors.hpp),
//                                metadata {"format": "pt"}
//   OUT/generation_config.json   greedy by default, eos = the first special token
//   OUT/tokenizer.json, tokenizer_config.json, special_tokens_map.json (hf_tokenizer.hpp)
//   OUT/patchbay_tokenizer.txt   only when tokenizer.json cannot reproduce the ids (then the
//                                ids contract is this file, and patchbay_export.json says why)
//   OUT/patchbay_export.json     provenance: checkpoint, step, source revision, mapping notes
// Import turns such a directory (or any GPT-2 / LLaMA directory whose tokenizer maps) into a
// run directory that eval, generate and `train --resume` accept:
//   RUN/config.toml              resolved config: [tokenizer] file = RUN/tokenizer.txt (used as
//                                is, never retrained), the model tables, [optimizer] adamw and
//                                [train] defaults (change them with --set), [data] defaults
//   RUN/tokenizer.txt            the tokenizer in Patchbay's format
//   RUN/checkpoints/step_0.safetensors + latest   (train/checkpoint.hpp): the parameters, a
//                                fresh optimizer state, the same metadata a training run writes
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "config/schema_registry.hpp"
#include "interop/hf_architecture.hpp"
#include "runtime/registry.hpp"

namespace patchbay::interop {

struct HfExportResult {
  HfModelShape shape;
  std::filesystem::path checkpoint;
  int64_t step = 0;
  std::vector<std::filesystem::path> files;  // written, in order
  bool tokenizer_exact = false;              // tokenizer.json reproduces Patchbay's ids
  std::vector<std::string> notes;            // what the reader should know (tokenizer differences)
};

// Throws Error(kInvalidArgument) naming the component without a counterpart, Error(kNotFound)
// for a missing checkpoint or tokenizer file.
HfExportResult export_to_hf(const std::filesystem::path& run_or_checkpoint,
                            const std::filesystem::path& out_dir);

struct HfImportOptions {
  std::vector<std::string> overrides;  // --set key=value for the new run's config
  std::filesystem::path tokenizer;  // a Patchbay tokenizer file to use instead of the directory's
  bool overwrite = false;           // replace a run directory that already holds checkpoints
};

struct HfImportResult {
  HfModelShape shape;
  std::filesystem::path run_dir;
  std::filesystem::path checkpoint;
  std::string tokenizer_kind;
  std::string tokenizer_source;  // which file the tokenizer came from
  int64_t parameters = 0;
};

HfImportResult import_from_hf(const std::filesystem::path& hf_dir,
                              const std::filesystem::path& run_dir, runtime::Registry& registry,
                              const config::ComponentSchemaLookup& lookup,
                              const HfImportOptions& options = {});

}  // namespace patchbay::interop
