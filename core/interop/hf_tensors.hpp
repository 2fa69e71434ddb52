// Tensor names and layouts: Patchbay parameters <-> transformers state dicts.
//
// Patchbay stores linear weights as [out, in] (nn.Linear). GPT-2's Conv1D stores [in, out],
// so every GPT-2 matrix except the embeddings is transposed; LLaMA's nn.Linear weights are
// copied as they are. The fused qkv.weight [3C, C] (rows q | k | v, head h at rows
// h*Dh..(h+1)*Dh of each) is GPT-2's c_attn.weight transposed ([C, 3C], columns q | k | v,
// the same head order) and LLaMA's q_proj / k_proj / v_proj = row blocks 0, 1, 2 (rotary is
// rotate-half in both: no permutation). With grouped-query attention (LLaMA
// num_key_value_heads = Hkv < H) qkv.weight is [C + 2 Hkv Dh, C]: q_proj [C, C] then k_proj
// and v_proj [Hkv Dh, C] each.
//
// clang-format off
//   Patchbay                       GPT2LMHeadModel                    LlamaForCausalLM
//   wte.weight [V,C]               transformer.wte.weight             model.embed_tokens.weight
//   wpe.weight [T,C]               transformer.wpe.weight             -
//   blocks.i.norm1.gain/bias       transformer.h.i.ln_1.weight/bias   model.layers.i.input_layernorm.weight
//   blocks.i.attn.qkv.weight       transformer.h.i.attn.c_attn.weight^T  self_attn.{q,k,v}_proj.weight (row blocks)
//   blocks.i.attn.qkv.bias         transformer.h.i.attn.c_attn.bias      self_attn.{q,k,v}_proj.bias (attention_bias)
//   blocks.i.attn.proj.weight/bias transformer.h.i.attn.c_proj.weight^T/bias  self_attn.o_proj.weight/bias
//   blocks.i.norm2.gain/bias       transformer.h.i.ln_2.weight/bias   model.layers.i.post_attention_layernorm.weight
//   blocks.i.ffn.fc.weight/bias    transformer.h.i.mlp.c_fc.weight^T/bias   mlp.up_proj.weight/bias (mlp_bias)
//   blocks.i.ffn.gate.weight/bias  -                                  mlp.gate_proj.weight/bias
//   blocks.i.ffn.proj.weight/bias  transformer.h.i.mlp.c_proj.weight^T/bias mlp.down_proj.weight/bias
//   norm_f.gain/bias               transformer.ln_f.weight/bias       model.norm.weight
//   head.weight (untied)           lm_head.weight                     lm_head.weight
// clang-format on
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "interop/hf_architecture.hpp"

namespace patchbay::interop {

// One HF tensor made of rows [row_begin, row_begin + rows) of a Patchbay tensor, transposed
// when `transpose` (2-D only).
struct HfTensorPart {
  std::string hf_name;
  int64_t row_begin = 0;
  int64_t rows = 0;
  bool transpose = false;
  // HF value = Patchbay value × scale (T5's q weights carry the 1/√Dh Patchbay applies to the
  // scores); import divides by it.
  double scale = 1.0;
};

struct TensorRule {
  std::string patchbay_name;
  std::vector<int64_t> patchbay_shape;
  std::vector<HfTensorPart> parts;
  // Patchbay has the tensor but HF does not (LLaMA without attention_bias): it must be zero on
  // export, and is zero after import.
  bool hf_absent = false;
  // HF has the tensors but Patchbay does not (GPT-2 from an mlp with bias = false): zeros are
  // exported; nothing is imported.
  bool patchbay_absent = false;
};

// Every tensor of the model the shape describes, in Patchbay's parameter order.
std::vector<TensorRule> hf_tensor_rules(const HfModelShape& shape);

// Row-major f32 data with its shape (the host-side form of tensors while they are renamed).
struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// The shape the HF tensor `part` of a Patchbay tensor of shape `whole` has.
std::vector<int64_t> hf_part_shape(const std::vector<int64_t>& whole, const HfTensorPart& part);

// The HF tensor `part` of the Patchbay tensor `whole` (shape as the rule says).
HostTensor slice_for_hf(const HostTensor& whole, const HfTensorPart& part);
// Writes the HF tensor back into rows of `whole` (the inverse of slice_for_hf). Throws
// Error(kInvalidArgument) naming the tensor when its shape is not the expected one.
void place_from_hf(HostTensor& whole, const HfTensorPart& part, const HostTensor& hf);

}  // namespace patchbay::interop
