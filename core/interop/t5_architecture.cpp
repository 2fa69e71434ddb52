// The encoder-decoder <-> T5ForConditionalGeneration mapping; see t5_architecture.hpp.
#include "interop/t5_architecture.hpp"

#include <cmath>
#include <sstream>

#include "common/error.hpp"
#include "config/component_options.hpp"
#include "interop/hf_config_fields.hpp"

namespace patchbay::interop {

namespace {

using nlohmann::json;
using namespace hf_fields;

const std::vector<std::string> kLayerHostKeys = {"kind", "pattern"};

[[noreturn]] void refuse_t5(const std::string& what, const std::string& why) {
  throw Error(ErrorKind::kInvalidArgument,
              "cannot export to Hugging Face format: " + what +
                  " has no counterpart in transformers' T5ForConditionalGeneration (" + why +
                  "). Exportable encoder-decoders: shared embeddings, rmsnorm, t5_relative (or "
                  "no) positions, dense cross-attention with bias = false, mlp relu / gelu / "
                  "gelu_erf / swiglu / geglu without biases; see docs/encoder_decoder.md");
}

[[noreturn]] void refuse_t5_field(const std::string& field, const std::string& found,
                                  const std::string& why) {
  throw Error(ErrorKind::kInvalidArgument, "cannot import: config.json " + field + " = " + found +
                                               " has no Patchbay counterpart (" + why + ")");
}

// Patchbay's mlp activation -> T5Config.feed_forward_proj, "" when none.
std::string feed_forward_proj_of(const std::string& activation) {
  if (activation == "relu") return "relu";
  if (activation == "gelu") return "gelu_new";  // the tanh approximation
  if (activation == "gelu_erf") return "gelu";
  if (activation == "swiglu") return "gated-silu";
  if (activation == "geglu") return "gated-gelu";  // T5 v1.1: gelu_new (tanh) of wi_0
  return "";
}

}  // namespace

HfModelShape t5_shape_of_model(const model::EncoderDecoderOptions& e,
                               const model::ComponentTables& tables,
                               const std::vector<UsedComponent>& components) {
  HfModelShape shape;
  shape.family = HfFamily::kT5;
  shape.options = e.base;
  HfT5Fields& t5 = shape.t5;
  t5.encoder_layers = e.encoder_layers;
  t5.decoder_layers = e.decoder_layers;
  t5.source_context_length = e.source_context_length;
  t5.relative_bias = e.relative_bias;
  t5.relative_buckets = e.relative_buckets;
  t5.relative_max_distance = e.relative_max_distance;
  if (!e.shared_embeddings)
    refuse_t5("model.shared_embeddings = false",
              "T5 embeds sources and decoder inputs with one table, shared.weight");
  if (e.base.norm != model::NormKind::kRmsNorm)
    refuse_t5("model.norm = \"layernorm\"", "T5LayerNorm is an RMS norm without bias");
  if (e.cross_attention != "dense")
    refuse_t5("model.cross_attention = \"" + e.cross_attention + "\"",
              "T5's EncDecAttention is dense softmax attention");
  const std::string attention_plugin = plugin_of(components, "attention", "dense");
  if (!attention_plugin.empty() && attention_plugin != "attention-dense")
    refuse_t5("attention 'dense' from plugin '" + attention_plugin + "'",
              "only the built-in attention-dense plugin's layout is known");
  for (const auto* kinds :
       {&e.encoder_feedforward, &e.decoder_feedforward, &e.base.feedforward_kinds})
    for (const std::string& kind : *kinds) {
      if (kind != "mlp")
        refuse_t5("feed-forward '" + kind + "'",
                  kind == "moe" ? "T5 has no mixture-of-experts layer" : "only the mlp maps");
      const std::string plugin = plugin_of(components, "feedforward", kind);
      if (!plugin.empty() && plugin != "ffn-mlp")
        refuse_t5("feed-forward 'mlp' from plugin '" + plugin + "'",
                  "only the built-in ffn-mlp plugin's layout is known");
    }
  const toml::table attention =
      config::component_options(tables.attention, "dense", kLayerHostKeys);
  const toml::table mlp = config::component_options(tables.feedforward, "mlp", kLayerHostKeys);
  const int64_t kv_heads = option_or<int64_t>(attention, "n_kv_heads", 0);
  if (kv_heads != 0 && kv_heads != e.base.n_heads)
    refuse_t5("cross-attention n_kv_heads = " + std::to_string(kv_heads),
              "T5 has no grouped-query attention");
  t5.attention_bias = option_or<bool>(attention, "bias", true);
  shape.attention_dropout = option_or<double>(attention, "dropout", 0.0);
  shape.activation = option_or<std::string>(mlp, "activation", "gelu");
  t5.feed_forward_proj = feed_forward_proj_of(shape.activation);
  if (t5.feed_forward_proj.empty())
    refuse_t5("mlp activation \"" + shape.activation + "\"",
              "T5 offers relu, gelu_new, gelu, gated-silu and gated-gelu");
  shape.mlp_bias = option_or<bool>(mlp, "bias", true);
  shape.mlp_dropout = option_or<double>(mlp, "dropout", 0.0);
  return shape;
}

json t5_config_json(const HfModelShape& shape) {
  const model::ModelOptions& o = shape.options;
  const HfT5Fields& t5 = shape.t5;
  const json pad = t5.pad_id >= 0 ? json(t5.pad_id) : json(nullptr);
  const json eos = t5.eos_id >= 0 ? json(t5.eos_id) : json(nullptr);
  return {{"architectures", {"T5ForConditionalGeneration"}},
          {"model_type", "t5"},
          {"vocab_size", o.vocab_size},
          {"d_model", o.d_model},
          {"d_kv", o.d_model / o.n_heads},
          {"d_ff", o.d_ff},
          {"num_layers", t5.encoder_layers},
          {"num_decoder_layers", t5.decoder_layers},
          {"num_heads", o.n_heads},
          {"relative_attention_num_buckets", t5.relative_buckets},
          {"relative_attention_max_distance", t5.relative_max_distance},
          {"dropout_rate", o.dropout},
          {"layer_norm_epsilon", o.norm_eps},
          {"initializer_factor", 1.0},
          {"feed_forward_proj", t5.feed_forward_proj},
          {"is_encoder_decoder", true},
          {"tie_word_embeddings", o.tie_embeddings},
          {"use_cache", true},
          {"pad_token_id", pad},
          {"eos_token_id", eos},
          {"decoder_start_token_id", pad},
          {"torch_dtype", "float32"},
          {"patchbay",
           {{"context_length", o.context_length},
            {"source_context_length", t5.source_context_length},
            {"relative_bias", t5.relative_bias},
            {"mlp_dropout", shape.mlp_dropout},
            {"attention_dropout", shape.attention_dropout}}}};
}

json t5_generation_config_json(const HfModelShape& shape) {
  const json pad = shape.t5.pad_id >= 0 ? json(shape.t5.pad_id) : json(nullptr);
  const json eos = shape.t5.eos_id >= 0 ? json(shape.t5.eos_id) : json(nullptr);
  return {{"_from_model_config", true},
          {"decoder_start_token_id", pad},
          {"pad_token_id", pad},
          {"eos_token_id", eos},
          {"do_sample", false}};
}

HfModelShape t5_shape_from_config_json(const json& config) {
  HfModelShape shape;
  shape.family = HfFamily::kT5;
  model::ModelOptions& o = shape.options;
  HfT5Fields& t5 = shape.t5;
  o.vocab_size = get_size(config, "vocab_size", "the vocabulary size");
  o.d_model = get_size(config, "d_model", "the hidden size");
  o.n_heads = get_size(config, "num_heads", "the number of attention heads");
  o.d_ff = get_size(config, "d_ff", "the feed-forward width");
  t5.encoder_layers = get_size(config, "num_layers", "the number of encoder blocks");
  t5.decoder_layers = get_int(config, "num_decoder_layers", t5.encoder_layers);
  if (t5.decoder_layers < 1)
    refuse_t5_field("num_decoder_layers", std::to_string(t5.decoder_layers), "must be >= 1");
  const int64_t d_kv = get_int(config, "d_kv", o.d_model / o.n_heads);
  if (d_kv * o.n_heads != o.d_model)
    refuse_t5_field("d_kv", std::to_string(d_kv),
                    "Patchbay's heads split d_model: d_kv must be d_model / num_heads = " +
                        std::to_string(o.d_model / o.n_heads));
  t5.relative_buckets = static_cast<int32_t>(get_int(config, "relative_attention_num_buckets", 32));
  t5.relative_max_distance =
      static_cast<int32_t>(get_int(config, "relative_attention_max_distance", 128));
  if (t5.relative_buckets < 2 || t5.relative_max_distance < 1)
    refuse_t5_field("relative_attention_num_buckets", std::to_string(t5.relative_buckets),
                    "needs >= 2 buckets and a max distance >= 1");
  if (get_bool(config, "is_decoder", false))
    refuse_t5_field("is_decoder", "true", "a decoder-only T5 stack is not an encoder-decoder");
  if (!get_bool(config, "is_encoder_decoder", true))
    refuse_t5_field("is_encoder_decoder", "false", "T5EncoderModel has no decoder");
  o.dropout = get_real(config, "dropout_rate", 0.1);
  o.norm_eps = get_real(config, "layer_norm_epsilon", 1e-6);
  o.norm = model::NormKind::kRmsNorm;
  t5.feed_forward_proj = get_string(config, "feed_forward_proj", "relu");
  const std::string& ff = t5.feed_forward_proj;
  if (ff == "relu") {
    shape.activation = "relu";
  } else if (ff == "gelu_new") {
    shape.activation = "gelu";
  } else if (ff == "gelu") {
    shape.activation = "gelu_erf";
  } else if (ff == "gated-silu" || ff == "gated-swish") {
    shape.activation = "swiglu";
  } else if (ff == "gated-gelu" || ff == "gated-gelu_new") {
    shape.activation = "geglu";  // transformers maps "gated-gelu" to gelu_new (tanh)
  } else {
    refuse_t5_field("feed_forward_proj", "\"" + ff + "\"",
                    "mlp offers relu (relu), gelu (gelu_new), gelu_erf (gelu), swiglu "
                    "(gated-silu) and geglu (gated-gelu)");
  }
  shape.mlp_bias = false;
  t5.attention_bias = false;
  // transformers 5 writes scale_decoder_outputs; older versions only tie_word_embeddings
  // (true: tied head and scaled outputs, false: lm_head.weight and no scaling).
  const bool tied = get_bool(config, "tie_word_embeddings", true);
  const bool scaled = get_bool(config, "scale_decoder_outputs", tied);
  // Tied without rescaling (transformers 5 writes it for T5 v1.1-style configs): Patchbay's
  // tied head rescales, so the head becomes an untied copy of shared.weight.
  t5.head_from_shared = tied && !scaled;
  o.tie_embeddings = scaled;
  t5.pad_id = get_int(config, "pad_token_id", -1);
  t5.eos_id = get_int(config, "eos_token_id", -1);
  const json extra = config.contains("patchbay") && config["patchbay"].is_object()
                         ? config["patchbay"]
                         : json::object();
  o.context_length = get_int(extra, "context_length", 512);
  t5.source_context_length = get_int(extra, "source_context_length", 512);
  shape.mlp_dropout = get_real(extra, "mlp_dropout", 0.0);
  shape.attention_dropout = get_real(extra, "attention_dropout", 0.0);
  t5.relative_bias = true;  // HF always has the tables (zero for a positional = "none" export)
  if (o.context_length < 1 || t5.source_context_length < 1)
    refuse_t5_field("patchbay.context_length", std::to_string(o.context_length),
                    "context lengths must be >= 1");
  return shape;
}

std::string t5_model_toml(const HfModelShape& shape) {
  const model::ModelOptions& o = shape.options;
  const HfT5Fields& t5 = shape.t5;
  std::ostringstream t;
  t << "[model]\narchitecture = \"encoder_decoder\"\nn_layers = " << t5.encoder_layers
    << "\nencoder_layers = " << t5.encoder_layers << "\ndecoder_layers = " << t5.decoder_layers
    << "\ncontext_length = " << o.context_length
    << "\nsource_context_length = " << t5.source_context_length << "\nn_heads = " << o.n_heads
    << "\nd_model = " << o.d_model << "\nd_ff = " << o.d_ff
    << "\nnorm = \"rmsnorm\"\nnorm_position = \"pre\"\npositional = \""
    << (t5.relative_bias ? "t5_relative" : "none")
    << "\"\nrelative_attention_num_buckets = " << t5.relative_buckets
    << "\nrelative_attention_max_distance = " << t5.relative_max_distance
    << "\nshared_embeddings = true\ntie_embeddings = " << (o.tie_embeddings ? "true" : "false")
    << "\ncross_attention = \"dense\"\ndropout = " << toml_real(o.dropout)
    << "\nnorm_eps = " << toml_real(o.norm_eps)
    << "\n\n[model.attention]\nkind = \"dense\"\nbias = " << (t5.attention_bias ? "true" : "false")
    << "\ndropout = " << toml_real(shape.attention_dropout)
    << "\n\n[model.feedforward]\nkind = \"mlp\"\nactivation = \"" << shape.activation
    << "\"\nbias = " << (shape.mlp_bias ? "true" : "false")
    << "\ndropout = " << toml_real(shape.mlp_dropout) << "\n";
  return t.str();
}

namespace {

TensorRule one_to_one(const std::string& patchbay, std::vector<int64_t> shape,
                      const std::string& hf, double scale = 1.0) {
  return TensorRule{patchbay, shape, {HfTensorPart{hf, 0, shape[0], false, scale}}, false, false};
}

// A Patchbay bias HF does not have: must be zero on export, zero after import.
TensorRule absent_in_hf(const std::string& patchbay, int64_t size) {
  TensorRule rule = one_to_one(patchbay, {size}, patchbay);
  rule.hf_absent = true;
  return rule;
}

// The mlp's tensors of one block (prefix "encoder.blocks.i.ffn.", HF "...DenseReluDense.").
void add_mlp_rules(const HfModelShape& shape, const std::string& p, const std::string& h,
                   std::vector<TensorRule>& rules) {
  const int64_t c = shape.options.d_model, f = shape.options.d_ff;
  const bool gated = shape.activation == "swiglu" || shape.activation == "geglu";
  rules.push_back(one_to_one(p + "fc.weight", {f, c}, h + (gated ? "wi_1.weight" : "wi.weight")));
  if (shape.mlp_bias) rules.push_back(absent_in_hf(p + "fc.bias", f));
  if (gated) {
    rules.push_back(one_to_one(p + "gate.weight", {f, c}, h + "wi_0.weight"));
    if (shape.mlp_bias) rules.push_back(absent_in_hf(p + "gate.bias", f));
  }
  rules.push_back(one_to_one(p + "proj.weight", {c, f}, h + "wo.weight"));
  if (shape.mlp_bias) rules.push_back(absent_in_hf(p + "proj.bias", c));
}

// q, k, v, o of a RelativeSelfAttention: q carries Patchbay's 1/√Dh.
void add_self_attention_rules(const HfModelShape& shape, const std::string& p, const std::string& h,
                              std::vector<TensorRule>& rules) {
  const int64_t c = shape.options.d_model;
  const double q_scale = 1.0 / std::sqrt(static_cast<double>(c / shape.options.n_heads));
  for (const char* w : {"q", "k", "v", "o"})
    rules.push_back(one_to_one(p + w + ".weight", {c, c}, h + w + ".weight",
                               std::string(w) == "q" ? q_scale : 1.0));
}

}  // namespace

std::vector<TensorRule> t5_tensor_rules(const HfModelShape& shape) {
  const model::ModelOptions& o = shape.options;
  const HfT5Fields& t5 = shape.t5;
  const int64_t v = o.vocab_size, c = o.d_model;
  const double q_scale = 1.0 / std::sqrt(static_cast<double>(c / o.n_heads));
  std::vector<TensorRule> rules;
  rules.push_back(one_to_one("shared.weight", {v, c}, "shared.weight"));
  auto bias_table = [&](const std::string& stack) {
    TensorRule rule =
        one_to_one(stack + ".relative_bias.weight", {t5.relative_buckets, o.n_heads},
                   stack + ".block.0.layer.0.SelfAttention.relative_attention_bias.weight");
    rule.patchbay_absent = !t5.relative_bias;  // positional = "none": zero tables in HF
    rules.push_back(rule);
  };
  bias_table("encoder");
  for (int64_t i = 0; i < t5.encoder_layers; ++i) {
    const std::string p = "encoder.blocks." + std::to_string(i) + ".",
                      h = "encoder.block." + std::to_string(i) + ".layer.";
    rules.push_back(one_to_one(p + "norm1.gain", {c}, h + "0.layer_norm.weight"));
    add_self_attention_rules(shape, p + "attn.", h + "0.SelfAttention.", rules);
    rules.push_back(one_to_one(p + "norm2.gain", {c}, h + "1.layer_norm.weight"));
    add_mlp_rules(shape, p + "ffn.", h + "1.DenseReluDense.", rules);
  }
  rules.push_back(one_to_one("encoder.norm_f.gain", {c}, "encoder.final_layer_norm.weight"));
  bias_table("decoder");
  for (int64_t i = 0; i < t5.decoder_layers; ++i) {
    const std::string p = "decoder.blocks." + std::to_string(i) + ".",
                      h = "decoder.block." + std::to_string(i) + ".layer.";
    rules.push_back(one_to_one(p + "norm1.gain", {c}, h + "0.layer_norm.weight"));
    add_self_attention_rules(shape, p + "self_attn.", h + "0.SelfAttention.", rules);
    rules.push_back(one_to_one(p + "norm_cross.gain", {c}, h + "1.layer_norm.weight"));
    const std::string x = h + "1.EncDecAttention.";
    rules.push_back(TensorRule{p + "cross_attn.qkv.weight",
                               {3 * c, c},
                               {{x + "q.weight", 0, c, false, q_scale},
                                {x + "k.weight", c, c, false},
                                {x + "v.weight", 2 * c, c, false}},
                               false,
                               false});
    if (t5.attention_bias) rules.push_back(absent_in_hf(p + "cross_attn.qkv.bias", 3 * c));
    rules.push_back(one_to_one(p + "cross_attn.proj.weight", {c, c}, x + "o.weight"));
    if (t5.attention_bias) rules.push_back(absent_in_hf(p + "cross_attn.proj.bias", c));
    rules.push_back(one_to_one(p + "norm2.gain", {c}, h + "2.layer_norm.weight"));
    add_mlp_rules(shape, p + "ffn.", h + "2.DenseReluDense.", rules);
  }
  rules.push_back(one_to_one("decoder.norm_f.gain", {c}, "decoder.final_layer_norm.weight"));
  if (!o.tie_embeddings)
    rules.push_back(one_to_one("head.weight", {v, c},
                               t5.head_from_shared ? "shared.weight" : "lm_head.weight"));
  return rules;
}

bool t5_ignorable_tensor(const std::string& name) {
  return name == "encoder.embed_tokens.weight" || name == "decoder.embed_tokens.weight" ||
         name == "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight";
}

}  // namespace patchbay::interop
