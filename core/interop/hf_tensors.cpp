// Tensor renaming, row blocks and transposes between Patchbay and transformers; see hf_tensors.hpp.
#include "interop/hf_tensors.hpp"

#include "common/error.hpp"
#include "interop/t5_architecture.hpp"

namespace patchbay::interop {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// A rule mapping a whole tensor to one HF tensor.
TensorRule whole(const std::string& patchbay, std::vector<int64_t> shape, const std::string& hf,
                 bool transpose = false) {
  return TensorRule{patchbay, shape, {HfTensorPart{hf, 0, shape[0], transpose}}, false, false};
}

}  // namespace

std::vector<TensorRule> hf_tensor_rules(const HfModelShape& shape) {
  if (shape.family == HfFamily::kT5) return t5_tensor_rules(shape);
  const model::ModelOptions& o = shape.options;
  const int64_t v = o.vocab_size, c = o.d_model, f = o.d_ff;
  std::vector<TensorRule> rules;
  if (shape.family == HfFamily::kGpt2) {
    rules.push_back(whole("wte.weight", {v, c}, "transformer.wte.weight"));
    rules.push_back(whole("wpe.weight", {o.context_length, c}, "transformer.wpe.weight"));
    for (int64_t i = 0; i < o.n_layers; ++i) {
      const std::string p = "blocks." + std::to_string(i) + ".",
                        h = "transformer.h." + std::to_string(i) + ".";
      rules.push_back(whole(p + "norm1.gain", {c}, h + "ln_1.weight"));
      rules.push_back(whole(p + "norm1.bias", {c}, h + "ln_1.bias"));
      rules.push_back(whole(p + "attn.qkv.weight", {3 * c, c}, h + "attn.c_attn.weight", true));
      rules.push_back(whole(p + "attn.qkv.bias", {3 * c}, h + "attn.c_attn.bias"));
      rules.push_back(whole(p + "attn.proj.weight", {c, c}, h + "attn.c_proj.weight", true));
      rules.push_back(whole(p + "attn.proj.bias", {c}, h + "attn.c_proj.bias"));
      rules.push_back(whole(p + "norm2.gain", {c}, h + "ln_2.weight"));
      rules.push_back(whole(p + "norm2.bias", {c}, h + "ln_2.bias"));
      rules.push_back(whole(p + "ffn.fc.weight", {f, c}, h + "mlp.c_fc.weight", true));
      TensorRule fc_bias = whole(p + "ffn.fc.bias", {f}, h + "mlp.c_fc.bias");
      fc_bias.patchbay_absent = !shape.mlp_bias;
      rules.push_back(fc_bias);
      rules.push_back(whole(p + "ffn.proj.weight", {c, f}, h + "mlp.c_proj.weight", true));
      TensorRule proj_bias = whole(p + "ffn.proj.bias", {c}, h + "mlp.c_proj.bias");
      proj_bias.patchbay_absent = !shape.mlp_bias;
      rules.push_back(proj_bias);
    }
    rules.push_back(whole("norm_f.gain", {c}, "transformer.ln_f.weight"));
    rules.push_back(whole("norm_f.bias", {c}, "transformer.ln_f.bias"));
  } else {
    // Key/value rows of qkv: Hkv heads of Dh = C / H (= C without grouped-query attention).
    const int64_t kv = kv_heads_of(shape) * (c / o.n_heads);
    rules.push_back(whole("wte.weight", {v, c}, "model.embed_tokens.weight"));
    for (int64_t i = 0; i < o.n_layers; ++i) {
      const std::string p = "blocks." + std::to_string(i) + ".",
                        h = "model.layers." + std::to_string(i) + ".";
      rules.push_back(whole(p + "norm1.gain", {c}, h + "input_layernorm.weight"));
      rules.push_back(TensorRule{p + "attn.qkv.weight",
                                 {c + 2 * kv, c},
                                 {{h + "self_attn.q_proj.weight", 0, c, false},
                                  {h + "self_attn.k_proj.weight", c, kv, false},
                                  {h + "self_attn.v_proj.weight", c + kv, kv, false}},
                                 false,
                                 false});
      rules.push_back(TensorRule{p + "attn.qkv.bias",
                                 {c + 2 * kv},
                                 {{h + "self_attn.q_proj.bias", 0, c, false},
                                  {h + "self_attn.k_proj.bias", c, kv, false},
                                  {h + "self_attn.v_proj.bias", c + kv, kv, false}},
                                 !shape.attention_bias,
                                 false});
      rules.push_back(whole(p + "attn.proj.weight", {c, c}, h + "self_attn.o_proj.weight"));
      TensorRule o_bias = whole(p + "attn.proj.bias", {c}, h + "self_attn.o_proj.bias");
      o_bias.hf_absent = !shape.attention_bias;
      rules.push_back(o_bias);
      rules.push_back(whole(p + "norm2.gain", {c}, h + "post_attention_layernorm.weight"));
      rules.push_back(whole(p + "ffn.fc.weight", {f, c}, h + "mlp.up_proj.weight"));
      if (shape.mlp_bias) rules.push_back(whole(p + "ffn.fc.bias", {f}, h + "mlp.up_proj.bias"));
      rules.push_back(whole(p + "ffn.gate.weight", {f, c}, h + "mlp.gate_proj.weight"));
      if (shape.mlp_bias)
        rules.push_back(whole(p + "ffn.gate.bias", {f}, h + "mlp.gate_proj.bias"));
      rules.push_back(whole(p + "ffn.proj.weight", {c, f}, h + "mlp.down_proj.weight"));
      if (shape.mlp_bias)
        rules.push_back(whole(p + "ffn.proj.bias", {c}, h + "mlp.down_proj.bias"));
    }
    rules.push_back(whole("norm_f.gain", {c}, "model.norm.weight"));
  }
  if (!o.tie_embeddings) rules.push_back(whole("head.weight", {v, c}, "lm_head.weight"));
  return rules;
}

HostTensor slice_for_hf(const HostTensor& whole_tensor, const HfTensorPart& part) {
  const int64_t cols = whole_tensor.shape.size() == 2 ? whole_tensor.shape[1] : 1;
  HostTensor out;
  out.data.assign(whole_tensor.data.begin() + part.row_begin * cols,
                  whole_tensor.data.begin() + (part.row_begin + part.rows) * cols);
  if (whole_tensor.shape.size() == 1) {
    out.shape = {part.rows};
  } else if (!part.transpose) {
    out.shape = {part.rows, cols};
  } else {
    out.shape = {cols, part.rows};
    std::vector<float> t(out.data.size());
    for (int64_t r = 0; r < part.rows; ++r)
      for (int64_t k = 0; k < cols; ++k)
        t[static_cast<size_t>(k * part.rows + r)] = out.data[static_cast<size_t>(r * cols + k)];
    out.data = std::move(t);
  }
  if (part.scale != 1.0)
    for (float& v : out.data) v = static_cast<float>(v * part.scale);
  return out;
}

std::vector<int64_t> hf_part_shape(const std::vector<int64_t>& whole, const HfTensorPart& part) {
  const int64_t cols = whole.size() == 2 ? whole[1] : 1;
  return whole.size() == 1 ? std::vector<int64_t>{part.rows}
         : part.transpose  ? std::vector<int64_t>{cols, part.rows}
                           : std::vector<int64_t>{part.rows, cols};
}

void place_from_hf(HostTensor& whole_tensor, const HfTensorPart& part, const HostTensor& hf) {
  const int64_t cols = whole_tensor.shape.size() == 2 ? whole_tensor.shape[1] : 1;
  const std::vector<int64_t> expected = hf_part_shape(whole_tensor.shape, part);
  if (hf.shape != expected)
    throw Error(ErrorKind::kInvalidArgument, "tensor '" + part.hf_name + "' has shape " +
                                                 shape_text(hf.shape) + "; config.json implies " +
                                                 shape_text(expected));
  for (int64_t r = 0; r < part.rows; ++r)
    for (int64_t k = 0; k < cols; ++k)
      whole_tensor.data[static_cast<size_t>((part.row_begin + r) * cols + k)] =
          static_cast<float>((part.transpose ? hf.data[static_cast<size_t>(k * part.rows + r)]
                                             : hf.data[static_cast<size_t>(r * cols + k)]) /
                             part.scale);
}

}  // namespace patchbay::interop
