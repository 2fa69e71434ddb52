// import_from_hf (hf_io.hpp): a transformers model directory -> a Patchbay run directory with
// a step-0 checkpoint written by train::save_checkpoint, with the metadata a training run writes.
#include <fstream>
#include <nlohmann/json.hpp>
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
class HfWeights {
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
  std::vector<std::string> names() const {
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
         ends_with("rotary_emb.inv_freq");
}

void check_weights_match(const HfModelShape& shape, const HfWeights& weights) {
  std::set<std::string> used;
  for (const TensorRule& rule : hf_tensor_rules(shape)) {
    if (rule.patchbay_absent || rule.hf_absent) continue;
    for (const HfTensorPart& part : rule.parts) {
      std::string found_as;
      const run::StoredTensor* stored = weights.find(part.hf_name, &found_as);
      if (stored == nullptr)
        throw Error(
            ErrorKind::kInvalidArgument,
            "cannot import: tensor '" + part.hf_name +
                "' is missing from the safetensors (config.json implies it; are its sizes right?)");
      const std::vector<int64_t> expected = hf_part_shape(rule.patchbay_shape, part);
      if (stored->shape != expected)
        throw Error(ErrorKind::kInvalidArgument,
                    "cannot import: tensor '" + part.hf_name + "' has shape " +
                        engine::shape_str(stored->shape) + "; config.json implies " +
                        engine::shape_str(expected) + " (are its sizes right?)");
      used.insert(found_as);
    }
  }
  std::string unused;
  for (const std::string& name : weights.names())
    if (used.count(name) == 0 && !is_ignorable_buffer(name) &&
        !(name == "lm_head.weight" && shape.options.tie_embeddings))
      unused += (unused.empty() ? "" : ", ") + name;
  if (!unused.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "cannot import: tensors without a Patchbay counterpart: " + unused.substr(0, 2000) +
                    " (config.json does not describe them)");
}

std::string toml_string(const std::string& text) {
  return json(text).dump();
}  // JSON escapes are TOML's

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

}  // namespace

HfImportResult import_from_hf(const fs::path& hf_dir, const fs::path& run_dir,
                              runtime::Registry& registry,
                              const config::ComponentSchemaLookup& lookup,
                              const HfImportOptions& options) {
  HfImportResult result;
  result.run_dir = run_dir;
  result.shape = hf_shape_from_config_json(read_json(hf_dir / "config.json"));
  const HfModelShape& shape = result.shape;
  const HfWeights weights(hf_dir);
  PatchbayTokenizerFile tokenizer =
      import_tokenizer(hf_dir, options, &result.tokenizer_source, registry);
  result.tokenizer_kind = tokenizer.kind;
  if (tokenizer.vocab_size != shape.options.vocab_size)
    throw Error(ErrorKind::kInvalidArgument,
                "cannot import: the tokenizer (" + result.tokenizer_source + ") has " +
                    std::to_string(tokenizer.vocab_size) + " ids but config.json vocab_size is " +
                    std::to_string(shape.options.vocab_size) +
                    " (a padded vocabulary is not supported)");
  if (fs::exists(run_dir / "checkpoints") || fs::exists(run_dir / "metrics.jsonl")) {
    if (!options.overwrite)
      throw Error(ErrorKind::kInvalidArgument,
                  "run directory '" + run_dir.string() +
                      "' already holds a run; choose another or pass --overwrite");
    for (const char* produced : {"checkpoints", "metrics.jsonl", "samples.txt", "train.log"})
      fs::remove_all(run_dir / produced);
  }
  fs::create_directories(run_dir);
  const fs::path tokenizer_path = run_dir / "tokenizer.txt";
  run::write_text_atomically(tokenizer_path, tokenizer.file_text);
  {  // the plugin must load what was written, with the vocabulary the model has
    const runtime::TokenizerHandle loaded =
        data::load_tokenizer(registry, tokenizer_path, {tokenizer.kind, {}, {}, {}});
    if (loaded.vocab_size() != shape.options.vocab_size)
      throw Error(ErrorKind::kInvalidArgument,
                  "cannot import: the tokenizer loaded from " + tokenizer_path.string() + " has " +
                      std::to_string(loaded.vocab_size()) + " ids but config.json vocab_size is " +
                      std::to_string(shape.options.vocab_size));
  }

  std::ostringstream text;
  text << "# Imported from " << fs::absolute(hf_dir).lexically_normal().string() << " ("
       << hf_architecture(shape.family) << ") by `patchbay import`.\n[run]\nname = "
       << toml_string(run_dir.filename().empty() ? run_dir.parent_path().filename().string()
                                                 : run_dir.filename().string())
       << "\n\n[tokenizer]\nkind = " << toml_string(tokenizer.kind)
       << "\nfile = " << toml_string(tokenizer_path.string()) << "\nspecial_tokens = [";
  for (size_t i = 0; i < tokenizer.specials.size(); ++i)
    text << (i ? ", " : "") << toml_string(tokenizer.specials[i]);
  text << "]\n\n"
       << patchbay_model_toml(shape)
       << "\n[optimizer]\nkind = \"adamw\"\n\n[train]\nout_dir = " << toml_string(run_dir.string())
       << "\nseq_len = " << std::min<int64_t>(128, shape.options.context_length) << "\n";
  config::ResolvedConfig config =
      config::load_config_text(text.str(), (run_dir / "config.toml").string());
  for (const std::string& assignment : options.overrides)
    config::apply_set_override(config, assignment);
  train::validate_training_config(config, lookup);
  const std::string config_text = config::to_toml(config);

  // Every tensor present with the shape config.json implies, and none left over, before the
  // model is built: a config.json whose sizes disagree with the weights (missing keys, a typo)
  // must not allocate a model of its own size first.
  check_weights_match(shape, weights);
  train::TrainableModel trainable =
      train::build_trainable_model(config, registry, lookup, tokenizer.vocab_size);
  std::set<std::string> used_hf;
  std::map<std::string, engine::Tensor> by_name;
  for (const model::NamedParameter& p : trainable.parameters) by_name.emplace(p.name, p.tensor);
  std::set<std::string> filled;
  for (const TensorRule& rule : hf_tensor_rules(shape)) {
    if (rule.patchbay_absent) continue;
    const auto target = by_name.find(rule.patchbay_name);
    if (target == by_name.end())
      throw Error(ErrorKind::kInternal,
                  "import: the built model has no parameter '" + rule.patchbay_name + "'");
    HostTensor whole;
    whole.shape = rule.patchbay_shape;
    whole.data.assign(static_cast<size_t>(engine::shape_numel(rule.patchbay_shape)), 0.0f);
    if (!rule.hf_absent) {
      for (const HfTensorPart& part : rule.parts) {
        std::string found_as;
        const run::StoredTensor* stored = weights.find(part.hf_name, &found_as);
        if (stored == nullptr)
          throw Error(ErrorKind::kInvalidArgument,
                      "cannot import: tensor '" + part.hf_name +
                          "' is missing from the safetensors (config.json implies it)");
        place_from_hf(whole, part, to_host(*stored, part.hf_name));
        used_hf.insert(found_as);
      }
    }
    engine::Tensor& param = target->second;
    if (param.shape() != whole.shape)
      throw Error(ErrorKind::kInternal,
                  "import: parameter '" + rule.patchbay_name + "' has shape " + param.str());
    engine::copy_(param, engine::Tensor::from_vector(whole.data, whole.shape).to(param.dtype()));
    filled.insert(rule.patchbay_name);
  }
  for (const auto& [name, tensor] : by_name)
    if (filled.count(name) == 0)
      throw Error(ErrorKind::kInternal, "import: no rule fills parameter '" + name + "'");
  std::string unused;
  for (const std::string& name : weights.names())
    if (used_hf.count(name) == 0 && !is_ignorable_buffer(name) &&
        !(name == "lm_head.weight" && shape.options.tie_embeddings))
      unused += (unused.empty() ? "" : ", ") + name;
  if (!unused.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "cannot import: tensors without a Patchbay counterpart: " + unused +
                    " (config.json does not describe them)");

  std::vector<train::NamedTensor> tensors;
  for (const model::NamedParameter& p : trainable.parameters) tensors.push_back({p.name, p.tensor});
  for (const auto& s : trainable.optimizer->state())
    tensors.push_back({train::kOptimizerPrefix + s.name, s.tensor});
  std::map<std::string, std::string> metadata{
      {train::kMetaConfig, config_text},
      {train::kMetaComponents, train::components_json(config, registry, trainable.optimizer_name)},
      {train::kMetaSdkAbi,
       std::to_string(PB_ABI_VERSION_MAJOR) + "." + std::to_string(PB_ABI_VERSION_MINOR)},
      {train::kMetaSourceRevision, train::source_revision()},
      {train::kMetaTokenizerFile, tokenizer_path.string()},
      {train::kMetaTokenizerHash, std::to_string(data::fnv1a64(tokenizer.file_text))},
      {train::kMetaPluginSearchPath, train::plugin_search_path_json(registry)},
      {train::kMetaTokensSeen, "0"},
      {train::kMetaElapsedSeconds, "0"},
      {train::kMetaRng,
       json{{"imported_from", fs::absolute(hf_dir).lexically_normal().string()}}.dump()}};
  run::write_text_atomically(run_dir / "config.toml", config_text);
  result.checkpoint = train::save_checkpoint(run_dir, 0, tensors, metadata);
  result.parameters = trainable.model->parameter_count();
  return result;
}

}  // namespace patchbay::interop
