// The [model], [model.attention] and [model.feedforward] config sections (declared with the
// host's schema mechanism, core/config) and their translation into ModelOptions.
//
// Values missing from the config fall back to the schema defaults declared here (parsed
// from the same literals), so ModelOptions' C++ defaults never silently disagree with what
// `patchbay config show` prints.
#include <cmath>
#include <string>

#include "common/error.hpp"
#include "config/config_document.hpp"
#include "config/field_schema.hpp"
#include "config/schema_registry.hpp"
#include "engine/device_name.hpp"
#include "model/encoder_decoder.hpp"
#include "model/language_model.hpp"
#include "model/model_impl.hpp"
#include "patchbay/component.hpp"

namespace patchbay::model {
namespace {

config::HostSection model_section() {
  config::HostSection section;
  section.path = "model";
  section.summary = "the GPT-style language model: sizes, norms, positions, initialisation";
  section.fields = {
      Field::integer("context_length", "256", "longest sequence (positions) the model sees")
          .range(1, 1048576),
      Field::integer("n_layers", "4", "transformer blocks").range(1, 1024),
      Field::integer("n_heads", "4", "attention heads; must divide d_model").range(1, 1024),
      Field::integer("d_model", "128", "width C of the residual stream").range(1, 65536),
      Field::integer("d_ff", "0", "hidden width of the feed-forward block; 0 = 4 * d_model")
          .range(0, 1048576),
      Field::string("norm", "\"layernorm\"",
                    "normalisation: layernorm (gain, bias) or rmsnorm (gain)")
          .choices("layernorm|rmsnorm"),
      Field::string("norm_position", "\"pre\"",
                    "pre: x + f(norm(x)) (GPT-2); post: norm(x + f(x)) (original Transformer)")
          .choices("pre|post"),
      Field::string(
          "positional", "\"learned\"",
          "learned (wpe table), sinusoidal (fixed, added), rotary (inside attention), alibi "
          "(inside attention, if it supports it), none; t5_relative (T5's bucketed relative "
          "bias, architecture = \"encoder_decoder\" only)")
          .choices("learned|sinusoidal|rotary|alibi|none|t5_relative"),
      Field::string("embedding_scale", "\"auto\"",
                    "factor on token embeddings: auto (sqrt(d_model) with sinusoidal positions, "
                    "as Vaswani et al.; 1 otherwise), none (1), sqrt_d_model, or a positive "
                    "number as a string, e.g. \"8.0\""),
      Field::real("rope_theta", "10000.0", "rotary base theta").range(1.0, 1e12),
      Field::boolean("tie_embeddings", "true", "the output head reuses wte (logits = x @ wte^T)"),
      Field::real("dropout", "0.0", "dropout on embeddings and residual branches (training only)")
          .range(0.0, 0.99),
      Field::real("init_std", "0.02", "std of the normal init of weights (GPT-2: 0.02)")
          .range(0.0, 10.0),
      Field::real("norm_eps", "1e-5", "epsilon of the norms").range(0.0, 1.0),
      Field::string("residual", "\"standard\"",
                    "standard: x + f(x); reversible: y1 = x1 + Attn(x2), y2 = x2 + FFN(y1), inputs "
                    "rebuilt from outputs in the backward (activation memory flat in depth)")
          .choices("standard|reversible"),
      Field::integer("seed", "0", "seed of the parameter init (layer seeds derive from it)")
          .range(0, 9007199254740992.0),
      Field::boolean("causal", "true",
                     "true: causal LM (each position sees only earlier ones); false: bidirectional "
                     "encoder for train.objective = \"mlm\" (attention must support it; no "
                     "generation)"),
      // ---- architecture = "encoder_decoder" (encoder_decoder.hpp, docs/encoder_decoder.md)
      Field::string("architecture", "\"single_stack\"",
                    "single_stack: one stack of blocks (causal LM, or encoder with causal = "
                    "false); encoder_decoder: T5-shaped encoder + decoder with cross-attention")
          .choices("single_stack|encoder_decoder"),
      Field::integer("encoder_layers", "0", "encoder blocks (encoder_decoder); 0 = n_layers")
          .range(0, 1024),
      Field::integer("decoder_layers", "0", "decoder blocks (encoder_decoder); 0 = n_layers")
          .range(0, 1024),
      Field::integer("source_context_length", "0",
                     "longest source the encoder reads (encoder_decoder); 0 = context_length")
          .range(0, 1048576),
      Field::boolean("shared_embeddings", "true",
                     "encoder_decoder: one embedding table for sources and decoder inputs"),
      Field::integer("relative_attention_num_buckets", "32",
                     "positional = t5_relative: buckets of the relative bias (T5: 32)")
          .range(2, 4096),
      Field::integer("relative_attention_max_distance", "128",
                     "positional = t5_relative: distance of the last bucket (T5: 128)")
          .range(1, 1048576),
      Field::string("cross_attention", "\"dense\"",
                    "encoder_decoder: the decoder's cross-attention kind (one declaring "
                    "cross-attention: dense, linear, performer); options in "
                    "[model.attention.<kind>]"),
      Field::strings("encoder_feedforward", "[]",
                     "encoder_decoder: feed-forward kinds cycled over the encoder's blocks; "
                     "empty = model.feedforward's"),
      Field::strings("decoder_feedforward", "[]",
                     "encoder_decoder: feed-forward kinds cycled over the decoder's blocks; "
                     "empty = model.feedforward's"),
  };
  return section;
}

config::HostSection layer_section(const char* path, pb_component_kind kind,
                                  const char* default_kind, const char* summary,
                                  const char* kind_doc, const char* pattern_doc) {
  config::HostSection section;
  section.path = path;
  section.summary = summary;
  section.component_kind = kind;
  section.fields = {
      Field::string("kind", default_kind, kind_doc),
      Field::strings("pattern", "[]", pattern_doc),
  };
  return section;
}

// The [model] fields, declared once for lookups of defaults.
const config::HostSection& model_fields() {
  static const config::HostSection section = model_section();
  return section;
}

const pb_config_field& field_of(const std::string& key) {
  for (const pb_config_field& f : model_fields().fields) {
    if (key == f.key) return f;
  }
  throw Error(ErrorKind::kInternal, "model config: no field '" + key + "' in the [model] schema");
}

// The node at model.<key>, or the schema default's node (kept alive in `holder`).
const toml::node& value_of(const config::ResolvedConfig& config, const std::string& key,
                           toml::table& holder) {
  if (const toml::node* node = config.find("model." + key)) {
    const std::optional<config::ValueProblem> problem = config::check_value(field_of(key), *node);
    if (!problem) return *node;
    throw Error(ErrorKind::kInvalidArgument, "model." + key + " (" +
                                                 config.locate("model." + key).to_string() +
                                                 "): " + problem->problem + ": expected " +
                                                 problem->expected + ", found " + problem->found);
  }
  std::optional<toml::table> parsed = config::parse_default(field_of(key));
  holder = std::move(*parsed);
  return *holder.get("value");
}

int64_t int_value(const config::ResolvedConfig& config, const std::string& key) {
  toml::table holder;
  return value_of(config, key, holder).as_integer()->get();
}
double float_value(const config::ResolvedConfig& config, const std::string& key) {
  toml::table holder;
  const toml::node& node = value_of(config, key, holder);
  return node.is_integer() ? static_cast<double>(node.as_integer()->get())
                           : node.as_floating_point()->get();
}
bool bool_value(const config::ResolvedConfig& config, const std::string& key) {
  toml::table holder;
  return value_of(config, key, holder).as_boolean()->get();
}
std::string string_value(const config::ResolvedConfig& config, const std::string& key) {
  toml::table holder;
  return value_of(config, key, holder).as_string()->get();
}

// kind, or the pattern when one is given (each entry a non-empty string).
std::vector<std::string> layer_kinds(const config::ResolvedConfig& config,
                                     const std::string& section, const std::string& default_kind) {
  std::vector<std::string> kinds;
  if (const toml::node* pattern = config.find(section + ".pattern")) {
    const toml::array* items = pattern->as_array();
    if (items == nullptr) {
      throw Error(ErrorKind::kInvalidArgument, section + ".pattern (" +
                                                   config.locate(section + ".pattern").to_string() +
                                                   "): expected an array of component names");
    }
    for (const toml::node& item : *items) {
      if (!item.is_string() || item.as_string()->get().empty()) {
        throw Error(ErrorKind::kInvalidArgument,
                    section + ".pattern (" + config.locate(section + ".pattern").to_string() +
                        "): every entry must be a component name (a non-empty string)");
      }
      kinds.push_back(item.as_string()->get());
    }
  }
  if (!kinds.empty()) return kinds;
  if (const toml::node* kind = config.find(section + ".kind");
      kind != nullptr && kind->is_string()) {
    return {kind->as_string()->get()};
  }
  return {default_kind};
}

}  // namespace

void declare_model_sections(config::SchemaRegistry& schema) {
  schema.add_section(model_section());
  schema.add_section(layer_section("model.attention", PB_KIND_ATTENTION,
                                   "\"dense\"",  // kDefaultAttentionKind
                                   "the attention component of every block and its settings",
                                   "attention component, e.g. \"dense\" (patchbay plugins list)",
                                   "components cycled over the blocks (block i uses pattern[i % "
                                   "len]), each with its options in [model.attention.<name>]; "
                                   "empty = kind everywhere"));
  schema.add_section(layer_section("model.feedforward", PB_KIND_FEEDFORWARD, "\"mlp\"",
                                   "the feed-forward component of every block and its settings",
                                   "feed-forward component, e.g. \"mlp\" (patchbay plugins list)",
                                   "components cycled over the blocks (block i uses pattern[i % "
                                   "len]), each with its options in [model.feedforward.<name>]; "
                                   "empty = kind everywhere"));
}

namespace {

// [model] as ModelOptions, whichever the architecture.
ModelOptions read_model_options(const config::ResolvedConfig& config, int64_t vocab_size) {
  ModelOptions o;
  o.vocab_size = vocab_size;
  o.context_length = int_value(config, "context_length");
  o.n_layers = int_value(config, "n_layers");
  o.n_heads = int_value(config, "n_heads");
  o.d_model = int_value(config, "d_model");
  const int64_t d_ff = int_value(config, "d_ff");
  o.d_ff = d_ff == 0 ? 4 * o.d_model : d_ff;
  o.norm = string_value(config, "norm") == "rmsnorm" ? NormKind::kRmsNorm : NormKind::kLayerNorm;
  o.pre_norm = string_value(config, "norm_position") == "pre";
  const std::string positional = string_value(config, "positional");
  o.positional = positional == "learned"      ? PositionalKind::kLearned
                 : positional == "sinusoidal" ? PositionalKind::kSinusoidal
                 : positional == "rotary"     ? PositionalKind::kRotary
                 : positional == "alibi"      ? PositionalKind::kAlibi
                                              : PositionalKind::kNone;
  try {
    o.embedding_scale = parse_embedding_scale(string_value(config, "embedding_scale"), o.d_model);
  } catch (const Error& e) {
    throw Error(ErrorKind::kInvalidArgument,
                "model.embedding_scale (" + config.locate("model.embedding_scale").to_string() +
                    "): " + e.what());
  }
  o.rope_theta = float_value(config, "rope_theta");
  o.tie_embeddings = bool_value(config, "tie_embeddings");
  o.dropout = float_value(config, "dropout");
  o.init_std = float_value(config, "init_std");
  o.norm_eps = float_value(config, "norm_eps");
  o.reversible = string_value(config, "residual") == "reversible";
  o.seed = static_cast<uint64_t>(int_value(config, "seed"));
  o.causal = bool_value(config, "causal");
  if (const toml::node* device = config.find("run.device");
      device != nullptr && device->is_string())
    o.device = engine::parse_device(device->as_string()->get());
  if (o.d_model % o.n_heads != 0) {
    throw Error(ErrorKind::kInvalidArgument,
                "model.n_heads (" + config.locate("model.n_heads").to_string() +
                    "): " + std::to_string(o.n_heads) +
                    " heads do not divide d_model = " + std::to_string(o.d_model) +
                    "; choose n_heads dividing d_model (head width = d_model / n_heads)");
  }
  o.attention_kinds = layer_kinds(config, "model.attention", kDefaultAttentionKind);
  o.feedforward_kinds = layer_kinds(config, "model.feedforward", kDefaultFeedforwardKind);
  return o;
}

std::vector<std::string> string_list(const config::ResolvedConfig& config, const std::string& key) {
  std::vector<std::string> out;
  if (const toml::node* node = config.find("model." + key); node != nullptr && node->is_array())
    for (const toml::node& item : *node->as_array())
      if (item.is_string()) out.push_back(item.as_string()->get());
  return out;
}

std::string at(const config::ResolvedConfig& config, const std::string& key) {
  const std::string location = config.locate(key).to_string();
  return location.empty() ? key : key + " (" + location + ")";
}

}  // namespace

std::string model_architecture(const config::ResolvedConfig& config) {
  return string_value(config, "architecture");
}

ModelOptions model_options_from_config(const config::ResolvedConfig& config, int64_t vocab_size) {
  if (model_architecture(config) == "encoder_decoder")
    throw Error(ErrorKind::kInvalidArgument,
                at(config, "model.architecture") +
                    " = \"encoder_decoder\": this command builds a single-stack model; the "
                    "encoder-decoder is built by the encoder-decoder model "
                    "(EncoderDecoderModel) and its objectives (docs/encoder_decoder.md)");
  if (string_value(config, "positional") == "t5_relative")
    throw Error(ErrorKind::kInvalidArgument,
                at(config, "model.positional") +
                    " = \"t5_relative\" is built for architecture = \"encoder_decoder\" only; "
                    "a single-stack model takes learned, sinusoidal, rotary, alibi or none");
  return read_model_options(config, vocab_size);
}

EncoderDecoderOptions encoder_decoder_options_from_config(const config::ResolvedConfig& config,
                                                          int64_t vocab_size) {
  auto refuse = [&](const std::string& key, const std::string& why) {
    throw Error(ErrorKind::kInvalidArgument, at(config, key) + ": " + why);
  };
  if (model_architecture(config) != "encoder_decoder")
    refuse("model.architecture", "expected \"encoder_decoder\"");
  EncoderDecoderOptions e;
  e.base = read_model_options(config, vocab_size);
  const std::string positional = string_value(config, "positional");
  if (positional != "t5_relative" && positional != "none")
    refuse("model.positional", "\"" + positional +
                                   "\" is not built for the encoder-decoder; use \"t5_relative\" "
                                   "(T5's relative bias) or \"none\"");
  if (!e.base.pre_norm)
    refuse("model.norm_position", "the encoder-decoder has T5's pre-norm blocks; set \"pre\"");
  if (e.base.reversible)
    refuse("model.residual", "reversible blocks are not built for the encoder-decoder");
  if (!e.base.causal)
    refuse("model.causal",
           "the encoder-decoder's encoder is always bidirectional and its decoder causal; "
           "remove model.causal");
  if (config.find("model.attention.pattern") != nullptr &&
      config.find("model.attention.pattern")->is_array() &&
      !config.find("model.attention.pattern")->as_array()->empty())
    refuse("model.attention.pattern",
           "the encoder-decoder's self-attention is its own relative-bias attention and its "
           "cross-attention is model.cross_attention; remove the pattern");
  e.relative_bias = positional == "t5_relative";
  const int64_t layers = int_value(config, "n_layers");
  const int64_t encoder_layers = int_value(config, "encoder_layers");
  const int64_t decoder_layers = int_value(config, "decoder_layers");
  e.encoder_layers = encoder_layers == 0 ? layers : encoder_layers;
  e.decoder_layers = decoder_layers == 0 ? layers : decoder_layers;
  const int64_t source = int_value(config, "source_context_length");
  e.source_context_length = source == 0 ? e.base.context_length : source;
  e.shared_embeddings = bool_value(config, "shared_embeddings");
  e.relative_buckets = static_cast<int32_t>(int_value(config, "relative_attention_num_buckets"));
  e.relative_max_distance =
      static_cast<int32_t>(int_value(config, "relative_attention_max_distance"));
  e.cross_attention = string_value(config, "cross_attention");
  e.encoder_feedforward = string_list(config, "encoder_feedforward");
  e.decoder_feedforward = string_list(config, "decoder_feedforward");
  return e;
}

ComponentTables component_tables_from_config(const config::ResolvedConfig& config) {
  ComponentTables tables;
  if (const toml::node* a = config.find("model.attention"); a != nullptr && a->is_table()) {
    tables.attention = *a->as_table();
  }
  if (const toml::node* f = config.find("model.feedforward"); f != nullptr && f->is_table()) {
    tables.feedforward = *f->as_table();
  }
  return tables;
}

std::optional<double> parse_embedding_scale(const std::string& value, int64_t d_model) {
  if (value == "auto") return std::nullopt;
  if (value == "none") return 1.0;
  if (value == "sqrt_d_model") return std::sqrt(static_cast<double>(d_model));
  size_t used = 0;
  double number = 0.0;
  try {
    number = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || !std::isfinite(number) || number <= 0.0)
    throw Error(ErrorKind::kInvalidArgument,
                "embedding_scale \"" + value +
                    "\" is not \"auto\", \"none\", \"sqrt_d_model\" or a positive number; "
                    "write e.g. embedding_scale = \"sqrt_d_model\" or \"8.0\"");
  return number;
}

double resolved_embedding_scale(const ModelOptions& options) {
  if (options.embedding_scale) return *options.embedding_scale;
  return options.positional == PositionalKind::kSinusoidal
             ? std::sqrt(static_cast<double>(options.d_model))
             : 1.0;
}

const char* norm_kind_name(NormKind kind) {
  return kind == NormKind::kRmsNorm ? "rmsnorm" : "layernorm";
}

const char* positional_kind_name(PositionalKind kind) {
  switch (kind) {
    case PositionalKind::kLearned:
      return "learned";
    case PositionalKind::kSinusoidal:
      return "sinusoidal";
    case PositionalKind::kRotary:
      return "rotary";
    case PositionalKind::kAlibi:
      return "alibi";
    case PositionalKind::kNone:
      return "none";
  }
  return "none";
}

}  // namespace patchbay::model
