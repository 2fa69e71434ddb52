// EncoderDecoderModel::build: checks the options, refuses a cross-attention kind without
// PB_ATTENTION_CAP_CROSS and a decoder feed-forward that mixes positions before creating
// anything, creates the plugin layers of both stacks, initialises the model's own tensors and
// lists the parameters in the documented order (encoder_decoder.hpp).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "common/error.hpp"
#include "config/component_view.hpp"
#include "engine/ops.hpp"
#include "model/build_support.hpp"
#include "model/encoder_decoder_impl.hpp"
#include "runtime/host_api.hpp"
#include "runtime/registry.hpp"

namespace patchbay::model {
namespace {

namespace eng = engine;
using namespace build_support;

void require_seq2seq(bool ok, const std::string& message) {
  if (!ok) throw Error(ErrorKind::kInvalidArgument, "encoder-decoder model: " + message);
}

void check_seq2seq_options(const EncoderDecoderOptions& e) {
  const ModelOptions& o = e.base;
  require_seq2seq(o.vocab_size >= 1, "vocab_size must be >= 1 (it comes from the tokenizer)");
  require_seq2seq(e.encoder_layers >= 1 && e.decoder_layers >= 1,
                  "model.encoder_layers and model.decoder_layers must be >= 1, found " +
                      std::to_string(e.encoder_layers) + " and " +
                      std::to_string(e.decoder_layers));
  require_seq2seq(o.context_length >= 1 && e.source_context_length >= 1,
                  "model.context_length and model.source_context_length must be >= 1");
  require_seq2seq(o.n_heads >= 1 && o.d_model >= 1 && o.d_model % o.n_heads == 0,
                  "model.n_heads (" + std::to_string(o.n_heads) + ") must divide model.d_model (" +
                      std::to_string(o.d_model) + ")");
  require_seq2seq(o.d_ff >= 1, "model.d_ff must be >= 1");
  require_seq2seq(o.dropout >= 0 && o.dropout < 1, "model.dropout must lie in [0, 1)");
  require_seq2seq(o.pre_norm, "model.norm_position must be \"pre\" (T5's pre-norm blocks)");
  require_seq2seq(!e.relative_bias || (e.relative_buckets >= 2 && e.relative_max_distance >= 1),
                  "model.relative_attention_num_buckets must be >= 2 and "
                  "model.relative_attention_max_distance >= 1");
  require_seq2seq(o.tp_size <= 1, "tensor parallelism is not built for the encoder-decoder");
}

const std::vector<std::string>& or_default(const std::vector<std::string>& kinds,
                                           const std::vector<std::string>& fallback) {
  return kinds.empty() ? fallback : kinds;
}

// The stack's feed-forward components, resolved and (decoder) checked for causality.
std::vector<const runtime::ComponentEntry*> feedforward_entries(
    const std::vector<std::string>& kinds, bool causal, const char* key,
    runtime::Registry& registry) {
  std::vector<const runtime::ComponentEntry*> entries;
  for (const std::string& kind : kinds) {
    entries.push_back(&registry.find(PB_KIND_FEEDFORWARD, kind));
    const auto* vt = static_cast<const pb_feedforward_vtable*>(entries.back()->descriptor->vtable);
    require_seq2seq(!causal || (vt->capabilities & PB_FEEDFORWARD_CAP_CAUSAL) != 0,
                    std::string(key) + " '" + kind + "' (" +
                        registry.plugin_of(*entries.back()).file.string() +
                        ") cannot be used in the decoder: it does not declare "
                        "PB_FEEDFORWARD_CAP_CAUSAL (its routing mixes positions), so later "
                        "target tokens would leak into earlier predictions; choose a "
                        "token-choice or dense feed-forward for the decoder");
  }
  return entries;
}

// The options of one stack's layers as the single-stack helpers expect them.
ModelOptions stack_options(const EncoderDecoderOptions& e, int64_t layers, bool causal) {
  ModelOptions o = e.base;
  o.n_layers = layers;
  o.causal = causal;
  o.positional = PositionalKind::kNone;  // positions are the model's relative bias
  return o;
}

Norm make_norm(const ModelOptions& o) {
  Norm n;
  n.gain = constant_parameter({o.d_model}, 1.0, o.device);
  if (o.norm == NormKind::kLayerNorm) n.bias = constant_parameter({o.d_model}, 0.0, o.device);
  return n;
}

void add_norm(std::vector<NamedParameter>& out, const std::string& prefix, const Norm& n) {
  out.push_back({prefix + ".gain", n.gain, true});
  if (n.bias.defined()) out.push_back({prefix + ".bias", n.bias, true});
}

// Creates and initialises one plugin feed-forward layer; appends its parameters.
std::unique_ptr<runtime::FeedForwardHandle> make_feedforward(
    const ModelOptions& stack, int64_t layer, uint64_t seed, const std::string& kind,
    const runtime::ComponentEntry& entry, const toml::table& options, runtime::Registry& registry,
    const std::string& prefix, std::vector<NamedParameter>& params) {
  const config::ComponentConfigView view(options, schema_of(entry), "model.feedforward." + kind);
  auto ffn = std::make_unique<runtime::FeedForwardHandle>(
      registry.create(PB_KIND_FEEDFORWARD, kind, *view.view()), registry.host());
  LayerPartitions partitions{registry.host(), 1, {}};
  ffn->init(layer_context(stack, layer, seed, partitions));
  for (runtime::FeedForwardHandle::Parameter& p : ffn->parameters())
    params.push_back({prefix + ".ffn." + p.name, p.tensor, p.tensor.dim() < 2});
  return ffn;
}

}  // namespace

std::unique_ptr<EncoderDecoderModel> EncoderDecoderModel::build(
    const EncoderDecoderOptions& options, const ComponentTables& tables,
    runtime::Registry& registry) {
  check_seq2seq_options(options);
  attach_engine(registry);
  const EncoderDecoderOptions& e = options;
  const ModelOptions& o = e.base;

  // Resolve and check every component before creating anything.
  const runtime::ComponentEntry& cross_entry = registry.find(PB_KIND_ATTENTION, e.cross_attention);
  const auto* cross_vt = static_cast<const pb_attention_vtable*>(cross_entry.descriptor->vtable);
  require_seq2seq((cross_vt->capabilities & PB_ATTENTION_CAP_CROSS) != 0,
                  "model.cross_attention = \"" + e.cross_attention + "\" (" +
                      registry.plugin_of(cross_entry).file.string() +
                      ") cannot serve as cross-attention: it does not declare "
                      "PB_ATTENTION_CAP_CROSS (attention interface 1.3). Choose a kind whose "
                      "`patchbay plugins describe attention <name>` lists cross-attention: "
                      "dense, linear or performer");
  const std::vector<std::string>& encoder_kinds =
      or_default(e.encoder_feedforward, o.feedforward_kinds);
  const std::vector<std::string>& decoder_kinds =
      or_default(e.decoder_feedforward, o.feedforward_kinds);
  require_seq2seq(!encoder_kinds.empty() && !decoder_kinds.empty(),
                  "no feed-forward kind for a stack (model.feedforward.kind)");
  const auto encoder_entries =
      feedforward_entries(encoder_kinds, false, "model.encoder_feedforward", registry);
  const auto decoder_entries =
      feedforward_entries(decoder_kinds, true, "model.decoder_feedforward", registry);
  const auto encoder_ffn_options =
      layer_options(tables.feedforward, encoder_kinds, encoder_entries, "model.feedforward", "mlp");
  const auto decoder_ffn_options =
      layer_options(tables.feedforward, decoder_kinds, decoder_entries, "model.feedforward", "mlp");
  const auto cross_options = layer_options(tables.attention, {e.cross_attention}, {&cross_entry},
                                           "model.attention", "dense");

  auto impl = std::make_unique<Impl>();
  impl->options = e;
  impl->options.encoder_feedforward = encoder_kinds;
  impl->options.decoder_feedforward = decoder_kinds;
  impl->dropout_generator = eng::Generator(o.seed * 1000003ull + 0x9E3779B97F4A7C15ull);
  eng::Generator init(o.seed);
  const int64_t c = o.d_model;
  std::vector<NamedParameter>& params = impl->parameters;
  impl->encoder_embed = normal_parameter({o.vocab_size, c}, o.init_std, init, o.device);
  if (e.shared_embeddings) {
    impl->decoder_embed = impl->encoder_embed;
    params.push_back({"shared.weight", impl->encoder_embed, false});
  } else {
    impl->decoder_embed = normal_parameter({o.vocab_size, c}, o.init_std, init, o.device);
    params.push_back({"encoder.embed.weight", impl->encoder_embed, false});
    params.push_back({"decoder.embed.weight", impl->decoder_embed, false});
  }
  auto make_bias = [&](RelativePositionBias& bias, bool bidirectional, const std::string& name) {
    if (!e.relative_bias) return;
    bias.buckets = {bidirectional, e.relative_buckets, e.relative_max_distance};
    bias.table = normal_parameter({e.relative_buckets, o.n_heads}, o.init_std, init, o.device);
    params.push_back({name, bias.table, false});
  };

  const ModelOptions encoder = stack_options(e, e.encoder_layers, false);
  make_bias(impl->encoder_bias, true, "encoder.relative_bias.weight");
  const double encoder_out_std =
      o.init_std / std::sqrt(2.0 * static_cast<double>(e.encoder_layers));
  for (int64_t i = 0; i < e.encoder_layers; ++i) {
    const std::string prefix = "encoder.blocks." + std::to_string(i);
    const uint64_t seed = o.seed * 1000003ull + 3ull * static_cast<uint64_t>(i) + 7919ull;
    const size_t f = static_cast<size_t>(i) % encoder_kinds.size();
    EncoderBlock block;
    block.norm1 = make_norm(o);
    block.norm2 = make_norm(o);
    add_norm(params, prefix + ".norm1", block.norm1);
    block.attn = std::make_unique<RelativeSelfAttention>(c, o.n_heads, o.init_std, encoder_out_std,
                                                         init, o.device);
    for (auto& [name, tensor] : block.attn->parameters())
      params.push_back({prefix + ".attn." + name, tensor, false});
    add_norm(params, prefix + ".norm2", block.norm2);
    block.ffn =
        make_feedforward(encoder, i, seed, encoder_kinds[f], *encoder_entries[f],
                         encoder_ffn_options.at(encoder_kinds[f]), registry, prefix, params);
    impl->encoder.push_back(std::move(block));
  }
  impl->encoder_norm = make_norm(o);
  add_norm(params, "encoder.norm_f", impl->encoder_norm);

  const ModelOptions decoder = stack_options(e, e.decoder_layers, true);
  // The cross-attention layer is initialised in the decoder's (causal) context when it can
  // take one, as the conformance kit's cross checks do: plugins whose own `causal` option
  // defaults to true (dense) accept it, and no causal mask applies to forward_cross.
  // Its max_seq_len covers the longest sequence it sees, queries (targets) or keys (sources):
  // a kind projecting over key positions (linformer) sizes its projections by it.
  ModelOptions cross =
      stack_options(e, e.decoder_layers, (cross_vt->capabilities & PB_ATTENTION_CAP_CAUSAL) != 0);
  cross.context_length = std::max(o.context_length, e.source_context_length);
  make_bias(impl->decoder_bias, false, "decoder.relative_bias.weight");
  const double decoder_out_std =
      o.init_std / std::sqrt(3.0 * static_cast<double>(e.decoder_layers));
  const config::ComponentConfigView cross_view(cross_options.at(e.cross_attention),
                                               schema_of(cross_entry),
                                               "model.attention." + e.cross_attention);
  for (int64_t i = 0; i < e.decoder_layers; ++i) {
    const std::string prefix = "decoder.blocks." + std::to_string(i);
    const uint64_t seed = o.seed * 1000003ull + 3ull * static_cast<uint64_t>(i) + 104729ull;
    const size_t f = static_cast<size_t>(i) % decoder_kinds.size();
    DecoderBlock block;
    block.norm1 = make_norm(o);
    block.norm_cross = make_norm(o);
    block.norm2 = make_norm(o);
    add_norm(params, prefix + ".norm1", block.norm1);
    block.self_attn = std::make_unique<RelativeSelfAttention>(c, o.n_heads, o.init_std,
                                                              decoder_out_std, init, o.device);
    for (auto& [name, tensor] : block.self_attn->parameters())
      params.push_back({prefix + ".self_attn." + name, tensor, false});
    add_norm(params, prefix + ".norm_cross", block.norm_cross);
    block.cross_attn = std::make_unique<runtime::AttentionHandle>(
        registry.create(PB_KIND_ATTENTION, e.cross_attention, *cross_view.view()), registry.host());
    LayerPartitions partitions{registry.host(), 1, {}};
    block.cross_attn->init(layer_context(cross, i, seed + 1, partitions));
    for (runtime::AttentionHandle::Parameter& p : block.cross_attn->parameters())
      params.push_back({prefix + ".cross_attn." + p.name, p.tensor, p.tensor.dim() < 2});
    add_norm(params, prefix + ".norm2", block.norm2);
    block.ffn =
        make_feedforward(decoder, i, seed + 2, decoder_kinds[f], *decoder_entries[f],
                         decoder_ffn_options.at(decoder_kinds[f]), registry, prefix, params);
    impl->decoder.push_back(std::move(block));
  }
  impl->decoder_norm = make_norm(o);
  add_norm(params, "decoder.norm_f", impl->decoder_norm);
  if (!o.tie_embeddings) {
    impl->head = normal_parameter({o.vocab_size, c}, o.init_std, init, o.device);
    params.push_back({"head.weight", impl->head, false});
  }
  return std::unique_ptr<EncoderDecoderModel>(new EncoderDecoderModel(std::move(impl)));
}

}  // namespace patchbay::model
