// Patchbay model options <-> transformers config.json; see hf_architecture.hpp.
#include "interop/hf_architecture.hpp"

#include <sstream>

#include "common/error.hpp"
#include "config/component_options.hpp"
#include "interop/hf_config_fields.hpp"
#include "interop/t5_architecture.hpp"

namespace patchbay::interop {

namespace {

using nlohmann::json;

const std::vector<std::string> kLayerHostKeys = {"kind", "pattern"};

[[noreturn]] void refuse(const std::string& what, const std::string& why) {
  throw Error(ErrorKind::kInvalidArgument,
              "cannot export to Hugging Face format: " + what +
                  " has no counterpart in transformers' GPT2LMHeadModel or LlamaForCausalLM (" +
                  why +
                  "). Exportable: pre-norm LayerNorm + learned positions + dense attention + mlp "
                  "gelu/gelu_erf/relu "
                  "(GPT-2), or pre-norm RMSNorm + rotary + dense attention + mlp swiglu (LLaMA); "
                  "see docs/interop.md");
}

[[noreturn]] void unsupported_field(const std::string& field, const std::string& found,
                                    const std::string& why) {
  throw Error(ErrorKind::kInvalidArgument, "cannot import: config.json " + field + " = " + found +
                                               " has no Patchbay counterpart (" + why + ")");
}

// Typed readers of config.json fields: absent (or null) gives the fallback; present with another
// JSON type (n_head = 2.5, n_embd = "32") is an error naming the field, never a silent default.
[[noreturn]] void wrong_type(const char* key, const json& value, const char* expected) {
  std::string shown = value.dump();
  if (shown.size() > 60) shown = shown.substr(0, 60) + "...";
  throw Error(ErrorKind::kInvalidArgument, std::string("cannot import: config.json ") + key +
                                               " = " + shown + "; expected " + expected);
}

const json* field(const json& config, const char* key) {
  if (!config.is_object()) return nullptr;
  const auto it = config.find(key);
  return it == config.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace

namespace hf_fields {

int64_t get_int(const json& config, const char* key, int64_t fallback) {
  const json* v = field(config, key);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer() ||
      (v->is_number_unsigned() && v->get<uint64_t>() > (uint64_t{1} << 62)))
    wrong_type(key, *v, "an integer");
  return v->get<int64_t>();
}

double get_real(const json& config, const char* key, double fallback) {
  const json* v = field(config, key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) wrong_type(key, *v, "a number");
  return v->get<double>();
}

bool get_bool(const json& config, const char* key, bool fallback) {
  const json* v = field(config, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) wrong_type(key, *v, "true or false");
  return v->get<bool>();
}

std::string get_string(const json& config, const char* key, const std::string& fallback) {
  const json* v = field(config, key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) wrong_type(key, *v, "a string");
  return v->get<std::string>();
}

// A size the model cannot be built without: present, and a positive integer below 2^31.
int64_t get_size(const json& config, const char* key, const char* what) {
  const json* v = field(config, key);
  if (v == nullptr)
    throw Error(ErrorKind::kInvalidArgument,
                std::string("cannot import: config.json has no ") + key + " (" + what +
                    "); add it (transformers writes it with save_pretrained)");
  const int64_t size = get_int(config, key, 0);
  if (size < 1 || size > (int64_t{1} << 31)) wrong_type(key, *v, "a positive integer");
  return size;
}

std::string toml_real(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  std::string text = out.str();
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

std::string plugin_of(const std::vector<UsedComponent>& components, const std::string& kind,
                      const std::string& name) {
  for (const UsedComponent& c : components)
    if (c.kind == kind && c.name == name) return c.plugin;
  return "";
}

}  // namespace hf_fields

using namespace hf_fields;

int64_t kv_heads_of(const HfModelShape& shape) {
  return shape.n_kv_heads > 0 ? shape.n_kv_heads : shape.options.n_heads;
}

const char* hf_family_name(HfFamily family) {
  return family == HfFamily::kGpt2 ? "gpt2" : family == HfFamily::kLlama ? "llama" : "t5";
}
const char* hf_architecture(HfFamily family) {
  return family == HfFamily::kGpt2    ? "GPT2LMHeadModel"
         : family == HfFamily::kLlama ? "LlamaForCausalLM"
                                      : "T5ForConditionalGeneration";
}

HfModelShape hf_shape_of_model(const model::ModelOptions& options,
                               const model::ComponentTables& tables,
                               const std::vector<UsedComponent>& components) {
  HfModelShape shape;
  shape.options = options;
  for (const std::string& kind : options.attention_kinds) {
    if (kind != "dense")
      refuse("attention '" + kind + "'", "only the dense multi-head attention maps");
    const std::string plugin = plugin_of(components, "attention", kind);
    if (!plugin.empty() && plugin != "attention-dense")
      refuse("attention 'dense' from plugin '" + plugin + "'",
             "only the built-in attention-dense plugin's layout is known");
  }
  for (const std::string& kind : options.feedforward_kinds) {
    if (kind != "mlp")
      refuse("feed-forward '" + kind + "'", kind == "moe" ? "no mixture-of-experts counterpart in "
                                                            "these architectures"
                                                          : "only the dense mlp maps");
    const std::string plugin = plugin_of(components, "feedforward", kind);
    if (!plugin.empty() && plugin != "ffn-mlp")
      refuse("feed-forward 'mlp' from plugin '" + plugin + "'",
             "only the built-in ffn-mlp plugin's layout is known");
  }
  const toml::table attention =
      config::component_options(tables.attention, "dense", kLayerHostKeys);
  const toml::table mlp = config::component_options(tables.feedforward, "mlp", kLayerHostKeys);
  if (!option_or<bool>(attention, "causal", true))
    refuse("attention causal = false", "a causal LM is needed");
  if (option_or<int64_t>(attention, "window", 0) != 0)
    refuse("attention window = " + std::to_string(option_or<int64_t>(attention, "window", 0)),
           "sliding-window attention is not part of GPT-2 or LLaMA");
  shape.attention_dropout = option_or<double>(attention, "dropout", 0.0);
  shape.n_kv_heads = option_or<int64_t>(attention, "n_kv_heads", 0);
  const std::string rope_scaling = option_or<std::string>(attention, "rope_scaling", "none");
  if (rope_scaling == "llama3") {
    shape.rope_scaling.llama3 = true;
    shape.rope_scaling.factor = option_or<double>(attention, "rope_factor", 8.0);
    shape.rope_scaling.low_freq_factor = option_or<double>(attention, "rope_low_freq_factor", 1.0);
    shape.rope_scaling.high_freq_factor =
        option_or<double>(attention, "rope_high_freq_factor", 4.0);
    shape.rope_scaling.original_context =
        option_or<int64_t>(attention, "rope_original_context", 8192);
  }
  shape.activation = option_or<std::string>(mlp, "activation", "gelu");
  shape.mlp_bias = option_or<bool>(mlp, "bias", true);
  shape.mlp_dropout = option_or<double>(mlp, "dropout", 0.0);
  if (!options.pre_norm) refuse("norm_position = \"post\"", "both architectures are pre-norm");
  if (options.reversible)
    refuse("residual = \"reversible\"", "reversible blocks compute another function");
  const model::PositionalKind pos = options.positional;
  if (pos == model::PositionalKind::kAlibi || pos == model::PositionalKind::kSinusoidal ||
      pos == model::PositionalKind::kNone)
    refuse(std::string("positional = \"") + model::positional_kind_name(pos) + "\"",
           "GPT-2 has learned positions, LLaMA rotary");
  if (model::resolved_embedding_scale(options) != 1.0)
    refuse("embedding_scale " + std::to_string(model::resolved_embedding_scale(options)),
           "token embeddings are not scaled in either architecture");
  if (pos == model::PositionalKind::kLearned) {
    if (options.norm != model::NormKind::kLayerNorm)
      refuse("rmsnorm with learned positions", "GPT-2 uses LayerNorm");
    if (shape.activation == "swiglu" || shape.activation == "geglu")
      refuse("mlp activation " + shape.activation + " with learned positions",
             "GPT-2's MLP is not gated");
    if (kv_heads_of(shape) != options.n_heads)
      refuse("attention n_kv_heads = " + std::to_string(shape.n_kv_heads),
             "GPT-2 has no grouped-query attention");
    shape.family = HfFamily::kGpt2;
  } else {  // rotary
    if (options.norm != model::NormKind::kRmsNorm)
      refuse("layernorm with rotary positions", "LLaMA uses RMSNorm");
    if (shape.activation != "swiglu")
      refuse("mlp activation " + shape.activation + " with rotary positions",
             "LLaMA's MLP is SwiGLU");
    if ((options.d_model / options.n_heads) % 2 != 0)
      refuse("an odd head dimension", "rotary needs pairs");
    shape.family = HfFamily::kLlama;
  }
  return shape;
}

json hf_config_json(const HfModelShape& shape, std::optional<int64_t> eos_id) {
  if (shape.family == HfFamily::kT5) return t5_config_json(shape);
  const model::ModelOptions& o = shape.options;
  const json eos = eos_id ? json(*eos_id) : json(nullptr);
  if (shape.family == HfFamily::kGpt2) {
    const char* activation = shape.activation == "gelu"       ? "gelu_new"
                             : shape.activation == "gelu_erf" ? "gelu"
                                                              : "relu";
    return {{"architectures", {"GPT2LMHeadModel"}},
            {"model_type", "gpt2"},
            {"vocab_size", o.vocab_size},
            {"n_positions", o.context_length},
            {"n_ctx", o.context_length},
            {"n_embd", o.d_model},
            {"n_layer", o.n_layers},
            {"n_head", o.n_heads},
            {"n_inner", o.d_ff},
            {"activation_function", activation},
            {"resid_pdrop", o.dropout},
            {"embd_pdrop", o.dropout},
            {"attn_pdrop", 0.0},
            {"layer_norm_epsilon", o.norm_eps},
            {"initializer_range", o.init_std},
            {"scale_attn_weights", true},
            {"scale_attn_by_inverse_layer_idx", false},
            {"reorder_and_upcast_attn", false},
            {"tie_word_embeddings", o.tie_embeddings},
            {"bos_token_id", eos},
            {"eos_token_id", eos},
            {"use_cache", true},
            {"torch_dtype", "float32"},
            {"patchbay",
             {{"mlp_dropout", shape.mlp_dropout}, {"attention_dropout", shape.attention_dropout}}}};
  }
  json rope_parameters = {{"rope_type", "default"}, {"rope_theta", o.rope_theta}};
  if (shape.rope_scaling.llama3) {
    const HfRopeScaling& r = shape.rope_scaling;
    rope_parameters = {{"rope_type", "llama3"},
                       {"rope_theta", o.rope_theta},
                       {"factor", r.factor},
                       {"low_freq_factor", r.low_freq_factor},
                       {"high_freq_factor", r.high_freq_factor},
                       {"original_max_position_embeddings", r.original_context}};
  }
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", o.vocab_size},
          {"hidden_size", o.d_model},
          {"intermediate_size", o.d_ff},
          {"num_hidden_layers", o.n_layers},
          {"num_attention_heads", o.n_heads},
          {"num_key_value_heads", kv_heads_of(shape)},
          {"head_dim", o.d_model / o.n_heads},
          {"hidden_act", "silu"},
          {"max_position_embeddings", o.context_length},
          {"rms_norm_eps", o.norm_eps},
          {"initializer_range", o.init_std},
          {"rope_theta", o.rope_theta},
          {"rope_parameters", rope_parameters},
          {"rope_scaling", shape.rope_scaling.llama3 ? rope_parameters : json(nullptr)},
          {"attention_bias", shape.attention_bias},
          {"mlp_bias", shape.mlp_bias},
          {"attention_dropout", 0.0},
          {"tie_word_embeddings", o.tie_embeddings},
          {"bos_token_id", eos},
          {"eos_token_id", eos},
          {"pad_token_id", nullptr},
          {"pretraining_tp", 1},
          {"use_cache", true},
          {"torch_dtype", "float32"},
          {"patchbay",
           {{"dropout", o.dropout},
            {"mlp_dropout", shape.mlp_dropout},
            {"attention_dropout", shape.attention_dropout}}}};
}

json hf_generation_config_json(const HfModelShape& shape, std::optional<int64_t> eos_id) {
  if (shape.family == HfFamily::kT5) return t5_generation_config_json(shape);
  const json eos = eos_id ? json(*eos_id) : json(nullptr);
  return {{"_from_model_config", true},
          {"bos_token_id", eos},
          {"eos_token_id", eos},
          {"do_sample", false}};
}

HfModelShape hf_shape_from_config_json(const json& config) {
  if (!config.is_object())
    throw Error(ErrorKind::kInvalidArgument, "cannot import: config.json is a JSON " +
                                                 std::string(config.type_name()) +
                                                 ", not an object");
  const std::string type = get_string(config, "model_type", "");
  if (type == "t5") return t5_shape_from_config_json(config);
  if (type != "gpt2" && type != "llama")
    throw Error(ErrorKind::kInvalidArgument,
                "cannot import: config.json model_type '" + type +
                    "' has no Patchbay mapping (supported: gpt2 -> "
                    "GPT2LMHeadModel, llama -> LlamaForCausalLM, t5 -> "
                    "T5ForConditionalGeneration)");
  HfModelShape shape;
  model::ModelOptions& o = shape.options;
  o.vocab_size = get_size(config, "vocab_size", "the vocabulary size");
  const json extra = field(config, "patchbay") != nullptr ? config["patchbay"] : json::object();
  if (!extra.is_object()) wrong_type("patchbay", extra, "an object");
  if (type == "gpt2") {
    shape.family = HfFamily::kGpt2;
    o.context_length = get_size(config, "n_positions", "the context length");
    o.d_model = get_size(config, "n_embd", "the hidden size");
    o.n_layers = get_size(config, "n_layer", "the number of layers");
    o.n_heads = get_size(config, "n_head", "the number of attention heads");
    o.d_ff = get_int(config, "n_inner", 4 * o.d_model);
    const std::string act = get_string(config, "activation_function", "gelu_new");
    if (act == "gelu_new" || act == "gelu_pytorch_tanh") {
      shape.activation = "gelu";
    } else if (act == "gelu") {
      shape.activation = "gelu_erf";
    } else if (act == "relu") {
      shape.activation = "relu";
    } else {
      unsupported_field("activation_function", "\"" + act + "\"",
                        "the mlp has gelu (tanh), gelu_erf and relu");
    }
    o.norm = model::NormKind::kLayerNorm;
    o.positional = model::PositionalKind::kLearned;
    o.norm_eps = get_real(config, "layer_norm_epsilon", 1e-5);
    o.dropout = get_real(config, "resid_pdrop", 0.0);
    o.tie_embeddings = get_bool(config, "tie_word_embeddings", true);
    if (!get_bool(config, "scale_attn_weights", true))
      unsupported_field("scale_attn_weights", "false",
                        "attention always scales by 1/sqrt(head dim)");
    if (get_bool(config, "scale_attn_by_inverse_layer_idx", false))
      unsupported_field("scale_attn_by_inverse_layer_idx", "true",
                        "no per-layer attention scaling");
    if (get_bool(config, "add_cross_attention", false))
      unsupported_field("add_cross_attention", "true", "decoder-only models only");
  } else if (type == "llama") {
    shape.family = HfFamily::kLlama;
    o.context_length = get_size(config, "max_position_embeddings", "the context length");
    o.d_model = get_size(config, "hidden_size", "the hidden size");
    o.n_layers = get_size(config, "num_hidden_layers", "the number of layers");
    o.n_heads = get_size(config, "num_attention_heads", "the number of attention heads");
    o.d_ff = get_size(config, "intermediate_size", "the feed-forward width");
    const int64_t kv = get_int(config, "num_key_value_heads", o.n_heads);
    if (kv < 1 || o.n_heads % kv != 0)
      unsupported_field("num_key_value_heads", std::to_string(kv),
                        "grouped-query attention needs a divisor of num_attention_heads " +
                            std::to_string(o.n_heads));
    shape.n_kv_heads = kv == o.n_heads ? 0 : kv;
    const int64_t head_dim = get_int(config, "head_dim", o.d_model / o.n_heads);
    if (head_dim * o.n_heads != o.d_model)
      unsupported_field("head_dim", std::to_string(head_dim),
                        "the head dim must be hidden_size / heads");
    const std::string act = get_string(config, "hidden_act", "silu");
    if (act != "silu")
      unsupported_field("hidden_act", "\"" + act + "\"", "the swiglu mlp uses silu");
    shape.activation = "swiglu";
    o.norm = model::NormKind::kRmsNorm;
    o.positional = model::PositionalKind::kRotary;
    o.norm_eps = get_real(config, "rms_norm_eps", 1e-6);
    o.rope_theta = get_real(config, "rope_theta", 10000.0);
    const json rope = field(config, "rope_parameters") != nullptr ? config["rope_parameters"]
                      : field(config, "rope_scaling") != nullptr  ? config["rope_scaling"]
                                                                  : json();
    if (!rope.is_null() && !rope.is_object()) wrong_type("rope_parameters", rope, "an object");
    if (rope.is_object()) {
      const std::string rope_type =
          get_string(rope, "rope_type", get_string(rope, "type", "default"));
      if (rope_type == "llama3") {
        HfRopeScaling& r = shape.rope_scaling;
        r.llama3 = true;
        r.factor = get_real(rope, "factor", r.factor);
        r.low_freq_factor = get_real(rope, "low_freq_factor", r.low_freq_factor);
        r.high_freq_factor = get_real(rope, "high_freq_factor", r.high_freq_factor);
        r.original_context = get_int(rope, "original_max_position_embeddings", r.original_context);
        if (!(r.factor >= 1.0) || !(r.high_freq_factor > r.low_freq_factor) ||
            !(r.low_freq_factor > 0) || r.original_context < 1)
          unsupported_field("rope_scaling", rope.dump(),
                            "llama3 scaling needs factor >= 1, high_freq_factor > "
                            "low_freq_factor > 0 and original_max_position_embeddings >= 1");
      } else if (rope_type != "default") {
        unsupported_field("rope type", "\"" + rope_type + "\"",
                          "plain rotary and LLaMA 3.1's \"llama3\" scaling are implemented");
      }
      o.rope_theta = get_real(rope, "rope_theta", o.rope_theta);
    }
    shape.attention_bias = get_bool(config, "attention_bias", false);
    shape.mlp_bias = get_bool(config, "mlp_bias", false);
    o.tie_embeddings = get_bool(config, "tie_word_embeddings", false);
    o.dropout = get_real(extra, "dropout", 0.0);
    if (get_int(config, "pretraining_tp", 1) > 1)
      unsupported_field("pretraining_tp", std::to_string(get_int(config, "pretraining_tp", 1)),
                        "no sliced matmuls");
  } else {
    throw Error(ErrorKind::kInvalidArgument,
                "cannot import: config.json model_type '" + type +
                    "' has no Patchbay mapping (supported: gpt2 -> "
                    "GPT2LMHeadModel, llama -> LlamaForCausalLM, t5 -> "
                    "T5ForConditionalGeneration)");
  }
  shape.attention_dropout = get_real(extra, "attention_dropout", 0.0);
  shape.mlp_dropout = get_real(extra, "mlp_dropout", 0.0);
  if (o.vocab_size < 1 || o.d_model < 1 || o.n_heads < 1 || o.n_layers < 1 ||
      o.d_model % o.n_heads != 0)
    throw Error(ErrorKind::kInvalidArgument,
                "cannot import: config.json sizes are inconsistent (vocab_size " +
                    std::to_string(o.vocab_size) + ", hidden " + std::to_string(o.d_model) +
                    ", heads " + std::to_string(o.n_heads) + ")");
  return shape;
}

std::string patchbay_model_toml(const HfModelShape& shape) {
  if (shape.family == HfFamily::kT5) return t5_model_toml(shape);
  const model::ModelOptions& o = shape.options;
  std::ostringstream t;
  t << "[model]\ncontext_length = " << o.context_length << "\nn_layers = " << o.n_layers
    << "\nn_heads = " << o.n_heads << "\nd_model = " << o.d_model << "\nd_ff = " << o.d_ff
    << "\nnorm = \"" << model::norm_kind_name(o.norm)
    << "\"\nnorm_position = \"pre\"\npositional = \"" << model::positional_kind_name(o.positional)
    << "\"\nembedding_scale = \"none\"\nrope_theta = " << toml_real(o.rope_theta)
    << "\ntie_embeddings = " << (o.tie_embeddings ? "true" : "false")
    << "\ndropout = " << toml_real(o.dropout) << "\nnorm_eps = " << toml_real(o.norm_eps)
    << "\n\n[model.attention]\nkind = \"dense\"\ndropout = " << toml_real(shape.attention_dropout);
  if (kv_heads_of(shape) != o.n_heads) t << "\nn_kv_heads = " << shape.n_kv_heads;
  if (shape.rope_scaling.llama3) {
    const HfRopeScaling& r = shape.rope_scaling;
    t << "\nrope_scaling = \"llama3\"\nrope_factor = " << toml_real(r.factor)
      << "\nrope_low_freq_factor = " << toml_real(r.low_freq_factor)
      << "\nrope_high_freq_factor = " << toml_real(r.high_freq_factor)
      << "\nrope_original_context = " << r.original_context;
  }
  t << "\n\n[model.feedforward]\nkind = \"mlp\"\nactivation = \"" << shape.activation
    << "\"\nbias = " << (shape.family == HfFamily::kGpt2 || shape.mlp_bias ? "true" : "false")
    << "\ndropout = " << toml_real(shape.mlp_dropout) << "\n";
  return t.str();
}

}  // namespace patchbay::interop
