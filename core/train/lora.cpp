// LoRA adapters on the model's weight matrices; see lora.hpp.
#include "train/lora.hpp"

#include <spdlog/spdlog.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/generator.hpp"
#include "engine/ops.hpp"
#include "patchbay/component.hpp"
#include "train/fine_tuning.hpp"

namespace patchbay::train {

namespace eng = engine;

void declare_lora_section(config::SchemaRegistry& schema) {
  using Field = patchbay::Field;
  config::HostSection section;
  section.path = "train.lora";
  section.summary =
      "LoRA adapters: only low-rank updates of the targeted weight matrices train (needs "
      "train.init_from; docs/finetuning.md)";
  section.fields = {
      Field::integer("rank", "8", "rank r of each adapter (A [r, in], B [out, r])")
          .range(1, 1 << 16),
      Field::real("alpha", "16.0", "adapters are scaled by alpha / rank").range(1e-9, 1e9),
      Field::real("dropout", "0.0",
                  "dropout probability on the adapter's input (PEFT's lora_dropout), training only")
          .range(0.0, 0.999),
      Field::strings("targets", "[\"attention.q\", \"attention.v\"]",
                     "weight matrices to adapt: attention.q|k|v|o, mlp.up|gate|down, attention.*, "
                     "mlp.*, or patterns over parameter names"),
  };
  schema.add_section(std::move(section));
}

LoraOptions lora_options_from_config(const config::ResolvedConfig& config) {
  LoraOptions o;
  const toml::node* table = config.find("train.lora");
  if (table == nullptr || !table->is_table()) return o;
  o.enabled = true;
  const toml::table& t = *table->as_table();
  o.rank = t["rank"].value<int64_t>().value_or(o.rank);
  o.alpha = t["alpha"].value<double>().value_or(o.alpha);
  o.dropout = t["dropout"].value<double>().value_or(o.dropout);
  if (const toml::array* targets = t["targets"].as_array()) {
    o.targets.clear();
    for (const toml::node& target : *targets)
      o.targets.push_back(target.value<std::string>().value_or(""));
  }
  if (o.targets.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "train.lora.targets is empty: name the weight matrices to adapt, e.g. "
                "[\"attention.q\", \"attention.v\"]");
  return o;
}

namespace {

// A target resolved to rows of a parameter.
struct TargetRows {
  std::string part;  // "q", "k", "v", "all"
  int64_t row_begin = 0;
  int64_t rows = 0;
};

// alias -> (parameter suffix inside a block, part); "attention.*" and "mlp.*" expand below.
const std::map<std::string, std::pair<std::string, std::string>>& target_aliases() {
  static const std::map<std::string, std::pair<std::string, std::string>> aliases = {
      {"attention.q", {".attn.qkv.weight", "q"}},    {"q_proj", {".attn.qkv.weight", "q"}},
      {"attention.k", {".attn.qkv.weight", "k"}},    {"k_proj", {".attn.qkv.weight", "k"}},
      {"attention.v", {".attn.qkv.weight", "v"}},    {"v_proj", {".attn.qkv.weight", "v"}},
      {"attention.o", {".attn.proj.weight", "all"}}, {"o_proj", {".attn.proj.weight", "all"}},
      {"mlp.up", {".ffn.fc.weight", "all"}},         {"up_proj", {".ffn.fc.weight", "all"}},
      {"mlp.gate", {".ffn.gate.weight", "all"}},     {"gate_proj", {".ffn.gate.weight", "all"}},
      {"mlp.down", {".ffn.proj.weight", "all"}},     {"down_proj", {".ffn.proj.weight", "all"}},
  };
  return aliases;
}

std::vector<std::string> expand_group(const std::string& target) {
  if (target == "attention.*") return {"attention.q", "attention.k", "attention.v", "attention.o"};
  if (target == "mlp.*") return {"mlp.up", "mlp.gate", "mlp.down"};
  return {target};
}

bool is_block_parameter(const std::string& name, const std::string& suffix) {
  if (name.rfind("blocks.", 0) != 0 || name.size() <= suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  const std::string index = name.substr(7, name.size() - suffix.size() - 7);
  return !index.empty() && index.find_first_not_of("0123456789") == std::string::npos;
}

// The rows of part q / k / v in a fused [q; k; v] weight with d_model rows of q.
TargetRows qkv_rows(const std::string& name, const eng::Shape& shape, const std::string& part,
                    int64_t d_model) {
  const int64_t kv = (shape[0] - d_model) / 2;
  if (shape[0] <= d_model || (shape[0] - d_model) % 2 != 0)
    throw Error(ErrorKind::kInvalidArgument,
                "train.lora: '" + name + "' has " + std::to_string(shape[0]) +
                    " rows, which is not d_model (" + std::to_string(d_model) +
                    ") rows of q plus equal rows of k and v; target the whole matrix by its name "
                    "instead (targets = [\"" +
                    name + "\"])");
  if (part == "q") return {part, 0, d_model};
  if (part == "k") return {part, d_model, kv};
  return {part, d_model + kv, kv};
}

std::string matrix_list(const std::vector<model::NamedParameter>& parameters) {
  std::string text;
  for (const model::NamedParameter& p : parameters)
    if (p.tensor.dim() == 2 &&
        (p.name.rfind("blocks.", 0) != 0 || p.name.rfind("blocks.0.", 0) == 0))
      text += (text.empty() ? "" : ", ") + p.name + " " + eng::shape_str(p.tensor.shape());
  return text;
}

}  // namespace

std::string parameter_owner(const model::ModelOptions& options, const std::string& parameter) {
  const size_t dot = parameter.find('.', 7);
  if (parameter.rfind("blocks.", 0) != 0 || dot == std::string::npos) return "the host model";
  const std::string index = parameter.substr(7, dot - 7);
  if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos)
    return "the host model";
  const size_t layer = std::stoul(index);
  const std::string rest = parameter.substr(dot + 1);
  if (rest.rfind("attn.", 0) == 0 && !options.attention_kinds.empty())
    return "attention plugin '" + options.attention_kinds[layer % options.attention_kinds.size()] +
           "'";
  if (rest.rfind("ffn.", 0) == 0 && !options.feedforward_kinds.empty())
    return "feed-forward plugin '" +
           options.feedforward_kinds[layer % options.feedforward_kinds.size()] + "'";
  return "the host model";
}

LoraAdapters::LoraAdapters(const std::vector<model::NamedParameter>& parameters, int64_t d_model,
                           const LoraOptions& options, uint64_t seed, const ParameterOwner& owner)
    : options_(options), scale_(options.alpha / static_cast<double>(options.rank)), seed_(seed) {
  // (parameter index, rows) in parameter order, each block of rows once.
  std::map<size_t, std::map<int64_t, TargetRows>> chosen;
  for (const std::string& written : options.targets) {
    for (const std::string& target : expand_group(written)) {
      bool any = false;
      const auto alias = target_aliases().find(target);
      for (size_t i = 0; i < parameters.size(); ++i) {
        const model::NamedParameter& p = parameters[i];
        if (p.tensor.dim() != 2) continue;
        if (alias != target_aliases().end()) {
          if (!is_block_parameter(p.name, alias->second.first)) continue;
          const std::string& part = alias->second.second;
          const TargetRows rows = part == "all" ? TargetRows{"all", 0, p.tensor.size(0)}
                                                : qkv_rows(p.name, p.tensor.shape(), part, d_model);
          chosen[i][rows.row_begin] = rows;
          any = true;
        } else if (name_matches(target, p.name)) {
          chosen[i][0] = TargetRows{"all", 0, p.tensor.size(0)};
          any = true;
        }
      }
      // A group ("mlp.*") may name matrices a model lacks (gate without SwiGLU); one alone may not.
      if (!any && (written == target || target == "mlp.up" || target == "attention.q"))
        throw Error(ErrorKind::kInvalidArgument,
                    "train.lora.targets: '" + target +
                        "' matches no weight matrix of this model. Its matrices are " +
                        matrix_list(parameters) +
                        " (blocks.1, ... as blocks.0). Targets: attention.q|k|v|o, "
                        "mlp.up|gate|down, attention.*, mlp.*, or a pattern over these names");
    }
  }
  std::set<std::string> targeted;
  eng::NoGradGuard no_grad;
  for (const auto& [index, blocks] : chosen) {
    const model::NamedParameter& p = parameters[index];
    targeted.insert(p.name);
    for (const auto& [begin, rows] : blocks) {
      // An overlap would make two adapters write the same rows.
      const auto next = blocks.upper_bound(begin);
      if (next != blocks.end() && begin + rows.rows > next->first)
        throw Error(ErrorKind::kInvalidArgument, "train.lora.targets: '" + p.name +
                                                     "' is targeted both whole and by its q/k/v "
                                                     "rows; name it one way");
      LoraAdapter a;
      a.parameter = p.name;
      a.part = rows.part;
      a.row_begin = rows.row_begin;
      a.rows = rows.rows;
      a.owner = owner ? owner(p.name) : std::string();
      a.weight = p.tensor;
      const int64_t in = p.tensor.size(1);
      eng::Generator gen(seed * 1000003ULL + 0x9E3779B97F4A7C15ULL + adapters_.size());
      const double bound = 1.0 / std::sqrt(static_cast<double>(in));
      a.a =
          eng::uniform({options.rank, in}, gen, -bound, bound, eng::DType::kF32, p.tensor.device());
      a.a.set_requires_grad(true);
      a.b = eng::zeros({rows.rows, options.rank}, eng::DType::kF32, p.tensor.device());
      a.b.set_requires_grad(true);
      adapters_.push_back(std::move(a));
    }
  }
  // Every parameter is frozen: the engine computes no gradient for the base weights.
  for (const model::NamedParameter& p : parameters) {
    eng::Tensor tensor = p.tensor;
    tensor.zero_grad();
    if (tensor.requires_grad()) tensor.set_requires_grad(false);
  }
  for (size_t i = 0; i < adapters_.size(); ++i) {
    LoraAdapter& a = adapters_[i];
    eng::LowRankAdapter spec;
    spec.weight = a.weight.detach();
    spec.row_begin = a.row_begin;
    spec.rows = a.rows;
    spec.a = a.a;
    spec.b = a.b;
    spec.scale = scale_;
    spec.dropout = options.dropout;
    spec.dropout_key = i;
    spec.label = a.name() + " (rows [" + std::to_string(a.row_begin) + ", " +
                 std::to_string(a.row_begin + a.rows) + ") of " + a.parameter +
                 (a.owner.empty() ? "" : ", " + a.owner) + ")";
    a.attached = eng::attach_low_rank_adapter(std::move(spec));
  }
  int64_t trained = 0;
  for (const LoraAdapter& a : adapters_) trained += a.a.numel() + a.b.numel();
  spdlog::info(
      "train.lora: {} adapters of rank {} (scale {}, dropout {}) on {} matrices, {} trained values",
      adapters_.size(), options.rank, scale_, options.dropout, targeted.size(), trained);
}

std::vector<model::NamedParameter> LoraAdapters::parameters() const {
  std::vector<model::NamedParameter> out;
  for (const LoraAdapter& a : adapters_) {
    out.push_back({a.name() + "/A", a.a, false});
    out.push_back({a.name() + "/B", a.b, false});
  }
  return out;
}

void LoraAdapters::begin_micro_batch(uint64_t index) {
  eng::set_low_rank_adapter_dropout_state(seed_ ^ 0x4C6F5241ULL, index);  // "LoRA"
}

void LoraAdapters::check_applied() {
  if (applied_checked_) return;
  std::string unused;
  for (const LoraAdapter& a : adapters_)
    if (a.attached.attached() && a.attached.uses() == 0)
      unused += (unused.empty() ? "" : ", ") + a.parameter + " (" + a.part +
                (a.owner.empty() ? "" : ", " + a.owner) + ")";
  if (!unused.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "train.lora: a training step ran, but no engine product applied the adapters of " +
                    unused +
                    ": their plugin computes with these weights by some other means than "
                    "matmul(x, W[rows], false, true) or linear(x, W), so the adapters would do "
                    "nothing. Leave these weights out of train.lora.targets (or use full "
                    "fine-tuning: train.init_from without [train.lora])");
  applied_checked_ = true;
}

void LoraAdapters::merge_into_weights() {
  eng::NoGradGuard no_grad;
  for (LoraAdapter& a : adapters_) a.attached.reset();
  for (LoraAdapter& a : adapters_) {
    // [rows, rank] x [rank, in] -> [rows, in]
    const eng::Tensor delta = eng::matmul(a.b.detach(), a.a.detach());
    eng::Tensor rows = a.weight.detach().narrow(0, a.row_begin, a.rows);
    eng::copy_(rows, eng::add(rows, eng::mul_scalar(delta, scale_)));
  }
}

std::string LoraAdapters::describe_json() const {
  nlohmann::json adapters = nlohmann::json::array();
  for (const LoraAdapter& a : adapters_)
    adapters.push_back({{"parameter", a.parameter},
                        {"part", a.part},
                        {"row_begin", a.row_begin},
                        {"rows", a.rows}});
  return nlohmann::json{{"rank", options_.rank},       {"alpha", options_.alpha},
                        {"dropout", options_.dropout}, {"scale", scale_},
                        {"targets", options_.targets}, {"adapters", adapters}}
      .dump();
}

}  // namespace patchbay::train
