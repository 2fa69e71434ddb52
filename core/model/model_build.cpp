// LanguageModel::build: checks the options, creates every block's attention and feed-forward
// plugin objects through the registry (refusing layers that cannot serve a causal LM before
// creating anything), initialises the model's own tensors and lists the parameters.
#include <cmath>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "config/component_options.hpp"
#include "config/component_view.hpp"
#include "engine/ops.hpp"
#include "engine/ops_table.hpp"
#include "model/build_support.hpp"
#include "model/model_impl.hpp"
#include "runtime/host_api.hpp"
#include "runtime/registry.hpp"

namespace patchbay::model {
namespace {

namespace eng = engine;

void require(bool ok, const std::string& message) {
  if (!ok) throw Error(ErrorKind::kInvalidArgument, "model: " + message);
}

void check_options(const ModelOptions& o) {
  require(o.vocab_size >= 1, "vocab_size must be >= 1 (it comes from the tokenizer), found " +
                                 std::to_string(o.vocab_size));
  require(o.context_length >= 1,
          "context_length must be >= 1, found " + std::to_string(o.context_length));
  require(o.n_layers >= 1, "n_layers must be >= 1, found " + std::to_string(o.n_layers));
  require(o.n_heads >= 1 && o.d_model >= 1 && o.d_model % o.n_heads == 0,
          "n_heads (" + std::to_string(o.n_heads) + ") must divide d_model (" +
              std::to_string(o.d_model) + ")");
  require(o.d_ff >= 1, "d_ff must be >= 1, found " + std::to_string(o.d_ff));
  require(o.dropout >= 0 && o.dropout < 1,
          "dropout must lie in [0, 1), found " + std::to_string(o.dropout));
  require(o.init_std >= 0, "init_std must be >= 0");
  require(o.norm_eps >= 0, "norm_eps must be >= 0");
  require(!o.reversible || o.pre_norm,
          "residual = \"reversible\" uses pre-norm branches; set norm_position = \"pre\"");
  require(!o.attention_kinds.empty(), "attention_kinds (model.attention.pattern) is empty");
  require(!o.feedforward_kinds.empty(), "feedforward_kinds (model.feedforward.pattern) is empty");
}

}  // namespace

namespace build_support {

// The engine's ops table in the registry's host api (set once for the process-wide api).
void attach_engine(const runtime::Registry& registry) {
  const pb_host_api* host = registry.host();
  if (host->ops == eng::host_ops_table()) return;
  if (host == runtime::host_api() && host->ops == nullptr) {
    eng::set_ops_status_functions(
        {host->status_create, host->status_code, host->status_message, host->status_free});
    runtime::set_host_ops(eng::host_ops_table());
    return;
  }
  throw Error(ErrorKind::kInternal,
              "model: the registry's host api carries another ops table than the engine's");
}

// Drawn on the CPU and moved to `device`: one seed gives the same model on every device.
eng::Tensor normal_parameter(const eng::Shape& shape, double std, eng::Generator& gen,
                             eng::Device device) {
  eng::NoGradGuard no_grad;
  eng::Tensor t = eng::mul_scalar(eng::randn(shape, gen), std).to(device);
  t.set_requires_grad(true);
  return t;
}

eng::Tensor constant_parameter(const eng::Shape& shape, double value, eng::Device device) {
  eng::Tensor t = eng::full(shape, value, eng::DType::kF32, device);
  t.set_requires_grad(true);
  return t;
}

// table[p, 2i] = sin(p / 10000^(2i/C)), table[p, 2i+1] = cos(same) (Vaswani et al. 2017).
eng::Tensor sinusoid_table(int64_t positions, int64_t channels) {
  std::vector<float> values(static_cast<size_t>(positions * channels));
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t pair = c / 2;
      const double angle =
          static_cast<double>(p) /
          std::pow(10000.0, 2.0 * static_cast<double>(pair) / static_cast<double>(channels));
      values[static_cast<size_t>(p * channels + c)] =
          static_cast<float>(c % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
  }
  return eng::Tensor::from_vector(values, {positions, channels});
}

pb_positional_kind positional_for_layers(PositionalKind kind) {
  switch (kind) {
    case PositionalKind::kLearned:
      return PB_POSITIONAL_LEARNED;
    case PositionalKind::kSinusoidal:
      return PB_POSITIONAL_SINUSOIDAL;
    case PositionalKind::kRotary:
      return PB_POSITIONAL_ROTARY;
    case PositionalKind::kAlibi:
      return PB_POSITIONAL_ALIBI;
    case PositionalKind::kNone:
      return PB_POSITIONAL_NONE;
  }
  return PB_POSITIONAL_NONE;
}

// LayerPartitions: build_support.hpp.

pb_status* mark_partitioned(void* tp_host, const char* name, int32_t partition_dim,
                            int32_t partition_stride) {
  auto* layer = static_cast<LayerPartitions*>(tp_host);
  if (name == nullptr || partition_dim < 0 || partition_stride < 1)
    return layer->host->status_create(
        PB_STATUS_INVALID_ARGUMENT,
        "tp_mark_partitioned: expected a parameter name, partition_dim >= 0 and "
        "partition_stride >= 1");
  layer->marked[name] = TensorParallelPartition{partition_dim, partition_stride};
  return nullptr;
}

pb_layer_context layer_context(const ModelOptions& o, int64_t layer, uint64_t seed,
                               LayerPartitions& partitions) {
  pb_layer_context ctx{};
  ctx.struct_size = sizeof(ctx);
  ctx.d_model = o.d_model;
  ctx.n_heads = o.n_heads;
  ctx.d_ff = o.d_ff;
  ctx.max_seq_len = o.context_length;
  ctx.layer_index = layer;
  ctx.n_layers = o.n_layers;
  ctx.causal = o.causal ? 1 : 0;
  ctx.positional = positional_for_layers(o.positional);
  ctx.rope_theta = o.rope_theta;
  ctx.init_std = o.init_std;
  ctx.residual_init_std = o.init_std / std::sqrt(2.0 * static_cast<double>(o.n_layers));
  ctx.seed = seed;
  ctx.param_dtype = PB_DTYPE_F32;
  ctx.device_type = o.device.type == eng::DeviceType::kCpu ? PB_DEVICE_CPU : PB_DEVICE_CUDA;
  ctx.device_index = o.device.index;
  ctx.tp_rank = o.tp_rank;
  ctx.tp_size = o.tp_size;
  if (o.tp_size > 1) {
    ctx.tp_mark_partitioned = mark_partitioned;
    ctx.tp_host = &partitions;
  }
  return ctx;
}

std::span<const pb_config_field> schema_of(const runtime::ComponentEntry& entry) {
  return {entry.descriptor->config_fields, entry.descriptor->config_field_count};
}

// The host keys of [model.attention] and [model.feedforward] (model_config.cpp declares them).
const std::vector<std::string>& layer_host_keys() {
  static const std::vector<std::string> keys{"kind", config::kComponentPatternKey};
  return keys;
}

// The options each distinct component of a layer section receives, checked against its own
// schema (the validator does this for configs; tables built by hand get the same rule).
// Flat keys belong to `kind`, or to `default_kind` in a table without one (as the schema
// default fills it in).
std::map<std::string, toml::table> layer_options(
    const toml::table& given, const std::vector<std::string>& kinds,
    const std::vector<const runtime::ComponentEntry*>& entries, const std::string& section,
    const char* default_kind) {
  toml::table table = given;
  if (!table.contains("kind")) table.insert("kind", default_kind);
  std::map<std::string, toml::table> options;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (options.count(kinds[i]) != 0) continue;
    toml::table own = config::component_options(table, kinds[i], layer_host_keys());
    std::string problems;
    for (const std::string& p : config::option_problems(own, schema_of(*entries[i]), true)) {
      problems += (problems.empty() ? "" : "; ") + p;
    }
    require(problems.empty(), "[" + section + "] options of '" + kinds[i] +
                                  "' (flat keys when it is the kind, else [" + section + "." +
                                  kinds[i] + "]): " + problems);
    options.emplace(kinds[i], std::move(own));
  }
  return options;
}

}  // namespace build_support

using namespace build_support;

namespace {

std::string layer_label(int64_t layer, const char* what, const std::string& kind,
                        const runtime::Registry& registry, const runtime::ComponentEntry& entry) {
  return "block " + std::to_string(layer) + " " + what + " '" + kind + "' (" +
         registry.plugin_of(entry).file.string() + ")";
}

// Refuses, before creating anything, a layer that cannot serve a causal LM.
void check_attention_capabilities(const ModelOptions& o, int64_t layer, const std::string& kind,
                                  const runtime::Registry& registry,
                                  const runtime::ComponentEntry& entry) {
  const auto* vt = static_cast<const pb_attention_vtable*>(entry.descriptor->vtable);
  const std::string label = layer_label(layer, "attention", kind, registry, entry);
  if (!o.causal)
    require((vt->capabilities & PB_ATTENTION_CAP_NONCAUSAL) != 0,
            label +
                " cannot be used in a bidirectional model (model.causal = false): it does not "
                "declare PB_ATTENTION_CAP_NONCAUSAL, so it has no mode in which every position "
                "sees the whole sequence; choose one that does (\"dense\", \"linear\" or "
                "\"performer\" with causal = false, or \"linformer\") or set model.causal = true");
  require(!o.causal || (vt->capabilities & PB_ATTENTION_CAP_CAUSAL) != 0,
          label +
              " cannot be used in a causal language model: it does not declare "
              "PB_ATTENTION_CAP_CAUSAL, so "
              "every position would attend to later ones and future tokens would leak into the "
              "predictions; "
              "choose a causal attention (e.g. \"dense\") for this block");
  if (o.positional == PositionalKind::kRotary) {
    require(
        (vt->capabilities & PB_ATTENTION_CAP_ROTARY) != 0,
        label +
            " does not apply rotary positions (no PB_ATTENTION_CAP_ROTARY); use model.positional = "
            "\"learned\" or \"sinusoidal\", or another attention");
  }
  if (o.positional == PositionalKind::kAlibi) {
    require(
        (vt->capabilities & PB_ATTENTION_CAP_ALIBI) != 0,
        label +
            " does not apply ALiBi (no PB_ATTENTION_CAP_ALIBI); choose another model.positional");
  }
}

// Tensor parallelism splits every attention and feed-forward layer; one that cannot is refused.
void check_tensor_parallel_capability(const ModelOptions& o, const std::string& label,
                                      bool capable) {
  require(o.tp_size <= 1 || capable,
          label +
              " cannot be split over tensor-parallel ranks ([parallelism] kind = "
              "\"mpi_tensor\", " +
              std::to_string(o.tp_size) +
              " ranks): it does not declare the TENSOR_PARALLEL capability. Tensor parallelism "
              "needs every layer to split: use attention \"dense\" and feed-forward \"mlp\", "
              "or parallelism.kind = \"mpi_data\" / \"mpi_zero1\"");
}

void check_feedforward_capabilities(int64_t layer, const std::string& kind,
                                    const runtime::Registry& registry,
                                    const runtime::ComponentEntry& entry) {
  const auto* vt = static_cast<const pb_feedforward_vtable*>(entry.descriptor->vtable);
  require((vt->capabilities & PB_FEEDFORWARD_CAP_CAUSAL) != 0,
          layer_label(layer, "feed-forward", kind, registry, entry) +
              " cannot be used in a causal language model: it does not declare "
              "PB_FEEDFORWARD_CAP_CAUSAL (its "
              "routing mixes positions, as expert-choice routing does), so future tokens would "
              "leak into the "
              "predictions; choose a token-choice or dense feed-forward for this block");
}

// Moves the layer's mark of parameter `name` (if any) into `out` under its model name,
// after checking it against the parameter's shape.
void take_partition(LayerPartitions& layer, const std::string& name, const eng::Tensor& tensor,
                    const std::string& model_name,
                    std::map<std::string, TensorParallelPartition>& out) {
  const auto it = layer.marked.find(name);
  if (it == layer.marked.end()) return;
  const TensorParallelPartition p = it->second;
  layer.marked.erase(it);
  require(p.dim < tensor.dim() && tensor.shape()[static_cast<size_t>(p.dim)] % p.stride == 0,
          model_name + " was marked partitioned along dim " + std::to_string(p.dim) + " in " +
              std::to_string(p.stride) + " blocks, which its shape " + tensor.str() +
              " does not allow");
  out[model_name] = p;
}

void require_all_marked_exist(const LayerPartitions& layer, const std::string& prefix) {
  require(layer.marked.empty(),
          prefix + " marked a parameter it does not report: '" +
              (layer.marked.empty() ? std::string() : layer.marked.begin()->first) + "'");
}

void add_norm_parameters(std::vector<NamedParameter>& out, const std::string& prefix,
                         const Norm& n) {
  out.push_back({prefix + ".gain", n.gain, true});
  if (n.bias.defined()) out.push_back({prefix + ".bias", n.bias, true});
}

}  // namespace

std::unique_ptr<LanguageModel> LanguageModel::build(const ModelOptions& options,
                                                    const ComponentTables& tables,
                                                    runtime::Registry& registry) {
  check_options(options);
  attach_engine(registry);
  const ModelOptions& o = options;

  // Resolve and check every block's components before creating anything.
  std::vector<const runtime::ComponentEntry*> attention_entries, feedforward_entries;
  for (const std::string& kind : o.attention_kinds)
    attention_entries.push_back(&registry.find(PB_KIND_ATTENTION, kind));
  for (const std::string& kind : o.feedforward_kinds) {
    feedforward_entries.push_back(&registry.find(PB_KIND_FEEDFORWARD, kind));
  }
  for (int64_t i = 0; i < o.n_layers; ++i) {
    const size_t a = static_cast<size_t>(i) % o.attention_kinds.size();
    const size_t f = static_cast<size_t>(i) % o.feedforward_kinds.size();
    check_attention_capabilities(o, i, o.attention_kinds[a], registry, *attention_entries[a]);
    if (o.causal)  // a bidirectional model accepts position-mixing layers (expert choice)
      check_feedforward_capabilities(i, o.feedforward_kinds[f], registry, *feedforward_entries[f]);
    const auto* attention_vt =
        static_cast<const pb_attention_vtable*>(attention_entries[a]->descriptor->vtable);
    check_tensor_parallel_capability(
        o, layer_label(i, "attention", o.attention_kinds[a], registry, *attention_entries[a]),
        (attention_vt->capabilities & PB_ATTENTION_CAP_TENSOR_PARALLEL) != 0);
    const auto* feedforward_vt =
        static_cast<const pb_feedforward_vtable*>(feedforward_entries[f]->descriptor->vtable);
    check_tensor_parallel_capability(
        o,
        layer_label(i, "feed-forward", o.feedforward_kinds[f], registry, *feedforward_entries[f]),
        (feedforward_vt->capabilities & PB_FEEDFORWARD_CAP_TENSOR_PARALLEL) != 0);
  }
  require(o.tp_size >= 1 && o.tp_rank >= 0 && o.tp_rank < o.tp_size,
          "tensor-parallel rank " + std::to_string(o.tp_rank) + " outside [0, " +
              std::to_string(o.tp_size) + ")");
  const std::map<std::string, toml::table> attention_options =
      layer_options(tables.attention, o.attention_kinds, attention_entries, "model.attention",
                    kDefaultAttentionKind);
  const std::map<std::string, toml::table> feedforward_options =
      layer_options(tables.feedforward, o.feedforward_kinds, feedforward_entries,
                    "model.feedforward", kDefaultFeedforwardKind);
  // Reversible blocks replay the model's dropout masks, not a plugin's own: refuse those.
  if (o.reversible)
    for (const auto& [section, options] :
         {std::pair<const char*, const std::map<std::string, toml::table>*>{"model.attention",
                                                                            &attention_options},
          std::pair<const char*, const std::map<std::string, toml::table>*>{"model.feedforward",
                                                                            &feedforward_options}})
      for (const auto& [kind, table] : *options)
        if (const std::optional<double> d = table["dropout"].value<double>(); d && *d > 0)
          throw Error(ErrorKind::kInvalidArgument,
                      std::string(section) + "." + kind + ".dropout = " + std::to_string(*d) +
                          ": residual = \"reversible\" cannot replay a plugin's own dropout in "
                          "the backward; set it to 0 and use model.dropout (replayed exactly)");

  auto impl = std::make_unique<Impl>();
  impl->options = o;
  impl->dropout_generator = eng::Generator(o.seed * 1000003ull + 0x9E3779B97F4A7C15ull);
  eng::Generator init(o.seed);
  const int64_t c = o.d_model;
  impl->wte = normal_parameter({o.vocab_size, c}, o.init_std, init, o.device);
  if (o.positional == PositionalKind::kLearned)
    impl->wpe = normal_parameter({o.context_length, c}, o.init_std, init, o.device);
  if (o.positional == PositionalKind::kSinusoidal)
    impl->sinusoid = sinusoid_table(o.context_length, c).to(o.device);
  auto make_norm = [&] {
    Norm n;
    n.gain = constant_parameter({c}, 1.0, o.device);
    if (o.norm == NormKind::kLayerNorm) n.bias = constant_parameter({c}, 0.0, o.device);
    return n;
  };

  std::vector<NamedParameter>& params = impl->parameters;
  params.push_back({"wte.weight", impl->wte, false});
  if (impl->wpe.defined()) params.push_back({"wpe.weight", impl->wpe, false});
  // Reversible blocks replay the model's dropout masks, not a plugin's own: refuse those.
  if (o.reversible)
    for (const auto& [table, name] :
         {std::pair<const toml::table*, const char*>{&tables.attention, "model.attention"},
          std::pair<const toml::table*, const char*>{&tables.feedforward, "model.feedforward"}})
      if (const std::optional<double> d = (*table)["dropout"].value<double>(); d && *d > 0)
        throw Error(ErrorKind::kInvalidArgument,
                    std::string(name) + ".dropout = " + std::to_string(*d) +
                        ": residual = \"reversible\" cannot replay a plugin's own dropout in the "
                        "backward; set it to 0 and use model.dropout (replayed exactly)");
  for (int64_t i = 0; i < o.n_layers; ++i) {
    const size_t a = static_cast<size_t>(i) % o.attention_kinds.size();
    const size_t f = static_cast<size_t>(i) % o.feedforward_kinds.size();
    const uint64_t layer_seed = o.seed * 1000003ull + 2ull * static_cast<uint64_t>(i);
    const std::string prefix = "blocks." + std::to_string(i);
    Block block;
    block.norm1 = make_norm();
    block.norm2 = make_norm();

    const config::ComponentConfigView attention_config(attention_options.at(o.attention_kinds[a]),
                                                       schema_of(*attention_entries[a]),
                                                       "model.attention." + o.attention_kinds[a]);
    block.attn = std::make_unique<runtime::AttentionHandle>(
        registry.create(PB_KIND_ATTENTION, o.attention_kinds[a], *attention_config.view()),
        registry.host());
    LayerPartitions attention_partitions{registry.host(), o.tp_size, {}};
    block.attn->init(layer_context(o, i, layer_seed, attention_partitions));

    const config::ComponentConfigView feedforward_config(
        feedforward_options.at(o.feedforward_kinds[f]), schema_of(*feedforward_entries[f]),
        "model.feedforward." + o.feedforward_kinds[f]);
    block.ffn = std::make_unique<runtime::FeedForwardHandle>(
        registry.create(PB_KIND_FEEDFORWARD, o.feedforward_kinds[f], *feedforward_config.view()),
        registry.host());
    LayerPartitions feedforward_partitions{registry.host(), o.tp_size, {}};
    block.ffn->init(layer_context(o, i, layer_seed + 1, feedforward_partitions));

    add_norm_parameters(params, prefix + ".norm1", block.norm1);
    for (runtime::AttentionHandle::Parameter& p : block.attn->parameters()) {
      const bool no_decay = p.tensor.dim() < 2;
      take_partition(attention_partitions, p.name, p.tensor, prefix + ".attn." + p.name,
                     impl->tp_partitions);
      params.push_back({prefix + ".attn." + p.name, std::move(p.tensor), no_decay});
    }
    require_all_marked_exist(attention_partitions, prefix + ".attn");
    add_norm_parameters(params, prefix + ".norm2", block.norm2);
    for (runtime::FeedForwardHandle::Parameter& p : block.ffn->parameters()) {
      const bool no_decay = p.tensor.dim() < 2;
      take_partition(feedforward_partitions, p.name, p.tensor, prefix + ".ffn." + p.name,
                     impl->tp_partitions);
      params.push_back({prefix + ".ffn." + p.name, std::move(p.tensor), no_decay});
    }
    require_all_marked_exist(feedforward_partitions, prefix + ".ffn");
    impl->blocks.push_back(std::move(block));
  }
  impl->norm_f = make_norm();
  add_norm_parameters(params, "norm_f", impl->norm_f);
  if (!o.tie_embeddings) {
    impl->head = normal_parameter({o.vocab_size, c}, o.init_std, init, o.device);
    params.push_back({"head.weight", impl->head, false});
  }
  return std::unique_ptr<LanguageModel>(new LanguageModel(std::move(impl)));
}

}  // namespace patchbay::model
