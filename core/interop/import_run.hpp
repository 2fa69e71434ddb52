// The part of every import that does not depend on the source format: given the model's
// shape (hf_architecture.hpp), its tokenizer and a source of tensors under transformers' names,
// writes a run directory (config.toml, tokenizer.txt, checkpoints/step_0.safetensors) that
// eval, generate and `train --resume` accept. hf_import.cpp feeds it a safetensors directory,
// gguf_import.cpp a GGUF file.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/schema_registry.hpp"
#include "interop/hf_io.hpp"
#include "interop/hf_tensors.hpp"
#include "interop/hf_tokenizer.hpp"
#include "runtime/registry.hpp"

namespace patchbay::interop {

// Tensors under transformers' LLaMA / GPT-2 names (hf_tensors.hpp), f32 row-major.
class ImportTensorSource {
 public:
  virtual ~ImportTensorSource() = default;
  // The tensor `hf_name`, or false when the source has none. `found_as`: the name it was
  // found under (counted as used).
  virtual bool fetch(const std::string& hf_name, HostTensor* out, std::string* found_as) = 0;
  // The stored shape of `hf_name` (in the naming of HostTensor::shape) without reading or
  // converting its data; false when the source has none.
  virtual bool stored_shape(const std::string& hf_name, std::vector<int64_t>* shape,
                            std::string* found_as) const = 0;
  // Every tensor name the source holds, in the naming of `found_as`.
  virtual std::vector<std::string> names() const = 0;
  // Names that carry no parameters and may stay unused (rotary buffers, attention masks).
  virtual bool ignorable(const std::string& name) const = 0;
};

struct ImportedRunInputs {
  HfModelShape shape;
  PatchbayTokenizerFile tokenizer;
  std::string tokenizer_source;  // which file the tokenizer came from (messages)
  std::string origin;            // the imported file or directory, absolute (config comment)
  std::string origin_format;     // "Hugging Face LlamaForCausalLM", "GGUF llama", ...
  // Extra files to write into the run directory (name -> content), e.g. the chat template.
  std::map<std::string, std::string> extra_files;
  // A Patchbay export's training settings (TOML tables: data, optimizer, train) and seed, kept
  // so `eval` reads the same windows and `train --resume` the same batches; empty and none
  // otherwise (AdamW and the defaults).
  std::string training_toml;
  std::optional<int64_t> training_seed;
};

// Every Patchbay parameter of the model `shape` describes, by Patchbay name (blocks.i.attn.
// qkv.weight, ...), filled from the source by hf_tensor_rules (zeros where the source has no
// counterpart, e.g. LLaMA's absent biases). Throws Error(kInvalidArgument) naming a tensor
// missing from the source, a source tensor no rule uses, or a shape mismatch. `origin` names
// the source in messages. What `[train] init_from` needs from an HF directory or a GGUF file.
std::map<std::string, HostTensor> patchbay_tensors_from(const HfModelShape& shape,
                                                        ImportTensorSource& source,
                                                        const std::string& origin);

// The tensor sources of the two formats (hf_import.cpp, gguf_import.cpp). The GGUF source
// reads `file`, which must outlive it; it un-permutes the rotary rows of q and k.
std::unique_ptr<ImportTensorSource> hf_tensor_source(const std::filesystem::path& hf_dir);
class GgufFile;
std::unique_ptr<ImportTensorSource> gguf_tensor_source(const GgufFile& file,
                                                       const HfModelShape& shape);

// Throws Error(kInvalidArgument) for a tensor missing from the source, a source tensor no
// rule uses, a shape mismatch (named), a vocabulary mismatch, or a run directory that already
// holds a run (unless options.overwrite).
HfImportResult write_imported_run(const ImportedRunInputs& inputs, ImportTensorSource& tensors,
                                  const std::filesystem::path& run_dir, runtime::Registry& registry,
                                  const config::ComponentSchemaLookup& lookup,
                                  const HfImportOptions& options);

}  // namespace patchbay::interop
