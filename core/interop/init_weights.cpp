// init_from's weights from Hugging Face directories and GGUF files; see init_weights.hpp.
#include "interop/init_weights.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "interop/gguf_import.hpp"
#include "interop/import_run.hpp"

namespace patchbay::interop {

namespace fs = std::filesystem;

namespace {

bool starts_with_gguf_magic(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::string(magic, 4) == "GGUF";
}

train::InitialWeights as_engine_tensors(std::map<std::string, HostTensor> tensors,
                                        std::string origin) {
  train::InitialWeights weights;
  weights.origin = std::move(origin);
  for (auto& [name, host] : tensors)
    weights.tensors[name] =
        engine::Tensor::from_data(host.data.data(), host.shape, engine::DType::kF32);
  return weights;
}

}  // namespace

train::InitialWeights read_initial_weights(const fs::path& path) {
  if (fs::is_directory(path) && fs::is_regular_file(path / "config.json")) {
    std::ifstream in(path / "config.json");
    nlohmann::json config;
    try {
      config = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw Error(ErrorKind::kInvalidArgument,
                  (path / "config.json").string() + " is not valid JSON: " + e.what());
    }
    const HfModelShape shape = hf_shape_from_config_json(config);
    const std::string origin = "Hugging Face directory " + path.string();
    const std::unique_ptr<ImportTensorSource> source = hf_tensor_source(path);
    return as_engine_tensors(patchbay_tensors_from(shape, *source, origin), origin);
  }
  if (fs::is_regular_file(path) && starts_with_gguf_magic(path)) {
    const GgufFile file(path);
    const HfModelShape shape = gguf_llama_shape(file);
    const std::string origin = "GGUF file " + path.string();
    const std::unique_ptr<ImportTensorSource> source = gguf_tensor_source(file, shape);
    return as_engine_tensors(patchbay_tensors_from(shape, *source, origin), origin);
  }
  return train::read_checkpoint_weights(path);
}

}  // namespace patchbay::interop
