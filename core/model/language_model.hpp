// The GPT-style language model the host assembles from plugins (contract shared by model
// assembly, training, evaluation, generation and benchmarks).
//
//   tokens [B, T] (i32|i64) -> token embedding wte [V, C] (+ learned wpe [T_max, C] or
//   sinusoidal, both added to the embeddings; rotary / ALiBi are applied inside attention,
//   which gets the kind through pb_layer_context::positional) -> dropout -> N blocks ->
//   final norm -> head -> logits [B, T, V] (f32)
//   block (pre-norm, default):  x = x + drop(attn(norm1(x)));  x = x + drop(ffn(norm2(x)))
//   block (post-norm):          x = norm1(x + drop(attn(x)));  x = norm2(x + drop(ffn(x)))
//   norm: LayerNorm (gain, bias) or RMSNorm (gain); gains start at 1, biases at 0.
//   head: tied to wte (logits = x @ wte^T) or its own head.weight [V, C].
// Attention and feed-forward layers are plugin objects chosen per layer from the config
// (`model.attention.kind = "dense"` or `model.attention.pattern = ["dense", "lsh"]`, cycled
// over layers); everything else is engine ops in core. A layer that cannot serve a causal
// LM (attention without PB_ATTENTION_CAP_CAUSAL, feed-forward without
// PB_FEEDFORWARD_CAP_CAUSAL) is refused at build() with a message naming the layer and the
// component: it would let tokens see the future.
//
// Parameter names are stable (they key checkpoints and optimizer state):
//   wte.weight, wpe.weight (learned positions only), blocks.<i>.norm1.{gain,bias},
//   blocks.<i>.attn.<plugin's names>, blocks.<i>.norm2.{gain,bias},
//   blocks.<i>.ffn.<plugin's names>, norm_f.{gain,bias}, head.weight (untied only)
//   (the .bias entries exist for LayerNorm only). Order: as listed, block by block.
//
// Initialisation: wte, wpe, head ~ N(0, init_std); layers init themselves from
// pb_layer_context (init_std, residual_init_std = init_std / sqrt(2 * n_layers), as GPT-2)
// with seed  options.seed * 1000003 + 2 * layer (+1 for the feed-forward); the model's own
// tensors draw from Generator(options.seed) in the order above. Equal options and equal
// plugins give bit-identical models.
//
// Thread safety: one model is used by one thread at a time (plugins' rule).
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.hpp"

namespace patchbay::config {
class ResolvedConfig;
class SchemaRegistry;
}  // namespace patchbay::config

namespace patchbay::runtime {
class Registry;
}

namespace patchbay::model {

class EncoderDecoderModel;     // encoder_decoder.hpp
struct EncoderDecoderOptions;  // encoder_decoder.hpp

enum class NormKind { kLayerNorm, kRmsNorm };
enum class PositionalKind { kLearned, kSinusoidal, kRotary, kAlibi, kNone };

struct ModelOptions {
  int64_t vocab_size = 0;  // from the tokenizer
  int64_t context_length = 256;
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  int64_t d_model = 128;
  int64_t d_ff = 512;  // 4 * d_model by default ([model] d_ff = 0 means that)
  NormKind norm = NormKind::kLayerNorm;
  bool pre_norm = true;
  PositionalKind positional = PositionalKind::kLearned;
  // Factor on the token embeddings before positions are added ([model] embedding_scale).
  // nullopt = "auto": sqrt(d_model) for sinusoidal positions (Vaswani et al. 2017, §3.4: "we
  // multiply those weights by sqrt(d_model)"), 1 otherwise. See resolved_embedding_scale().
  std::optional<double> embedding_scale;
  double rope_theta = 10000.0;
  bool tie_embeddings = true;
  double init_std = 0.02;
  double norm_eps = 1e-5;
  double dropout = 0.0;  // on embeddings and residual branches, training only
  uint64_t seed = 0;
  // [model] residual = "reversible": RevNet/Reformer blocks y1 = x1 + F(x2), y2 = x2 + G(y1)
  // with F = dropout(attention(norm1(.))), G = dropout(ffn(norm2(.))), x1 = x2 = the embedding,
  // and the stack's output (y1 + y2) / 2. The backward reconstructs every block's inputs from
  // its outputs (model/reversible.cpp), so activation memory does not grow with depth.
  bool reversible = false;
  // With reversible: run the same blocks through plain autograd, keeping every block's
  // activations (no reconstruction). For tests and memory comparisons; not a config key.
  bool reversible_store_activations = false;
  // [model] causal: true (default) builds a causal LM — every layer sees only earlier
  // positions (pb_layer_context::causal = 1) and a layer that cannot is refused. false builds
  // a bidirectional encoder (for train.objective = "mlm"): layers get causal = 0, every
  // attention must declare PB_ATTENTION_CAP_NONCAUSAL, and start_decoding is refused.
  bool causal = true;
  // Plugin component per layer: layer i uses attention_kinds[i % size()] with that
  // component's options from ComponentTables::attention; same for feed-forward.
  std::vector<std::string> attention_kinds = {"dense"};
  std::vector<std::string> feedforward_kinds = {"mlp"};
  // Tensor parallelism (not config keys: the trainer sets them for [parallelism] kind =
  // "mpi_tensor"): this process is rank tp_rank of tp_size, every layer gets them through
  // pb_layer_context, and a layer whose component lacks PB_*_CAP_TENSOR_PARALLEL is refused
  // when tp_size > 1. The model's own tensors (embeddings, norms, head) are replicated.
  int64_t tp_rank = 0;
  int64_t tp_size = 1;
  // [run] device: where every parameter lives and the forward runs (layers get it through
  // pb_layer_context; a layer that cannot run there refuses in init()). Tokens given on the
  // CPU move to it.
  engine::Device device = engine::cpu();
};

// A parameter that holds this rank's slice of a larger tensor (a layer marked it with
// pb_layer_context::tp_mark_partitioned): the full tensor's dim `dim` is cut into `stride`
// equal blocks, each block into tp_size slices, and the parameter is slice tp_rank of every
// block, concatenated in block order. Parameters without one are replicated.
struct TensorParallelPartition {
  int64_t dim = 0;
  int64_t stride = 1;
};

// The component settings of the layers: the [model.attention] and [model.feedforward]
// tables. Each layer's component receives its own options (config/component_options.hpp):
// its per-kind table ([model.attention.local] window = 32), plus the flat keys when it is
// `kind`; every schema key it lacks gets its default. A key its schema lacks is an error.
// Empty tables give every component its defaults.
struct ComponentTables {
  toml::table attention;
  toml::table feedforward;
};

struct NamedParameter {
  std::string name;       // stable, see the header comment
  engine::Tensor tensor;  // leaf with requires_grad (the layer's own storage: update in place)
  bool no_weight_decay;   // true for tensors with fewer than 2 dims (biases, norm gains);
                          // embeddings and matrices are decayed (GPT-2 / nanoGPT practice)
};

struct ForwardResult {
  engine::Tensor logits;    // [B, T, V] f32
  engine::Tensor aux_loss;  // scalar sum of feed-forward auxiliary losses, or undefined
  // Named statistics from feed-forward layers ("blocks.3.ffn.expert_load": values).
  std::vector<std::pair<std::string, std::vector<float>>> stats;
};

// Incremental decoding state: one attention state (KV cache or recurrent) per layer, for
// `batch` sequences of up to `capacity` positions. Made by LanguageModel::start_decoding,
// used with that model only, which must outlive it. Move-only.
class DecodeState {
 public:
  DecodeState();
  ~DecodeState();
  DecodeState(DecodeState&&) noexcept;
  DecodeState& operator=(DecodeState&&) noexcept;
  DecodeState(const DecodeState&) = delete;
  DecodeState& operator=(const DecodeState&) = delete;

  int64_t batch() const;
  int64_t capacity() const;
  int64_t length() const;  // positions already decoded (the next token's position)

 private:
  friend class LanguageModel;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class LanguageModel {
 public:
  // Creates every layer through `registry` (which must stay alive as long as the model) and
  // initialises every parameter. Throws patchbay::Error(kInvalidArgument) for inconsistent
  // options (d_model % n_heads, vocab_size < 1, ...) or a non-causal layer, naming the
  // layer, the component and why; Error(kNotFound) for an unknown component.
  static std::unique_ptr<LanguageModel> build(const ModelOptions& options,
                                              const ComponentTables& tables,
                                              runtime::Registry& registry);
  // An encoder–decoder (model.architecture = "encoder_decoder", encoder_decoder.hpp) held as a
  // LanguageModel, so that training, optimizers and checkpoints take it as any model:
  // parameters() are its parameters, options() its ModelOptions (n_layers = encoder +
  // decoder blocks). forward(tokens) and start_decoding refuse it (it needs a source): run it
  // through encoder_decoder()->forward (train::forward_batch does for objectives' batches).
  static std::unique_ptr<LanguageModel> build_encoder_decoder(const EncoderDecoderOptions& options,
                                                              const ComponentTables& tables,
                                                              runtime::Registry& registry);
  // The encoder–decoder this model holds; null for a single-stack model.
  EncoderDecoderModel* encoder_decoder() const;

  ~LanguageModel();
  LanguageModel(const LanguageModel&) = delete;
  LanguageModel& operator=(const LanguageModel&) = delete;

  // tokens [B, T] i32 or i64, 1 <= T <= context_length, ids in [0, vocab_size).
  // `training` enables dropout (model and plugins). Records autograd when grad mode is on.
  ForwardResult forward(const engine::Tensor& tokens, bool training);
  // Packed rows (several examples or documents per row): segment_ids [B, T] (i32|i64, on the
  // CPU or the model's device), non-decreasing along each row. No attention across segments,
  // and learned / sinusoidal / rotary positions restart at 0 with each segment, so each
  // segment's logits (and gradients) equal those of forward() on that segment alone, up to
  // rounding. Every attention layer must support it (require_packing()).
  ForwardResult forward_packed(const engine::Tensor& tokens, const engine::Tensor& segment_ids,
                               bool training);
  // Throws Error(kInvalidArgument) naming the first attention layer's kind (and file) that
  // cannot run packed sequences (no PB_ATTENTION_CAP_PACKED), or for a reversible model.
  void require_packing() const;

  // Every parameter, named and ordered as in the header comment.
  std::vector<NamedParameter> parameters() const;
  // Tensor parallelism: the partitioned parameters by name (empty when options().tp_size == 1).
  const std::map<std::string, TensorParallelPartition>& tensor_parallel_partitions() const;
  // Number of scalars in parameters(); with exclude_embeddings, without wte and wpe (a tied
  // head is wte, so it is excluded too; an untied head.weight is counted).
  int64_t parameter_count(bool exclude_embeddings = false) const;
  // Training FLOPs per token at sequence length seq_len, PaLM appendix B convention:
  //   6·N + 12·L·T·C
  // N = parameters taking part in a matmul: every parameter except wte and wpe, plus V·C for
  // the output head (tied or not, the head matmul costs the same). 12·L·T·C is attention's
  // QK^T and AV (forward + backward) at full T, the causal mask not halving it (as PaLM).
  double flops_per_token(int64_t seq_len) const;

  // Incremental decoding (runs without gradients; needs every attention layer to support
  // it — a layer with cache kind NONE is an Error(kInvalidArgument) naming it; a
  // bidirectional model (options().causal == false) is refused: it cannot continue text).
  // capacity <= context_length positions per sequence.
  DecodeState start_decoding(int64_t batch, int64_t capacity);
  // tokens [B, Tn] (i32|i64), B = state.batch(), positions state.length() .. +Tn-1 (must fit
  // in the capacity: Error(kInvalidArgument) otherwise). Appends them to the state and returns
  // their logits [B, Tn, V] f32, equal (up to rounding) to those forward() gives at the same
  // positions of the whole sequence. Prefill = one call with the whole prompt.
  // keep_last >= 1 returns only the last keep_last positions' logits [B, keep_last, V] and
  // skips the output head (V·C multiply-adds per token, a sixth of SmolLM2's per-token work)
  // at the others: a prefill whose next token needs only the last row. 0 = every position.
  engine::Tensor decode_step(DecodeState& state, const engine::Tensor& tokens,
                             int64_t keep_last = 0);
  // Beam search: sequence i of the state takes what sequence source[i] held (source.size() ==
  // state.batch(), indices in range: Error(kInvalidArgument) otherwise). Returns false when
  // some layer cannot reorder its state; the state is then unusable (start a new one and
  // prefill each beam's tokens).
  bool reorder_decoding(DecodeState& state, std::span<const int64_t> source);
  // Shared prefixes: a new state of source.size() sequences (>= 1), sequence i a copy of the
  // state's sequence source[i] at the same length; `state` is unchanged and both continue
  // independently (evaluation prefills a context once and forks it into one sequence per
  // continuation). nullopt when some layer cannot fork its state (attention interface < 1.4,
  // or the layer declines); Error(kInvalidArgument) for sources out of range.
  std::optional<DecodeState> fork_decoding(const DecodeState& state,
                                           std::span<const int64_t> source);

  // Decoding with bf16 weights (model/inference_weights.cpp): converts every weight matrix
  // (parameters with >= 2 dims except wpe) to `dtype` in place, rounding once; biases and
  // norm gains stay f32 and activations, the KV cache and accumulation stay f32. Then runs
  // one trial decode step: a layer that cannot take bf16 matrices is an
  // Error(kInvalidArgument) naming the cause, and the weights are restored. Afterwards the
  // model is for inference only (the converted tensors no longer require grad). kF32 on f32
  // weights does nothing; back to kF32 from bf16 is an error (the digits are gone).
  void convert_weights_for_inference(engine::DType dtype);
  engine::DType weights_dtype() const;

  const ModelOptions& options() const;
  // Several lines: dimensions, positional/norm choices, per-layer components, counts.
  std::string describe() const;

 private:
  struct Impl;
  explicit LanguageModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// ---- config ----
// Declares [model], [model.attention] (component section: kind = "dense", pattern = [...],
// plus the component's keys) and [model.feedforward] (kind = "mlp", pattern, component keys)
// in `schema` (after make_host_schema(): call it wherever the host schema is built).
//   [model] keys: context_length, n_layers, n_heads, d_model, d_ff (0 = 4·d_model), norm
//   ("layernorm"|"rmsnorm"), norm_position ("pre"|"post"), positional ("learned"|
//   "sinusoidal"|"rotary"|"alibi"|"none"), embedding_scale ("auto"|"none"|"sqrt_d_model"|
//   "<number>"), rope_theta, tie_embeddings, dropout, init_std, norm_eps, seed.
// Flat keys of [model.attention] are options of `kind`'s component; each component of a
// `pattern` takes its options from its own per-kind table ([model.attention.local]), checked
// against its own schema (config/component_options.hpp).
void declare_model_sections(config::SchemaRegistry& schema);

// The options a validated config (defaults applied or not) describes; vocab_size comes from
// the tokenizer. Throws Error(kInvalidArgument) naming the key for a value the schema cannot
// express a rule for (d_model not divisible by n_heads, an empty pattern).
ModelOptions model_options_from_config(const config::ResolvedConfig& config, int64_t vocab_size);
// The [model.attention] and [model.feedforward] tables (empty when absent).
ComponentTables component_tables_from_config(const config::ResolvedConfig& config);

// The factor the model multiplies token embeddings by (embedding_scale, "auto" resolved).
double resolved_embedding_scale(const ModelOptions& options);
// Parses a [model] embedding_scale value: "auto" (nullopt), "none" (1), "sqrt_d_model", or a
// positive number written as a string ("8.0"). Throws Error(kInvalidArgument) otherwise.
std::optional<double> parse_embedding_scale(const std::string& value, int64_t d_model);

// "layernorm"/"rmsnorm", "learned"/..., for describe() and messages.
const char* norm_kind_name(NormKind kind);
const char* positional_kind_name(PositionalKind kind);

}  // namespace patchbay::model
