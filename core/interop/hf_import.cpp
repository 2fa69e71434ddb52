// import_from_hf (hf_io.hpp): a transformers model directory -> a Patchbay run directory with
// a step-0 checkpoint written by train::save_checkpoint, with the metadata a training run
// writes; write_imported_run (import_run.hpp), shared with the GGUF import.
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "config/config_loader.hpp"
#include "config/config_printer.hpp"
#include "data/split.hpp"
#include "data/tokenizer_io.hpp"
#include "engine/ops.hpp"
#include "engine/tensor.hpp"
#include "interop/hf_io.hpp"
#include "interop/hf_tensors.hpp"
#include "interop/hf_tokenizer.hpp"
#include "interop/import_run.hpp"
#include "interop/t5_architecture.hpp"
#include "patchbay/abi.h"
#include "run/atomic_file.hpp"
#include "run/safetensors.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"

namespace patchbay::interop {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::kNotFound, "cannot import: " + path.string() + " does not exist");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw Error(ErrorKind::kInvalidArgument,
                "cannot import: " + path.string() + " is not valid JSON (" + e.what() + ")");
  }
}

// The directory's weights: model.safetensors, or the shards model.safetensors.index.json names.
class HfWeights : public ImportTensorSource {
 public:
  explicit HfWeights(const fs::path& dir) {
    if (fs::is_regular_file(dir / "model.safetensors")) {
      files_.push_back(std::make_unique<run::SafetensorsFile>(dir / "model.safetensors"));
    } else if (fs::is_regular_file(dir / "model.safetensors.index.json")) {
      std::set<std::string> shards;
      const fs::path index = dir / "model.safetensors.index.json";
      const json map = read_json(index);
      if (!map.is_object() || !map.contains("weight_map") || !map["weight_map"].is_object())
        throw Error(ErrorKind::kInvalidArgument,
                    "cannot import: " + index.string() +
                        " has no \"weight_map\" object (tensor name -> shard file)");
      for (const auto& [name, shard] : map["weight_map"].items()) {
        if (!shard.is_string() || shard.get<std::string>().find('/') != std::string::npos)
          throw Error(ErrorKind::kInvalidArgument,
                      "cannot import: " + index.string() + ": weight_map[\"" + name + "\"] is " +
                          shard.dump() + "; expected a file name in " + dir.string());
        shards.insert(shard.get<std::string>());
      }
      for (const std::string& shard : shards)
        files_.push_back(std::make_unique<run::SafetensorsFile>(dir / shard));
    } else {
      throw Error(ErrorKind::kNotFound,
                  "cannot import: " + dir.string() +
                      " has no model.safetensors (nor an index of shards); PyTorch .bin files "
                      "are not read (convert them with save_pretrained(safe_serialization=True))");
    }
  }
  // The tensor `name` (GPT-2's "transformer." prefix optional, as the published gpt2 files lack
  // it).
  const run::StoredTensor* find(const std::string& name, std::string* found_as) const {
    for (const std::string& candidate :
         {name, name.rfind("transformer.", 0) == 0 ? name.substr(12) : std::string()}) {
      if (candidate.empty()) continue;
      for (const auto& f : files_)
        if (f->contains(candidate)) {
          *found_as = candidate;
          return &f->tensor(candidate);
        }
    }
    return nullptr;
  }
  bool fetch(const std::string& hf_name, HostTensor* out, std::string* found_as) override;
  bool stored_shape(const std::string& hf_name, std::vector<int64_t>* shape,
                    std::string* found_as) const override {
    const run::StoredTensor* stored = find(hf_name, found_as);
    if (stored != nullptr) *shape = stored->shape;
    return stored != nullptr;
  }
  bool ignorable(const std::string& name) const override;
  std::vector<std::string> names() const override {
    std::vector<std::string> all;
    for (const auto& f : files_)
      for (const std::string& n : f->names()) all.push_back(n);
    return all;
  }

 private:
  std::vector<std::unique_ptr<run::SafetensorsFile>> files_;
};

HostTensor to_host(const run::StoredTensor& stored, const std::string& name) {
  engine::DType dtype = engine::DType::kF32;
  if (stored.dtype == run::StoredDType::kBF16) {
    dtype = engine::DType::kBF16;
  } else if (stored.dtype == run::StoredDType::kF16) {
    dtype = engine::DType::kF16;
  } else if (stored.dtype != run::StoredDType::kF32) {
    throw Error(ErrorKind::kInvalidArgument, "cannot import: tensor '" + name + "' is " +
                                                 run::stored_dtype_name(stored.dtype) +
                                                 "; F32, F16 or BF16 expected");
  }
  const engine::Tensor t =
      engine::Tensor::from_data(stored.data.data(), stored.shape, dtype).to(engine::DType::kF32);
  HostTensor h;
  h.shape = stored.shape;
  h.data.assign(t.data<float>(), t.data<float>() + t.numel());
  return h;
}

// Buffers some transformers versions save that carry no parameters.
bool is_ignorable_buffer(const std::string& name) {
  auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".attn.bias") || ends_with(".attn.masked_bias") ||
         ends_with("rotary_emb.inv_freq") || t5_ignorable_tensor(name);
}

bool HfWeights::fetch(const std::string& hf_name, HostTensor* out, std::string* found_as) {
  const run::StoredTensor* stored = find(hf_name, found_as);
  if (stored == nullptr) return false;
  *out = to_host(*stored, hf_name);
  return true;
}

bool HfWeights::ignorable(const std::string& name) const { return is_ignorable_buffer(name); }

PatchbayTokenizerFile import_tokenizer(const fs::path& hf_dir, const HfImportOptions& options,
                                       std::string* source, runtime::Registry& registry) {
  fs::path patchbay_file = options.tokenizer;
  if (patchbay_file.empty() && fs::is_regular_file(hf_dir / "patchbay_tokenizer.txt"))
    patchbay_file = hf_dir / "patchbay_tokenizer.txt";
  if (!patchbay_file.empty()) {
    PatchbayTokenizerFile file;
    file.kind = data::detect_tokenizer_kind(patchbay_file);
    file.file_text = data::read_text_file(patchbay_file);
    const runtime::TokenizerHandle handle =
        data::load_tokenizer(registry, patchbay_file, {file.kind, {}, {}, {}});
    file.vocab_size = handle.vocab_size();
    for (const auto& special : handle.special_tokens()) file.specials.push_back(special.text);
    *source = patchbay_file.string();
    return file;
  }
  if (!fs::is_regular_file(hf_dir / "tokenizer.json"))
    throw Error(ErrorKind::kNotFound,
                "cannot import: " + hf_dir.string() +
                    " has no tokenizer.json (give a Patchbay tokenizer file with --tokenizer)");
  *source = (hf_dir / "tokenizer.json").string();
  return tokenizer_from_hf(read_json(hf_dir / "tokenizer.json"));
}

// The training settings a Patchbay export stored in patchbay_export.json: TOML tables and
// the seed ("" and none when the directory is not a Patchbay export, or an export from before
// they were stored).
struct ExportedTraining {
  std::string toml;
  std::optional<int64_t> seed;
};
ExportedTraining exported_training_settings(const fs::path& hf_dir) {
  ExportedTraining out;
  const fs::path file = hf_dir / "patchbay_export.json";
  if (!fs::exists(file)) return out;
  const json record = read_json(file);
  if (const auto it = record.find("training_settings_toml"); it != record.end() && it->is_string())
    out.toml = it->get<std::string>();
  if (const auto it = record.find("training_seed"); it != record.end() && it->is_number_integer())
    out.seed = it->get<int64_t>();
  return out;
}

}  // namespace

HfImportResult import_from_hf(const fs::path& hf_dir, const fs::path& run_dir,
                              runtime::Registry& registry,
                              const config::ComponentSchemaLookup& lookup,
                              const HfImportOptions& options) {
  ImportedRunInputs inputs;
  inputs.shape = hf_shape_from_config_json(read_json(hf_dir / "config.json"));
  const std::unique_ptr<ImportTensorSource> weights = hf_tensor_source(hf_dir);
  inputs.tokenizer = import_tokenizer(hf_dir, options, &inputs.tokenizer_source, registry);
  inputs.origin = fs::absolute(hf_dir).lexically_normal().string();
  inputs.origin_format = hf_architecture(inputs.shape.family);
  const ExportedTraining exported = exported_training_settings(hf_dir);
  inputs.training_toml = exported.toml;
  inputs.training_seed = exported.seed;
  return write_imported_run(inputs, *weights, run_dir, registry, lookup, options);
}

std::unique_ptr<ImportTensorSource> hf_tensor_source(const fs::path& hf_dir) {
  return std::make_unique<HfWeights>(hf_dir);
}

}  // namespace patchbay::interop
