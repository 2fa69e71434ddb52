// Checkpoint files; see checkpoint.hpp for the layout.
#include "train/checkpoint.hpp"

#include <fstream>

#include "common/error.hpp"
#include "engine/ops_device.hpp"
#include "run/atomic_file.hpp"

#ifndef PATCHBAY_SOURCE_REVISION
#define PATCHBAY_SOURCE_REVISION "unknown"
#endif

namespace patchbay::train {

namespace fs = std::filesystem;

const char* source_revision() { return PATCHBAY_SOURCE_REVISION; }

namespace {

run::StoredDType stored_dtype(engine::DType dtype) {
  switch (dtype) {
    case engine::DType::kF32: return run::StoredDType::kF32;
    case engine::DType::kBF16: return run::StoredDType::kBF16;
    case engine::DType::kF16: return run::StoredDType::kF16;
    case engine::DType::kI32: return run::StoredDType::kI32;
    case engine::DType::kI64: return run::StoredDType::kI64;
  }
  throw Error(ErrorKind::kInternal, "checkpoint: unknown tensor dtype");
}

engine::DType engine_dtype(run::StoredDType dtype, const std::string& name) {
  switch (dtype) {
    case run::StoredDType::kF32: return engine::DType::kF32;
    case run::StoredDType::kBF16: return engine::DType::kBF16;
    case run::StoredDType::kF16: return engine::DType::kF16;
    case run::StoredDType::kI32: return engine::DType::kI32;
    case run::StoredDType::kI64: return engine::DType::kI64;
    case run::StoredDType::kU8: break;
  }
  throw Error(ErrorKind::kInvalidArgument, "checkpoint tensor '" + name + "' has dtype U8, which the engine lacks");
}

std::string file_name_for_step(int64_t step) { return "step_" + std::to_string(step) + ".safetensors"; }

}  // namespace

fs::path save_checkpoint(const fs::path& run_dir, int64_t step, const std::vector<NamedTensor>& tensors,
                         std::map<std::string, std::string> metadata) {
  metadata[kMetaFormat] = kCheckpointFormat;
  metadata[kMetaStep] = std::to_string(step);
  std::vector<engine::Tensor> contiguous;  // keeps copies alive while writing
  std::vector<run::TensorToWrite> to_write;
  contiguous.reserve(tensors.size());
  for (const NamedTensor& t : tensors) {
    // Device tensors come to the host: checkpoints do not depend on the device they were
    // saved from.
    contiguous.push_back(t.tensor.detach().to(engine::cpu()).contiguous());
    const engine::Tensor& c = contiguous.back();
    to_write.push_back({t.name, stored_dtype(c.dtype()), c.shape(),
                        std::span<const std::byte>(static_cast<const std::byte*>(c.data_ptr()), c.nbytes())});
  }
  const fs::path folder = run_dir / "checkpoints";
  const fs::path file = folder / file_name_for_step(step);
  run::write_safetensors(file, to_write, metadata);
  run::write_text_atomically(folder / "latest", file.filename().string() + "\n");
  return file;
}

Checkpoint::Checkpoint(const fs::path& file) : file_(std::make_shared<run::SafetensorsFile>(file)) {
  const auto format = file_->metadata().find(kMetaFormat);
  if (format == file_->metadata().end() || format->second != kCheckpointFormat)
    throw Error(ErrorKind::kInvalidArgument, file.string() + ": not a patchbay checkpoint (metadata '" +
                                                 std::string(kMetaFormat) + "' should be '" + kCheckpointFormat +
                                                 "')");
}

const std::string& Checkpoint::meta(const std::string& key) const {
  const auto it = file_->metadata().find(key);
  if (it == file_->metadata().end())
    throw Error(ErrorKind::kNotFound, path().string() + ": checkpoint metadata has no '" + key + "'");
  return it->second;
}

int64_t Checkpoint::step() const { return std::stoll(meta(kMetaStep)); }

engine::Tensor Checkpoint::tensor(const std::string& name) const {
  const run::StoredTensor& stored = file_->tensor(name);
  return engine::Tensor::from_data(stored.data.data(), stored.shape, engine_dtype(stored.dtype, name));
}

std::map<std::string, engine::Tensor> Checkpoint::optimizer_state() const {
  std::map<std::string, engine::Tensor> state;
  const std::string prefix = kOptimizerPrefix;
  for (const std::string& name : file_->names()) {
    if (name.rfind(prefix, 0) == 0) state.emplace(name.substr(prefix.size()), tensor(name));
  }
  return state;
}

void Checkpoint::load_into(const std::vector<NamedTensor>& parameters) const {
  for (const NamedTensor& p : parameters) {
    if (!file_->contains(p.name))
      throw Error(ErrorKind::kInvalidArgument,
                  path().string() + ": checkpoint has no tensor '" + p.name + "' (model and checkpoint differ)");
    const run::StoredTensor& stored = file_->tensor(p.name);
    if (stored.shape != p.tensor.shape() || engine_dtype(stored.dtype, p.name) != p.tensor.dtype())
      throw Error(ErrorKind::kInvalidArgument, path().string() + ": tensor '" + p.name + "' is stored as " +
                                                   engine::shape_str(stored.shape) + ", the model has " +
                                                   p.tensor.str());
  }
  for (const NamedTensor& p : parameters) {
    const run::StoredTensor& stored = file_->tensor(p.name);
    if (!p.tensor.is_contiguous())
      throw Error(ErrorKind::kInvalidArgument, "checkpoint: parameter '" + p.name + "' is not contiguous");
    // Into the parameter's own memory, whatever its device (a host copy or a transfer).
    engine::transfer_bytes(p.tensor.data_ptr(), p.tensor.device(), stored.data.data(),
                           engine::cpu(), stored.data.size());
  }
}

fs::path resolve_checkpoint_path(const fs::path& path) {
  if (fs::is_regular_file(path)) return path;
  for (const fs::path& folder : {path / "checkpoints", path}) {
    const fs::path latest = folder / "latest";
    if (!fs::is_regular_file(latest)) continue;
    std::ifstream in(latest);
    std::string name;
    std::getline(in, name);
    const fs::path file = folder / name;
    if (!name.empty() && fs::is_regular_file(file)) return file;
    throw Error(ErrorKind::kNotFound, latest.string() + " names '" + name + "', which does not exist");
  }
  throw Error(ErrorKind::kNotFound, "no checkpoint at " + path.string() +
                                        ": expected a .safetensors file, or a run directory holding "
                                        "checkpoints/latest");
}

Checkpoint load_checkpoint(const fs::path& path) { return Checkpoint(resolve_checkpoint_path(path)); }

}  // namespace patchbay::train
