// Checkpoints: one safetensors file per checkpoint, self-describing and written atomically.
//
//   <run_dir>/checkpoints/step_<N>.safetensors
//     tensors:  every model parameter under its stable name ("wte.weight", "blocks.0...."),
//               every optimizer state tensor as "optimizer/<state name>", all F32 (or the
//               tensor's own dtype when it is bf16/f16/i32/i64)
//     __metadata__ (strings): see the kMeta* keys below — the resolved config TOML, the
//               components used with their plugins' names, versions, files and ABI, the SDK
//               ABI, the source revision, the step, RNG states, the tokenizer file and hash.
//   <run_dir>/checkpoints/latest   one line "step_<N>.safetensors", replaced atomically
//                                  after the checkpoint file itself is in place
// A crash at any point leaves the previous `latest` and its file intact.
// Reading verifies a checkpoint before anything uses it (docs/reliability.md): the
// safetensors layout and the data checksum (run/safetensors.hpp; a checkpoint written before
// checksums loads with the check skipped and a warning saying so), every float tensor finite,
// the format and the numeric metadata (step, tokens_seen, elapsed_seconds) well formed. A
// checkpoint that fails is corrupt: Error(kIo), exit code 5, naming the newest intact
// checkpoint of the same run when there is one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/tensor.hpp"
#include "run/safetensors.hpp"

namespace patchbay::train {

inline constexpr const char* kMetaFormat = "patchbay.format";  // "patchbay-checkpoint 1"
inline constexpr const char* kMetaConfig = "config";            // resolved config, TOML
inline constexpr const char* kMetaStep = "step";                // optimizer updates done
inline constexpr const char* kMetaComponents = "components";    // JSON array, see below
inline constexpr const char* kMetaSdkAbi = "sdk_abi";           // "1.0"
inline constexpr const char* kMetaSourceRevision = "source_revision";  // git describe or "unknown"
inline constexpr const char* kMetaRng = "rng";                  // JSON object of RNG states
inline constexpr const char* kMetaTokenizerFile = "tokenizer.file";
inline constexpr const char* kMetaTokenizerHash = "tokenizer.fnv1a64";  // 16 hex digits
inline constexpr const char* kMetaTokensSeen = "tokens_seen";
// Seconds of training (the loop, evaluations and checkpoints included) up to this checkpoint,
// summed over every resumed part: a resumed run continues metrics.jsonl's elapsed_seconds.
inline constexpr const char* kMetaElapsedSeconds = "elapsed_seconds";
// JSON array of the absolute plugin search path the run used (folders and files); with the
// components' plugin_file it lets generate/eval/resume find the plugins without --plugin-path.
inline constexpr const char* kMetaPluginSearchPath = "plugins.search_path";
// Fine-tuning runs (docs/finetuning.md): train.init_from, absolute; and with [train.lora] a JSON
// object describing the adapters — such a checkpoint stores the adapters ("lora/...") only.
inline constexpr const char* kMetaInitFrom = "init_from";
inline constexpr const char* kMetaLora = "lora";
inline constexpr const char* kOptimizerPrefix = "optimizer/";
inline constexpr const char* kCheckpointFormat = "patchbay-checkpoint 1";

// The source revision compiled in (git describe at configure time), or "unknown".
const char* source_revision();

struct NamedTensor {
  std::string name;
  engine::Tensor tensor;  // any device and layout (copied to the host, contiguous, when written)
};

// Writes <run_dir>/checkpoints/step_<step>.safetensors (atomic), then points `latest` at it.
// `metadata` must already hold everything but kMetaFormat and kMetaStep, which are added.
// Returns the checkpoint's path. Throws patchbay::Error (kIo) naming the file.
std::filesystem::path save_checkpoint(const std::filesystem::path& run_dir, int64_t step,
                                      const std::vector<NamedTensor>& tensors,
                                      std::map<std::string, std::string> metadata);

// A checkpoint read into memory.
class Checkpoint {
 public:
  explicit Checkpoint(const std::filesystem::path& file);  // throws patchbay::Error

  const std::filesystem::path& path() const { return file_->path(); }
  const std::map<std::string, std::string>& metadata() const { return file_->metadata(); }
  // The metadata value; Error(kNotFound) naming the key and the file when absent.
  const std::string& meta(const std::string& key) const;
  const std::string& config_text() const { return meta(kMetaConfig); }
  int64_t step() const { return step_; }
  // false: written before checkpoints carried a checksum, so the data was not verified by one.
  bool checksum_verified() const;
  std::vector<std::string> names() const { return file_->names(); }
  bool contains(const std::string& name) const { return file_->contains(name); }
  // A fresh engine tensor holding a copy of the stored one (Error(kNotFound) when absent).
  engine::Tensor tensor(const std::string& name) const;
  // Every "optimizer/<x>" tensor, keyed by <x> (for OptimizerHandle::restore_state).
  std::map<std::string, engine::Tensor> optimizer_state() const;
  // Copies the stored tensor into each parameter in place, on the parameter's device (a
  // checkpoint saved on one device loads on any other); every parameter must be present
  // with its shape and dtype (Error(kInvalidArgument) naming the first mismatch otherwise).
  void load_into(const std::vector<NamedTensor>& parameters) const;

 private:
  void verify();

  std::shared_ptr<run::SafetensorsFile> file_;
  int64_t step_ = 0;
};

// What load_checkpoint does when the checkpoint it was pointed at is corrupt.
enum class CorruptCheckpoint {
  kRefuse,           // Error(kIo) naming the problem and the newest intact checkpoint
  kUseNewestIntact,  // warn, then load the newest intact step_<N> of the same folder
};

// The step_<N>.safetensors files of a checkpoints/ folder, newest (highest N) first.
std::vector<std::filesystem::path> step_checkpoints(const std::filesystem::path& folder);

// Deletes all but the newest `keep` step_<N> files of `folder` (a checkpoints/ folder; keep >=
// 1), never the file `latest` names; returns the deleted paths. A file that cannot be deleted
// is left with a warning (an older checkpoint left behind loses nothing).
std::vector<std::filesystem::path> prune_step_checkpoints(const std::filesystem::path& folder,
                                                          int64_t keep);

// The newest checkpoint of `folder` (a checkpoints/ folder) that loads and verifies, skipping
// `except`; nullopt when none does.
std::optional<Checkpoint> newest_intact_checkpoint(const std::filesystem::path& folder,
                                                   const std::filesystem::path& except = {});

// A checkpoint file, a run directory or its checkpoints/ folder (both: follow `latest`; when
// `latest` is missing or names a missing file but step_<N> files exist, the newest of them).
// Throws Error(kNotFound) saying what was looked for.
std::filesystem::path resolve_checkpoint_path(const std::filesystem::path& path);

// resolve_checkpoint_path + read and verify (the entry point train --resume, eval and generate
// use). Without `latest`, the newest intact step_<N> is used (with a warning naming the files);
// a corrupt one is handled as `on_corrupt` says.
Checkpoint load_checkpoint(const std::filesystem::path& path,
                           CorruptCheckpoint on_corrupt = CorruptCheckpoint::kRefuse);

}  // namespace patchbay::train
