// `patchbay import FILE.gguf RUN/`: a llama.cpp GGUF file of the LLaMA architecture (LLaMA,
// SmolLM2, TinyLlama, ... with grouped-query attention) as a Patchbay run.
//
//   metadata                                   ->  Patchbay
//   general.architecture = "llama"                 (anything else refused by name)
//   llama.context_length, embedding_length,        [model] context_length, d_model,
//     block_count, feed_forward_length,            n_layers, d_ff,
//     attention.head_count, head_count_kv,         n_heads, [model.attention] n_kv_heads,
//     rope.freq_base,                              rope_theta (default 10000),
//     attention.layer_norm_rms_epsilon             norm_eps; rmsnorm, rotary, swiglu, pre-norm
//   tokenizer.ggml.model = "gpt2", tokens,         a byte-level BPE tokenizer.json (published
//     merges, token_type, pre                      vocabulary: the file's ids; control and
//                                                  user-defined tokens are added tokens; `pre`
//                                                  picks the Split patterns, gguf_tokenizer.cpp)
//   tokenizer.ggml.{bos,eos,padding}_token_id,     RUN/imported_model.json
//     add_bos_token, tokenizer.chat_template       RUN/chat_template.jinja (when present)
//
//   tensors (ggml names; shapes are ne reversed)   transformers names (hf_tensors.hpp)
//   token_embd.weight                              model.embed_tokens.weight
//   blk.N.attn_norm / ffn_norm .weight             model.layers.N.input_layernorm /
//                                                  post_attention_layernorm .weight
//   blk.N.attn_q / attn_k .weight (and .bias)      self_attn.q_proj / k_proj: rows un-permuted
//   blk.N.attn_v / attn_output .weight             self_attn.v_proj / o_proj
//   blk.N.ffn_gate / ffn_up / ffn_down .weight     mlp.gate_proj / up_proj / down_proj
//   output_norm.weight, output.weight              model.norm.weight, lm_head.weight (absent:
//                                                  tied embeddings)
//
// Rotary rows: llama.cpp's converter (convert_hf_to_gguf.py, LlamaModel.permute) reorders the
// rows of q_proj (H heads) and k_proj (Hkv heads) so ggml's adjacent-pair rotary matches the
// rotate-half rotary of the HF weights: within each head of Dh rows, HF row j * Dh/2 + i
// becomes GGUF row 2 i + j (i < Dh/2, j in {0, 1}). The import applies the inverse (as
// transformers' GGUF loader's reverse_permute_weights does), so the weights are HF's and the
// dense attention's rotate-half rotary applies unchanged.
// Tensors are dequantised to f32 (F32, F16, BF16, Q8_0, Q4_0, Q4_1; others refused by name).
// Every tensor's shape is checked against the metadata before any is dequantised.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "interop/gguf_reader.hpp"
#include "interop/hf_architecture.hpp"
#include "interop/hf_io.hpp"

namespace patchbay::interop {

// The model shape the metadata describes; Error(kInvalidArgument) naming the key or value
// without a Patchbay counterpart.
HfModelShape gguf_llama_shape(const GgufFile& file);

// The inverse of llama.cpp's rotary row permutation for a [rows, cols] row-major tensor
// (cols = 1 for a bias) with `heads` heads of rows / heads rows each.
std::vector<float> unpermute_rotary_rows(const std::vector<float>& permuted, int64_t rows,
                                         int64_t cols, int64_t heads);

// The Split patterns (Hugging Face syntax) of llama.cpp's pre-tokenizer name
// (tokenizer.ggml.pre): "gpt2"/"default" -> {} (GPT-2's regex), "smollm"/"starcoder" ->
// {\p{N}, GPT-2's}, "llama-bpe" -> {LLaMA 3's}, "qwen2" -> {Qwen 2's}. Error naming any other.
std::vector<std::string> gguf_pretokenizer_patterns(const std::string& pre_name);

// A Hugging Face tokenizer.json (byte-level BPE, the file's ids) for tokenizer.ggml.model
// "gpt2"; Error naming another model ("llama" = SentencePiece) or inconsistent arrays.
nlohmann::json gguf_tokenizer_json(const GgufFile& file);

HfImportResult import_from_gguf(const std::filesystem::path& gguf_path,
                                const std::filesystem::path& run_dir, runtime::Registry& registry,
                                const config::ComponentSchemaLookup& lookup,
                                const HfImportOptions& options = {});

}  // namespace patchbay::interop
