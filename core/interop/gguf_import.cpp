// import_from_gguf (gguf_import.hpp): metadata -> model shape, ggml tensor names -> transformers
// names with the rotary rows un-permuted, then the shared run writer (import_run.hpp).
#include "interop/gguf_import.hpp"

#include <map>

#include "common/error.hpp"
#include "interop/hf_tensors.hpp"
#include "interop/import_run.hpp"

namespace patchbay::interop {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void refuse(const GgufFile& file, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, "cannot import " + file.path().string() + ": " + what);
}

int64_t required_int(const GgufFile& file, const std::string& key) {
  const std::optional<int64_t> value = file.get_int(key);
  if (!value) refuse(file, "metadata '" + key + "' is missing (a LLaMA model needs it)");
  if (*value < 1)
    refuse(file, "metadata '" + key + "' is " + std::to_string(*value) + "; >= 1 expected");
  return *value;
}

// How a ggml tensor maps: its transformers name and, for q/k, the heads to un-permute over.
struct GgufTensorMapping {
  std::string hf_name;
  int64_t rotary_heads = 0;  // 0: copy as is
};

// ggml name -> mapping, for the tensors a LLaMA model has.
std::map<std::string, GgufTensorMapping> llama_tensor_map(const HfModelShape& shape) {
  std::map<std::string, GgufTensorMapping> map = {
      {"token_embd.weight", {"model.embed_tokens.weight", 0}},
      {"output_norm.weight", {"model.norm.weight", 0}},
      {"output.weight", {"lm_head.weight", 0}}};
  const int64_t heads = shape.options.n_heads, kv_heads = kv_heads_of(shape);
  for (int64_t i = 0; i < shape.options.n_layers; ++i) {
    const std::string g = "blk." + std::to_string(i) + ".",
                      h = "model.layers." + std::to_string(i) + ".";
    map[g + "attn_norm.weight"] = {h + "input_layernorm.weight", 0};
    map[g + "ffn_norm.weight"] = {h + "post_attention_layernorm.weight", 0};
    for (const char* suffix : {"weight", "bias"}) {
      const std::string s = suffix;
      map[g + "attn_q." + s] = {h + "self_attn.q_proj." + s, heads};
      map[g + "attn_k." + s] = {h + "self_attn.k_proj." + s, kv_heads};
      map[g + "attn_v." + s] = {h + "self_attn.v_proj." + s, 0};
      map[g + "attn_output." + s] = {h + "self_attn.o_proj." + s, 0};
    }
    map[g + "ffn_gate.weight"] = {h + "mlp.gate_proj.weight", 0};
    map[g + "ffn_up.weight"] = {h + "mlp.up_proj.weight", 0};
    map[g + "ffn_down.weight"] = {h + "mlp.down_proj.weight", 0};
  }
  return map;
}

// The GGUF's tensors under transformers' names (f32, un-permuted).
class GgufTensors : public ImportTensorSource {
 public:
  GgufTensors(const GgufFile& file, const HfModelShape& shape) : file_(file) {
    for (const auto& [ggml_name, mapping] : llama_tensor_map(shape))
      if (file.tensor(ggml_name) != nullptr) by_hf_[mapping.hf_name] = {ggml_name, mapping};
  }
  bool fetch(const std::string& hf_name, HostTensor* out, std::string* found_as) override {
    const auto it = by_hf_.find(hf_name);
    if (it == by_hf_.end()) return false;
    const GgufTensorInfo& info = *file_.tensor(it->second.first);
    out->shape = info.shape();
    out->data = file_.read_f32(info);
    const int64_t heads = it->second.second.rotary_heads;
    if (heads > 0) {
      const int64_t cols = out->shape.size() == 2 ? out->shape[1] : 1;
      out->data = unpermute_rotary_rows(out->data, out->shape[0], cols, heads);
    }
    *found_as = it->second.first;
    return true;
  }
  bool stored_shape(const std::string& hf_name, std::vector<int64_t>* shape,
                    std::string* found_as) const override {
    const auto it = by_hf_.find(hf_name);
    if (it == by_hf_.end()) return false;
    *shape = file_.tensor(it->second.first)->shape();
    *found_as = it->second.first;
    return true;
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> all;
    for (const GgufTensorInfo& t : file_.tensors()) all.push_back(t.name);
    return all;
  }
  bool ignorable(const std::string& /*name*/) const override { return false; }

 private:
  const GgufFile& file_;
  std::map<std::string, std::pair<std::string, GgufTensorMapping>> by_hf_;
};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// Every tensor the shape implies is present with the shape it implies, before any is read.
void check_tensor_shapes(const GgufFile& file, const HfModelShape& shape) {
  std::map<std::string, std::string> ggml_of;
  for (const auto& [ggml_name, mapping] : llama_tensor_map(shape))
    ggml_of[mapping.hf_name] = ggml_name;
  for (const TensorRule& rule : hf_tensor_rules(shape)) {
    if (rule.hf_absent || rule.patchbay_absent) continue;
    for (const HfTensorPart& part : rule.parts) {
      std::vector<int64_t> expected = {part.rows};
      if (rule.patchbay_shape.size() == 2) expected.push_back(rule.patchbay_shape[1]);
      const std::string& ggml_name = ggml_of.at(part.hf_name);
      const GgufTensorInfo* info = file.tensor(ggml_name);
      if (info == nullptr)
        refuse(file, "tensor '" + ggml_name + "' is missing (the metadata implies it)");
      if (info->shape() != expected)
        refuse(file, "tensor '" + ggml_name + "' has shape " + shape_text(info->shape()) +
                         " where the metadata implies " + shape_text(expected));
    }
  }
}

json imported_model_json(const GgufFile& file) {
  json info = {{"format", "gguf"},
               {"gguf_version", file.version()},
               {"source", fs::absolute(file.path()).lexically_normal().string()}};
  for (const char* key : {"general.architecture", "general.name", "general.basename",
                          "general.size_label", "general.license", "tokenizer.ggml.pre"})
    if (const GgufValue* v = file.find(key); v != nullptr && v->type == GgufValueType::kString)
      info[key] = v->text;
  const std::vector<std::string> tokens = file.get_strings("tokenizer.ggml.tokens");
  for (const char* role : {"bos", "eos", "padding", "unknown"}) {
    const std::optional<int64_t> id =
        file.get_int(std::string("tokenizer.ggml.") + role + "_token_id");
    if (!id) continue;
    json token = {{"id", *id}};
    if (*id >= 0 && *id < static_cast<int64_t>(tokens.size()))
      token["text"] = tokens[static_cast<size_t>(*id)];
    info[std::string(role) + "_token"] = token;
  }
  for (const char* key : {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"})
    if (const GgufValue* v = file.find(key); v != nullptr && v->is_integer())
      info[std::string(key).substr(15)] = v->integer != 0;
  info["has_chat_template"] = file.find("tokenizer.chat_template") != nullptr;
  return info;
}

}  // namespace

std::vector<float> unpermute_rotary_rows(const std::vector<float>& permuted, int64_t rows,
                                         int64_t cols, int64_t heads) {
  if (heads < 1 || rows % heads != 0 || (rows / heads) % 2 != 0 ||
      static_cast<int64_t>(permuted.size()) != rows * cols)
    throw Error(ErrorKind::kInvalidArgument, "rotary rows: " + std::to_string(rows) +
                                                 " rows do not split into " +
                                                 std::to_string(heads) + " heads of an even size");
  const int64_t head_rows = rows / heads, half = head_rows / 2;
  std::vector<float> out(permuted.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t i = 0; i < half; ++i) {
        const int64_t hf_row = h * head_rows + j * half + i, gguf_row = h * head_rows + 2 * i + j;
        std::copy_n(permuted.begin() + gguf_row * cols, cols, out.begin() + hf_row * cols);
      }
  return out;
}

HfModelShape gguf_llama_shape(const GgufFile& file) {
  const std::string arch = file.get_string("general.architecture").value_or("");
  if (arch != "llama")
    refuse(file, "general.architecture is \"" + arch +
                     "\"; only \"llama\" (LLaMA, SmolLM2, TinyLlama, Mistral-style dense "
                     "models) is imported");
  HfModelShape shape;
  shape.family = HfFamily::kLlama;
  model::ModelOptions& o = shape.options;
  o.context_length = required_int(file, "llama.context_length");
  o.d_model = required_int(file, "llama.embedding_length");
  o.n_layers = required_int(file, "llama.block_count");
  o.d_ff = required_int(file, "llama.feed_forward_length");
  o.n_heads = required_int(file, "llama.attention.head_count");
  const int64_t kv = file.get_int("llama.attention.head_count_kv").value_or(o.n_heads);
  if (kv < 1 || o.n_heads % kv != 0)
    refuse(file, "llama.attention.head_count_kv = " + std::to_string(kv) +
                     " does not divide head_count " + std::to_string(o.n_heads));
  shape.n_kv_heads = kv == o.n_heads ? 0 : kv;
  if (o.d_model % o.n_heads != 0)
    refuse(file, "embedding_length " + std::to_string(o.d_model) +
                     " is not a multiple of head_count " + std::to_string(o.n_heads));
  const int64_t head_dim = o.d_model / o.n_heads;
  for (const char* key :
       {"llama.rope.dimension_count", "llama.attention.key_length", "llama.attention.value_length"})
    if (const std::optional<int64_t> n = file.get_int(key); n && *n != head_dim)
      refuse(file, std::string(key) + " = " + std::to_string(*n) + " differs from the head dim " +
                       std::to_string(head_dim) +
                       " (partial rotary / other head sizes are not "
                       "supported)");
  if (file.get_int("llama.expert_count").value_or(0) > 0)
    refuse(file, "llama.expert_count = " + std::to_string(*file.get_int("llama.expert_count")) +
                     ": mixture-of-experts LLaMA models are not imported");
  if (const std::optional<std::string> scaling = file.get_string("llama.rope.scaling.type");
      scaling && *scaling != "none")
    refuse(file, "llama.rope.scaling.type = \"" + *scaling + "\" is not supported");
  if (file.tensor("rope_freqs.weight") != nullptr)
    refuse(file,
           "it holds rope_freqs.weight (LLaMA 3.1 scaled rotary frequencies), which the "
           "GGUF import does not map yet; import the Hugging Face directory instead "
           "(rope_scaling llama3 is supported there)");
  o.norm = model::NormKind::kRmsNorm;
  o.positional = model::PositionalKind::kRotary;
  o.pre_norm = true;
  o.rope_theta = file.get_real("llama.rope.freq_base").value_or(10000.0);
  o.norm_eps = file.get_real("llama.attention.layer_norm_rms_epsilon").value_or(1e-5);
  const GgufTensorInfo* embedding = file.tensor("token_embd.weight");
  if (embedding == nullptr) refuse(file, "tensor 'token_embd.weight' is missing");
  o.vocab_size = embedding->shape()[0];
  if (const std::optional<int64_t> v = file.get_int("llama.vocab_size"); v && *v != o.vocab_size)
    refuse(file, "llama.vocab_size = " + std::to_string(*v) + " but token_embd.weight has " +
                     std::to_string(o.vocab_size) + " rows");
  o.tie_embeddings = file.tensor("output.weight") == nullptr;
  o.dropout = 0.0;
  shape.activation = "swiglu";
  shape.mlp_bias = false;
  shape.attention_bias = file.tensor("blk.0.attn_q.bias") != nullptr;
  return shape;
}

HfImportResult import_from_gguf(const fs::path& gguf_path, const fs::path& run_dir,
                                runtime::Registry& registry,
                                const config::ComponentSchemaLookup& lookup,
                                const HfImportOptions& options) {
  if (!options.tokenizer.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "--tokenizer is not used with a GGUF file: its tokenizer is in its metadata");
  const GgufFile file(gguf_path);
  ImportedRunInputs inputs;
  inputs.shape = gguf_llama_shape(file);
  check_tensor_shapes(file, inputs.shape);
  inputs.tokenizer = tokenizer_from_hf(gguf_tokenizer_json(file));
  inputs.tokenizer_source = gguf_path.string() + " (tokenizer.ggml.*)";
  inputs.origin = fs::absolute(gguf_path).lexically_normal().string();
  inputs.origin_format = "GGUF llama";
  inputs.extra_files["imported_model.json"] = imported_model_json(file).dump(2) + "\n";
  if (const std::optional<std::string> chat = file.get_string("tokenizer.chat_template"))
    inputs.extra_files["chat_template.jinja"] = *chat;
  const std::unique_ptr<ImportTensorSource> tensors = gguf_tensor_source(file, inputs.shape);
  return write_imported_run(inputs, *tensors, run_dir, registry, lookup, options);
}

std::unique_ptr<ImportTensorSource> gguf_tensor_source(const GgufFile& file,
                                                       const HfModelShape& shape) {
  check_tensor_shapes(file, shape);
  return std::make_unique<GgufTensors>(file, shape);
}

}  // namespace patchbay::interop
