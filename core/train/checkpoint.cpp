// Checkpoint files; see checkpoint.hpp for the layout.
#include "train/checkpoint.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

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

[[noreturn]] void corrupt(const fs::path& file, const std::string& what) {
  throw Error(ErrorKind::kIo, "checkpoint '" + file.string() + "' is corrupt: " + what);
}

// A non-negative decimal integer of at most 18 digits (no sign, no spaces), or -1.
int64_t parse_count(const std::string& text) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  int64_t value = -1;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// The N of "step_<N>.safetensors", or -1 for any other name.
int64_t step_of_file_name(const std::string& name) {
  const std::string prefix = "step_", suffix = ".safetensors";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  return parse_count(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()));
}

// The JSON metadata fields other commands read: arrays and objects of the documented shape.
void verify_json_metadata(const fs::path& file, const std::map<std::string, std::string>& meta) {
  auto parsed = [&](const char* key) -> std::optional<nlohmann::json> {
    const auto it = meta.find(key);
    if (it == meta.end()) return std::nullopt;
    try {
      return nlohmann::json::parse(it->second);
    } catch (const nlohmann::json::exception&) {
      corrupt(file, std::string("metadata '") + key + "' is not JSON");
    }
  };
  if (const auto components = parsed(kMetaComponents)) {
    if (!components->is_array())
      corrupt(file, std::string("metadata '") + kMetaComponents + "' is not a JSON array");
    for (const nlohmann::json& c : *components) {
      for (const char* field : {"kind", "name", "plugin_file"})
        if (!c.is_object() || !c.contains(field))
          corrupt(file, std::string("metadata '") + kMetaComponents + "' has an entry without '" +
                            field + "': " + c.dump().substr(0, 200));
      for (const auto& [key, value] : c.items())
        if (!value.is_string())
          corrupt(file, std::string("metadata '") + kMetaComponents + "' has a non-string '" + key +
                            "': " + c.dump().substr(0, 200));
    }
  }
  if (const auto search = parsed(kMetaPluginSearchPath)) {
    if (!search->is_array() ||
        !std::all_of(search->begin(), search->end(), [](const auto& e) { return e.is_string(); }))
      corrupt(file, std::string("metadata '") + kMetaPluginSearchPath +
                        "' is not a JSON array of strings");
  }
}

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
  verify();
}

void Checkpoint::verify() {
  const fs::path& file = path();
  const auto& meta = file_->metadata();
  const auto format = meta.find(kMetaFormat);
  if (format == meta.end() || format->second != kCheckpointFormat)
    throw Error(ErrorKind::kIo, file.string() + ": not a patchbay checkpoint (metadata '" +
                                    std::string(kMetaFormat) + "' should be '" + kCheckpointFormat +
                                    "')");
  const auto step = meta.find(kMetaStep);
  if (step == meta.end()) corrupt(file, std::string("its metadata has no '") + kMetaStep + "'");
  step_ = parse_count(step->second);
  if (step_ < 0)
    corrupt(file, "metadata 'step' is '" + step->second.substr(0, 40) +
                      "'; expected a non-negative integer");
  if (const auto tokens = meta.find(kMetaTokensSeen);
      tokens != meta.end() && parse_count(tokens->second) < 0)
    corrupt(file, "metadata 'tokens_seen' is '" + tokens->second.substr(0, 40) +
                      "'; expected a non-negative integer");
  if (const auto elapsed = meta.find(kMetaElapsedSeconds); elapsed != meta.end()) {
    char* end = nullptr;
    const double seconds = std::strtod(elapsed->second.c_str(), &end);
    if (elapsed->second.empty() || *end != '\0' || !std::isfinite(seconds) || seconds < 0)
      corrupt(file, "metadata 'elapsed_seconds' is '" + elapsed->second.substr(0, 40) +
                        "'; expected a non-negative number");
  }
  if (!meta.count(kMetaConfig))
    corrupt(file, std::string("its metadata has no '") + kMetaConfig + "'");
  verify_json_metadata(file, meta);
  for (const std::string& name : file_->names()) {
    const int64_t at = run::first_non_finite(file_->tensor(name));
    if (at >= 0)
      corrupt(file, "tensor '" + name + "' holds a NaN or infinite value (element " +
                        std::to_string(at) + "); a model cannot be evaluated or trained from it");
  }
  if (file_->checksum_check() == run::ChecksumCheck::kAbsent)
    spdlog::warn(
        "{}: written before checkpoints carried a checksum; its data was not verified by one "
        "(its layout, metadata and values were)",
        file.string());
}

bool Checkpoint::checksum_verified() const {
  return file_->checksum_check() == run::ChecksumCheck::kVerified;
}

const std::string& Checkpoint::meta(const std::string& key) const {
  const auto it = file_->metadata().find(key);
  if (it == file_->metadata().end())
    throw Error(ErrorKind::kNotFound, path().string() + ": checkpoint metadata has no '" + key + "'");
  return it->second;
}

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
    if (!file_->contains(p.name) && metadata().count(kMetaLora) != 0)
      throw Error(ErrorKind::kInvalidArgument,
                  path().string() +
                      " holds LoRA adapters only (the base weights are train.init_from's): "
                      "merge them into a plain run first, `patchbay export " +
                      path().string() + " --merge-lora OUT/`, and use OUT/");
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

std::vector<fs::path> step_checkpoints(const fs::path& folder) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  if (fs::is_directory(folder, ec))
    for (const fs::directory_entry& entry : fs::directory_iterator(folder, ec)) {
      const int64_t step = step_of_file_name(entry.path().filename().string());
      if (step >= 0 && entry.is_regular_file(ec)) found.emplace_back(step, entry.path());
    }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<fs::path> files;
  for (auto& f : found) files.push_back(std::move(f.second));
  return files;
}

std::optional<Checkpoint> newest_intact_checkpoint(const fs::path& folder, const fs::path& except) {
  for (const fs::path& file : step_checkpoints(folder)) {
    std::error_code ec;
    if (!except.empty() && fs::equivalent(file, except, ec)) continue;
    try {
      return Checkpoint(file);
    } catch (const Error& e) {
      spdlog::debug("not intact: {}", e.what());
    }
  }
  return std::nullopt;
}

namespace {

// The checkpoints/ folder of a run directory (or the folder itself when it is one); empty when
// `path` is neither.
fs::path checkpoint_folder(const fs::path& path) {
  for (const fs::path& folder : {path / "checkpoints", path})
    if (fs::is_regular_file(folder / "latest") || !step_checkpoints(folder).empty()) return folder;
  return {};
}

std::string file_list(const std::vector<fs::path>& files) {
  std::string names;
  for (std::size_t i = 0; i < files.size() && i < 8; ++i)
    names += (i ? ", " : "") + files[i].filename().string();
  if (files.size() > 8) names += ", ... (" + std::to_string(files.size()) + " in all)";
  return names;
}

// `latest`'s target when it names an existing file; empty otherwise (missing, empty, dangling).
fs::path follow_latest(const fs::path& folder) {
  const fs::path latest = folder / "latest";
  if (!fs::is_regular_file(latest)) return {};
  std::ifstream in(latest);
  std::string name;
  std::getline(in, name);
  if (name.empty() || name.find('/') != std::string::npos || !fs::is_regular_file(folder / name)) {
    spdlog::warn("{} names '{}', which is not a checkpoint file in that folder", latest.string(),
                 name.substr(0, 100));
    return {};
  }
  return folder / name;
}

}  // namespace

fs::path resolve_checkpoint_path(const fs::path& path) {
  if (fs::is_regular_file(path)) return path;
  const fs::path folder = checkpoint_folder(path);
  if (!folder.empty()) {
    if (const fs::path file = follow_latest(folder); !file.empty()) return file;
    const std::vector<fs::path> steps = step_checkpoints(folder);
    if (!steps.empty()) return steps.front();
  }
  throw Error(ErrorKind::kNotFound,
              "no checkpoint at " + path.string() +
                  ": expected a .safetensors file, or a run directory holding "
                  "checkpoints/latest or checkpoints/step_<N>.safetensors");
}

Checkpoint load_checkpoint(const fs::path& path, CorruptCheckpoint on_corrupt) {
  fs::path file;
  fs::path folder;
  if (fs::is_regular_file(path)) {
    file = path;
    folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  } else {
    folder = checkpoint_folder(path);
    if (folder.empty()) (void)resolve_checkpoint_path(path);  // throws "no checkpoint at ..."
    file = follow_latest(folder);
    if (file.empty()) {
      // `latest` lost (deleted, or a copy without it): the newest step file that verifies.
      const std::vector<fs::path> steps = step_checkpoints(folder);
      std::optional<Checkpoint> newest = newest_intact_checkpoint(folder);
      if (!newest)
        throw Error(ErrorKind::kIo, (folder / "latest").string() + " is missing and none of " +
                                        file_list(steps) +
                                        " is intact; the run has no usable checkpoint");
      spdlog::warn("{} is missing; its step files are {}; using the newest intact one, {}",
                   (folder / "latest").string(), file_list(steps), newest->path().string());
      return std::move(*newest);
    }
  }
  try {
    return Checkpoint(file);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kIo) throw;
    std::optional<Checkpoint> intact = newest_intact_checkpoint(folder, file);
    if (intact && on_corrupt == CorruptCheckpoint::kUseNewestIntact) {
      spdlog::warn("{}; using the newest intact checkpoint, {}", e.what(), intact->path().string());
      return std::move(*intact);
    }
    if (!intact)
      throw Error(ErrorKind::kIo, std::string(e.what()) + ". No other checkpoint in " +
                                      folder.string() + " is intact.");
    throw Error(ErrorKind::kIo,
                std::string(e.what()) + ". The newest intact checkpoint is " +
                    intact->path().string() + " (step " + std::to_string(intact->step()) +
                    "): name it instead, or resume with `patchbay train --resume RUN "
                    "--resume-from-intact`.");
  }
}

std::vector<fs::path> prune_step_checkpoints(const fs::path& folder, int64_t keep) {
  const std::vector<fs::path> files = step_checkpoints(folder);  // newest first
  const fs::path latest = follow_latest(folder);
  std::vector<fs::path> deleted;
  for (size_t i = static_cast<size_t>(std::max<int64_t>(keep, 1)); i < files.size(); ++i) {
    std::error_code ec;
    if (!latest.empty() && fs::equivalent(files[i], latest, ec)) continue;
    if (fs::remove(files[i], ec))
      deleted.push_back(files[i]);
    else if (ec)
      spdlog::warn("train.keep_checkpoints: cannot delete {}: {}", files[i].string(), ec.message());
  }
  return deleted;
}

}  // namespace patchbay::train
