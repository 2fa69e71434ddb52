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
                  "dropout on the adapter input: only 0 (the adapters are folded into the weight)")
          .range(0.0, 1.0),
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
  if (o.dropout > 0)
    throw Error(ErrorKind::kInvalidArgument,
                "train.lora.dropout = " + std::to_string(o.dropout) +
                    ": Patchbay's LoRA folds the adapters into the weight every step (W0 + "
                    "(alpha/rank)·B·A, so plugins need no change), and dropout on the adapter's "
                    "input alone is not a weight; set train.lora.dropout = 0 (PEFT's default) "
                    "or regularise with model.dropout");
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

LoraAdapters::LoraAdapters(const std::vector<model::NamedParameter>& parameters, int64_t d_model,
                           const LoraOptions& options, uint64_t seed)
    : options_(options), scale_(options.alpha / static_cast<double>(options.rank)) {
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
      a.weight = p.tensor;
      a.base = p.tensor.detach().narrow(0, rows.row_begin, rows.rows).clone();
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
  // Every other parameter is frozen; the targets keep requires_grad for their gradient G.
  for (const model::NamedParameter& p : parameters) {
    eng::Tensor tensor = p.tensor;
    tensor.zero_grad();
    if (targeted.count(p.name) == 0 && tensor.requires_grad()) tensor.set_requires_grad(false);
  }
  int64_t trained = 0;
  for (const LoraAdapter& a : adapters_) trained += a.a.numel() + a.b.numel();
  spdlog::info("train.lora: {} adapters of rank {} (scale {}) on {} matrices, {} trained values",
               adapters_.size(), options.rank, scale_, targeted.size(), trained);
}

std::vector<model::NamedParameter> LoraAdapters::parameters() const {
  std::vector<model::NamedParameter> out;
  for (const LoraAdapter& a : adapters_) {
    out.push_back({a.name() + "/A", a.a, false});
    out.push_back({a.name() + "/B", a.b, false});
  }
  return out;
}

void LoraAdapters::materialize() {
  eng::NoGradGuard no_grad;
  for (LoraAdapter& a : adapters_) {
    // [rows, rank] x [rank, in] -> [rows, in]
    const eng::Tensor delta = eng::matmul(a.b.detach(), a.a.detach());
    eng::Tensor rows = a.weight.detach().narrow(0, a.row_begin, a.rows);
    eng::copy_(rows, eng::add(a.base, eng::mul_scalar(delta, scale_)));
  }
}

namespace {

void accumulate_grad(eng::Tensor& leaf, const eng::Tensor& grad) {
  const eng::Tensor existing = leaf.grad();
  leaf.set_grad(existing.defined() ? eng::add(existing, grad) : grad.contiguous());
}

}  // namespace

void LoraAdapters::fold_gradients() {
  eng::NoGradGuard no_grad;
  for (LoraAdapter& a : adapters_) {
    const eng::Tensor g_full = a.weight.grad();
    if (!g_full.defined()) continue;
    const eng::Tensor g = g_full.narrow(0, a.row_begin, a.rows);  // [rows, in]
    // dL/dB = s · G · A^T [rows, rank];  dL/dA = s · B^T · G [rank, in]
    accumulate_grad(a.b, eng::mul_scalar(eng::matmul(g, a.a.detach(), false, true), scale_));
    accumulate_grad(a.a, eng::mul_scalar(eng::matmul(a.b.detach(), g, true, false), scale_));
  }
  for (LoraAdapter& a : adapters_) a.weight.zero_grad();
}

std::vector<eng::Tensor> LoraAdapters::target_weights() const {
  std::vector<eng::Tensor> weights;
  for (const LoraAdapter& a : adapters_)
    if (weights.empty() || weights.back().impl() != a.weight.impl()) weights.push_back(a.weight);
  return weights;
}

std::string LoraAdapters::describe_json() const {
  nlohmann::json adapters = nlohmann::json::array();
  for (const LoraAdapter& a : adapters_)
    adapters.push_back({{"parameter", a.parameter},
                        {"part", a.part},
                        {"row_begin", a.row_begin},
                        {"rows", a.rows}});
  return nlohmann::json{{"rank", options_.rank},
                        {"alpha", options_.alpha},
                        {"scale", scale_},
                        {"targets", options_.targets},
                        {"adapters", adapters}}
      .dump();
}

}  // namespace patchbay::train
