// GGUF import (core/interop/gguf_*): block formats against values worked out by hand, the
// reader on files written here (every metadata type, alignment, offsets), refusals of bad
// files (each prefix of a valid file, unknown quantisation and architecture, oversized counts,
// misaligned or out-of-range tensors), llama.cpp's rotary row permutation inverted, and a
// whole LLaMA model with grouped-query attention: a run trained here is exported, written as
// GGUF the way llama.cpp's converter lays it out (rows of q and k permuted, ggml names, the
// tokenizer in metadata), imported, and must give the original's logits and token ids.
// No download: every file is built in the test (gguf_writer.hpp).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "../train/train_fixture.hpp"
#include "common/error.hpp"
#include "config/config_loader.hpp"
#include "data/tokenizer_io.hpp"
#include "engine/autograd.hpp"
#include "gguf_writer.hpp"
#include "interop/gguf_import.hpp"
#include "interop/gguf_reader.hpp"
#include "interop/gguf_types.hpp"
#include "interop/hf_io.hpp"
#include "interop/init_weights.hpp"
#include "run/safetensors.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"

using namespace patchbay;
using gguf_test::GgufWriter;
using nlohmann::json;
using train::testing::TinySetup;
namespace fs = std::filesystem;

namespace {

std::string bytes_of(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v & 0xFF));
  return out;
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<float> dequantized(uint32_t type, const std::string& bytes, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  interop::dequantize(type, reinterpret_cast<const uint8_t*>(bytes.data()), n, out.data());
  return out;
}

// llama.cpp's converter: within each head, HF row j * half + i becomes row 2 i + j.
std::vector<float> permute_like_llama_cpp(const std::vector<float>& hf, int64_t rows, int64_t cols,
                                          int64_t heads) {
  const int64_t head_rows = rows / heads, half = head_rows / 2;
  std::vector<float> out(hf.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t i = 0; i < half; ++i)
        std::copy_n(hf.begin() + (h * head_rows + j * half + i) * cols, cols,
                    out.begin() + (h * head_rows + 2 * i + j) * cols);
  return out;
}

// A minimal valid LLaMA GGUF (1 layer, 4 heads / 2 kv heads, width 8, vocab = 256 bytes + 1)
// without tensors' values mattering; `edit` changes the writer before tensors are added.
GgufWriter tiny_llama(const std::function<void(GgufWriter&)>& edit = {}, uint32_t kv_heads = 2) {
  GgufWriter w;
  w.string("general.architecture", "llama");
  w.u32("llama.context_length", 16);
  w.u32("llama.embedding_length", 8);
  w.u32("llama.block_count", 1);
  w.u32("llama.feed_forward_length", 8);
  w.u32("llama.attention.head_count", 4);
  w.u32("llama.attention.head_count_kv", kv_heads);
  w.f32("llama.rope.freq_base", 10000.0f);
  w.f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.string("tokenizer.ggml.model", "gpt2");
  w.string("tokenizer.ggml.pre", "smollm");
  if (edit) edit(w);
  return w;
}

}  // namespace

TEST_CASE("GGML block formats dequantise to values worked out by hand") {
  // Q8_0: d = 0.5 (f16 0x3800), q = -16..15 -> x = q / 2.
  std::string q8 = bytes_of({0x00, 0x38});
  for (int i = 0; i < 32; ++i) q8.push_back(static_cast<char>(i - 16));
  const std::vector<float> x8 = dequantized(8, q8, 32);
  for (int i = 0; i < 32; ++i)
    CHECK(x8[static_cast<size_t>(i)] == 0.5f * static_cast<float>(i - 16));
  // Q4_0: d = 0.25 (0x3400); byte i = low nibble i, high nibble 15 - i:
  // x[i] = 0.25 (i - 8), x[i + 16] = 0.25 (15 - i - 8).
  std::string q40 = bytes_of({0x00, 0x34});
  for (int i = 0; i < 16; ++i) q40.push_back(static_cast<char>(i | ((15 - i) << 4)));
  const std::vector<float> x40 = dequantized(2, q40, 32);
  for (int i = 0; i < 16; ++i) {
    CHECK(x40[static_cast<size_t>(i)] == 0.25f * static_cast<float>(i - 8));
    CHECK(x40[static_cast<size_t>(i + 16)] == 0.25f * static_cast<float>(7 - i));
  }
  CHECK(x40[0] == -2.0f);
  CHECK(x40[16] == 1.75f);
  // Q4_1: d = 2 (0x4000), m = -1.5 (0xBE00): x[i] = 2 i - 1.5, x[i + 16] = 2 (15 - i) - 1.5.
  std::string q41 = bytes_of({0x00, 0x40, 0x00, 0xBE});
  for (int i = 0; i < 16; ++i) q41.push_back(static_cast<char>(i | ((15 - i) << 4)));
  const std::vector<float> x41 = dequantized(3, q41, 32);
  for (int i = 0; i < 16; ++i) {
    CHECK(x41[static_cast<size_t>(i)] == 2.0f * static_cast<float>(i) - 1.5f);
    CHECK(x41[static_cast<size_t>(i + 16)] == 2.0f * static_cast<float>(15 - i) - 1.5f);
  }
  // Two blocks in a row: the second starts 20 bytes on.
  const std::vector<float> two = dequantized(3, q41 + q41, 64);
  CHECK(two[32] == -1.5f);
  CHECK(two[63] == -1.5f);
  // F16: 1, -2, the smallest subnormal 2^-24, the largest finite 65504, inf, -0.
  const std::vector<float> h = dequantized(
      1, bytes_of({0x00, 0x3C, 0x00, 0xC0, 0x01, 0x00, 0xFF, 0x7B, 0x00, 0x7C, 0x00, 0x80}), 6);
  CHECK(h[0] == 1.0f);
  CHECK(h[1] == -2.0f);
  CHECK(h[2] == std::ldexp(1.0f, -24));
  CHECK(h[3] == 65504.0f);
  CHECK(std::isinf(h[4]));
  CHECK((h[5] == 0.0f && std::signbit(h[5])));
  CHECK(interop::f16_to_f32(0x0200) == std::ldexp(1.0f, -15));  // a subnormal with more bits
  // BF16: the upper half of an f32: 1.0 (0x3F80), -5.0 (0xC0A0).
  const std::vector<float> b = dequantized(30, bytes_of({0x80, 0x3F, 0xA0, 0xC0}), 2);
  CHECK(b[0] == 1.0f);
  CHECK(b[1] == -5.0f);
  CHECK(interop::ggml_type_name(12) == "Q4_K");
  CHECK(!interop::ggml_block_of(12).has_value());
}

TEST_CASE("GGUF reader: every metadata type, nested arrays, alignment and tensor offsets") {
  const auto folder = train::testing::fresh_folder("gguf_reader");
  for (uint32_t version : {2u, 3u}) {
    CAPTURE(version);
    GgufWriter w(version, 64);
    w.u32("general.alignment", 64);
    w.i32("neg", -7);
    w.u64("big", uint64_t{1} << 40);
    w.f64("pi", 3.25);
    w.boolean("yes", true);
    w.string("text", "h\xc3\xa9llo");
    w.strings("list", {"a", "", "ccc"});
    // An array of two arrays of u8 (type 0): [[1, 2], [3]].
    std::string nested;
    GgufWriter::put(nested, uint32_t{9});
    GgufWriter::put(nested, uint64_t{2});
    GgufWriter::put(nested, uint32_t{0});
    GgufWriter::put(nested, uint64_t{2});
    nested += bytes_of({1, 2});
    GgufWriter::put(nested, uint32_t{0});
    GgufWriter::put(nested, uint64_t{1});
    nested += bytes_of({3});
    w.raw("nested", 9, nested);
    w.f32_tensor("a", {3, 2}, {1, 2, 3, 4, 5, 6});  // ne [3, 2] = shape [2, 3]
    w.tensor("b", {2}, 1, bytes_of({0x00, 0x3C, 0x00, 0xC0}));
    std::string q8 = bytes_of({0x00, 0x3C});
    for (int i = 0; i < 32; ++i) q8.push_back(static_cast<char>(i));
    w.tensor("c", {32, 1}, 8, q8);
    const fs::path path = folder.path() / (version == 2 ? "v2.gguf" : "v3.gguf");
    w.write(path.string());
    const interop::GgufFile file(path);
    CHECK(file.version() == version);
    CHECK(file.alignment() == 64);
    CHECK(file.get_int("neg") == -7);
    CHECK(file.get_int("big") == (int64_t{1} << 40));
    CHECK(file.get_real("pi") == 3.25);
    CHECK(file.get_int("yes") == 1);
    CHECK(file.get_string("text") == "h\xc3\xa9llo");
    CHECK(file.get_strings("list") == std::vector<std::string>{"a", "", "ccc"});
    const interop::GgufValue* n = file.find("nested");
    REQUIRE(n != nullptr);
    REQUIRE(n->items.size() == 2);
    CHECK(n->items[0].items[1].integer == 2);
    CHECK(n->items[1].items[0].integer == 3);
    CHECK(error_of([&] { file.get_string("neg"); }).find("'neg' is i32, a string expected") !=
          std::string::npos);
    REQUIRE(file.tensors().size() == 3);
    CHECK(file.tensor("a")->shape() == std::vector<int64_t>{2, 3});
    CHECK(file.tensor("b")->offset == 64);  // a's 24 bytes padded to the alignment
    CHECK(file.read_f32(*file.tensor("a")) == std::vector<float>{1, 2, 3, 4, 5, 6});
    CHECK(file.read_f32(*file.tensor("b")) == std::vector<float>{1, -2});
    CHECK(file.read_f32(*file.tensor("c"))[31] == 31.0f);
  }
}

TEST_CASE("bad GGUF files are refused with the reason, never read out of bounds") {
  const auto folder = train::testing::fresh_folder("gguf_bad");
  const fs::path path = folder.path() / "bad.gguf";
  auto refusal = [&](const std::string& bytes) {
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return error_of([&] { interop::GgufFile file(path); });
  };
  GgufWriter good = tiny_llama();
  good.f32_tensor("t", {8, 2}, std::vector<float>(16, 1.0f));
  const std::string valid = good.bytes();
  CHECK(refusal(valid) == "(no error)");
  // Every prefix of a valid file (a truncated download) is an error, not a crash.
  for (size_t n = 0; n < valid.size(); n += (n < 200 ? 1 : 7)) {
    CAPTURE(n);
    CHECK(refusal(valid.substr(0, n)) != "(no error)");
  }
  CHECK(refusal(valid.substr(0, valid.size() - 1)).find("truncated") != std::string::npos);
  // Random byte mutations (a small fuzz run, fixed seed): each file is read or refused with an
  // Error; reading every tensor of one that parses stays in bounds.
  std::mt19937 rng(36);
  for (int round = 0; round < 400; ++round) {
    std::string mutated = valid;
    for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips)
      mutated[rng() % mutated.size()] = static_cast<char>(rng() & 0xFF);
    std::ofstream(path, std::ios::binary)
        .write(mutated.data(), static_cast<std::streamsize>(mutated.size()));
    try {
      const interop::GgufFile file(path);
      for (const interop::GgufTensorInfo& t : file.tensors()) CHECK(file.read_f32(t).size() > 0);
    } catch (const Error&) {
    }
  }
  CHECK(refusal("GGML" + valid.substr(4)).find("magic") != std::string::npos);
  std::string v1 = valid, big_endian = valid;
  v1[4] = 1;
  CHECK(refusal(v1).find("version 1") != std::string::npos);
  big_endian[4] = 0;
  big_endian[7] = 3;
  CHECK(refusal(big_endian).find("big-endian") != std::string::npos);
  // Counts and lengths the file cannot hold.
  std::string many = valid;
  many[8 + 7] = 0x10;  // tensor count * 2^56
  CHECK(refusal(many).find("tensors, more than it holds") != std::string::npos);
  GgufWriter long_array;
  std::string claim;
  GgufWriter::put(claim, uint32_t{8});
  GgufWriter::put(claim, uint64_t{1} << 60);
  long_array.raw("tokens", 9, claim);
  CHECK(refusal(long_array.bytes()).find("array elements, more than") != std::string::npos);
  GgufWriter long_string;
  std::string text;
  GgufWriter::put(text, uint64_t{1} << 50);
  long_string.raw("s", 8, text);
  CHECK(refusal(long_string.bytes()).find("bytes long, over the limit") != std::string::npos);
  GgufWriter odd_type;
  odd_type.raw("x", 13, "");
  CHECK(refusal(odd_type.bytes()).find("unknown value type 13") != std::string::npos);
  GgufWriter bad_alignment;
  bad_alignment.u32("general.alignment", 24);
  CHECK(refusal(bad_alignment.bytes()).find("power of two") != std::string::npos);
  // Tensors: an unknown quantisation named, rows not whole blocks, offsets.
  GgufWriter k_quant;
  k_quant.tensor("w", {256, 1}, 12, std::string(144, '\0'));
  CHECK(refusal(k_quant.bytes()).find("quantised as Q4_K") != std::string::npos);
  GgufWriter partial_block;
  partial_block.tensor("w", {16, 1}, 8, std::string(34, '\0'));
  CHECK(refusal(partial_block.bytes()).find("whole number of Q8_0 blocks") != std::string::npos);
  GgufWriter misaligned;
  misaligned.tensor_at("w", {4}, 0, "", 4);
  CHECK(refusal(misaligned.bytes()).find("not a multiple of the alignment") != std::string::npos);
  GgufWriter past_end;
  past_end.tensor_at("w", {1024}, 0, "", 0);
  CHECK(refusal(past_end.bytes()).find("runs past the end") != std::string::npos);
  GgufWriter zero_dim;
  zero_dim.tensor("w", {0}, 0, "");
  CHECK(refusal(zero_dim.bytes()).find("has dim 0") != std::string::npos);
  GgufWriter five_dims;
  five_dims.tensor("w", {1, 1, 1, 1, 1}, 0, std::string(4, '\0'));
  CHECK(refusal(five_dims.bytes()).find("5 dims") != std::string::npos);
}

TEST_CASE("GGUF metadata without a Patchbay counterpart is refused by name") {
  const auto folder = train::testing::fresh_folder("gguf_refuse");
  const fs::path path = folder.path() / "m.gguf";
  auto shape_error = [&](const GgufWriter& w) {
    w.write(path.string());
    const interop::GgufFile file(path);
    return error_of([&] { interop::gguf_llama_shape(file); });
  };
  GgufWriter qwen;
  qwen.string("general.architecture", "qwen2");
  CHECK(shape_error(qwen).find("general.architecture is \"qwen2\"") != std::string::npos);
  CHECK(shape_error(GgufWriter()).find("general.architecture is \"\"") != std::string::npos);
  GgufWriter no_blocks;
  no_blocks.string("general.architecture", "llama");
  CHECK(shape_error(no_blocks).find("'llama.context_length' is missing") != std::string::npos);
  CHECK(shape_error(tiny_llama({}, 3)).find("head_count_kv = 3 does not divide") !=
        std::string::npos);
  CHECK(shape_error(tiny_llama([](GgufWriter& w) {
          w.u32("llama.expert_count", 8);
        })).find("mixture-of-experts") != std::string::npos);
  GgufWriter sentencepiece = tiny_llama();
  sentencepiece.write(path.string());
  CHECK(interop::gguf_pretokenizer_patterns("smollm").size() == 2);
  CHECK(error_of([] {
          interop::gguf_pretokenizer_patterns("falcon");
        }).find("\"falcon\" names a pre-tokenizer") != std::string::npos);
  GgufWriter spm;
  spm.string("tokenizer.ggml.model", "llama");
  spm.write(path.string());
  const interop::GgufFile spm_file(path);
  CHECK(error_of([&] { interop::gguf_tokenizer_json(spm_file); }).find("SentencePiece") !=
        std::string::npos);
}

TEST_CASE("unpermute_rotary_rows inverts llama.cpp's q/k row order") {
  // One head of 4 rows, 1 column: HF rows [a0, a1, b0, b1] are stored [a0, b0, a1, b1].
  CHECK(interop::unpermute_rotary_rows({10, 20, 11, 21}, 4, 1, 1) ==
        std::vector<float>{10, 11, 20, 21});
  std::vector<float> w(12 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
  for (int64_t heads : {1, 3, 6}) {
    CAPTURE(heads);
    CHECK(interop::unpermute_rotary_rows(permute_like_llama_cpp(w, 12, 3, heads), 12, 3, heads) ==
          w);
  }
  CHECK(error_of([] {
          interop::unpermute_rotary_rows(std::vector<float>(6), 6, 1, 2);
        }).find("even size") != std::string::npos);
}

namespace {

// The logits of a run's latest checkpoint on `ids`.
engine::Tensor logits_of(TinySetup& setup, const fs::path& run, const std::vector<int32_t>& ids) {
  const train::Checkpoint checkpoint = train::load_checkpoint(run);
  config::ResolvedConfig config = config::load_config_text(checkpoint.config_text(), "stored");
  auto model = model::LanguageModel::build(
      model::model_options_from_config(config, checkpoint.tensor("wte.weight").size(0)),
      model::component_tables_from_config(config), setup.registry);
  std::vector<train::NamedTensor> params;
  for (const model::NamedParameter& p : model->parameters()) params.push_back({p.name, p.tensor});
  checkpoint.load_into(params);
  engine::NoGradGuard no_grad;
  const engine::Tensor tokens = engine::Tensor::from_data(
      ids.data(), {1, static_cast<int64_t>(ids.size())}, engine::DType::kI32);
  return model->forward(tokens, false).logits.contiguous();
}

// transformers' LLaMA names -> ggml names (what llama.cpp's converter writes).
std::string ggml_name(const std::string& hf) {
  static const std::vector<std::pair<std::string, std::string>> parts = {
      {"self_attn.q_proj", "attn_q"},          {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},          {"self_attn.o_proj", "attn_output"},
      {"mlp.gate_proj", "ffn_gate"},           {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},           {"input_layernorm", "attn_norm"},
      {"post_attention_layernorm", "ffn_norm"}};
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  std::string name = "blk." + hf.substr(13);  // "model.layers." cut
  for (const auto& [from, to] : parts)
    if (const size_t at = name.find(from); at != std::string::npos)
      name.replace(at, from.size(), to);
  return name;
}

// An HF LLaMA directory as llama.cpp's converter would write it (f32 tensors).
void write_gguf_from_hf(const fs::path& hf, const fs::path& out) {
  std::ifstream config_in(hf / "config.json"), tokenizer_in(hf / "tokenizer.json");
  const json config = json::parse(config_in), tokenizer = json::parse(tokenizer_in);
  const int64_t heads = config["num_attention_heads"], kv = config["num_key_value_heads"];
  GgufWriter w;
  w.string("general.architecture", "llama");
  w.string("general.name", "tiny test model");
  w.u32("llama.context_length", config["max_position_embeddings"].get<uint32_t>());
  w.u32("llama.embedding_length", config["hidden_size"].get<uint32_t>());
  w.u32("llama.block_count", config["num_hidden_layers"].get<uint32_t>());
  w.u32("llama.feed_forward_length", config["intermediate_size"].get<uint32_t>());
  w.u32("llama.attention.head_count", static_cast<uint32_t>(heads));
  w.u32("llama.attention.head_count_kv", static_cast<uint32_t>(kv));
  w.f32("llama.rope.freq_base", config["rope_theta"].get<float>());
  w.f32("llama.attention.layer_norm_rms_epsilon", config["rms_norm_eps"].get<float>());
  std::map<int64_t, std::string> by_id;
  for (const auto& [text, id] : tokenizer["model"]["vocab"].items())
    by_id[id.get<int64_t>()] = text;
  std::vector<int32_t> types(by_id.size(), 1);
  for (const json& added : tokenizer["added_tokens"]) {
    by_id[added["id"].get<int64_t>()] = added["content"].get<std::string>();
    types.resize(by_id.size(), 1);
    types[added["id"].get<size_t>()] = 3;
  }
  std::vector<std::string> tokens, merges;
  for (const auto& [id, text] : by_id) tokens.push_back(text);
  for (const json& m : tokenizer["model"]["merges"])
    merges.push_back(m.is_string() ? m.get<std::string>()
                                   : m[0].get<std::string>() + " " + m[1].get<std::string>());
  w.string("tokenizer.ggml.model", "gpt2");
  w.string("tokenizer.ggml.pre", "gpt2");
  w.strings("tokenizer.ggml.tokens", tokens);
  w.i32s("tokenizer.ggml.token_type", types);
  w.strings("tokenizer.ggml.merges", merges);
  w.u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(tokens.size() - 1));
  w.string("tokenizer.chat_template", "{% for m in messages %}{{ m['content'] }}{% endfor %}");
  const run::SafetensorsFile st(hf / "model.safetensors");
  for (const std::string& name : st.names()) {
    const run::StoredTensor& t = st.tensor(name);
    std::vector<float> values(t.data.size() / 4);
    std::memcpy(values.data(), t.data.data(), t.data.size());
    const int64_t rows = t.shape[0], cols = t.shape.size() == 2 ? t.shape[1] : 1;
    if (name.find("q_proj") != std::string::npos)
      values = permute_like_llama_cpp(values, rows, cols, heads);
    if (name.find("k_proj") != std::string::npos)
      values = permute_like_llama_cpp(values, rows, cols, kv);
    std::vector<uint64_t> ne(t.shape.rbegin(), t.shape.rend());
    w.f32_tensor(ggml_name(name), ne, values);
  }
  w.write(out.string());
}

}  // namespace

TEST_CASE(
    "a LLaMA run with GQA written as GGUF (llama.cpp's layout) imports with its logits and ids") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("gguf_llama");
  train::testing::write_tiny_corpus(folder);
  std::string text = train::testing::tiny_config_text(folder);
  const std::string model =
      "[model]\ncontext_length = 32\nn_layers = 2\nn_heads = 4\nd_model = 32\nd_ff = 48\n"
      "norm = \"rmsnorm\"\npositional = \"rotary\"\ntie_embeddings = true\nnorm_eps = 1e-5\n"
      "rope_theta = 1000.0\n[model.attention]\nkind = \"dense\"\nn_kv_heads = 2\n"
      "[model.feedforward]\nkind = \"mlp\"\nactivation = \"swiglu\"\nbias = false\n";
  text = text.substr(0, text.find("[model]")) + model + text.substr(text.find("[optimizer]"));
  text.replace(text.find("kind = \"char\""), 13,
               "kind = \"bpe\"\n[tokenizer.bpe]\nvocab_size = 300");
  train::TrainRequest quiet;
  quiet.show_progress = false;
  quiet.print_samples = false;
  const fs::path run = folder.path() / "run";
  train::train_model(setup.config(text, {"train.max_steps=2", "train.checkpoint_every=2"}),
                     setup.registry, setup.lookup, quiet);
  const fs::path hf = folder.path() / "hf", gguf = folder.path() / "model.gguf",
                 imported = folder.path() / "imported";
  interop::export_to_hf(run, hf);
  write_gguf_from_hf(hf, gguf);
  const interop::HfImportResult result =
      interop::import_from_gguf(gguf, imported, setup.registry, setup.lookup);
  CHECK(result.shape.n_kv_heads == 2);
  CHECK(result.shape.options.tie_embeddings);
  CHECK(result.shape.options.rope_theta == 1000.0);
  const std::vector<int32_t> ids = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4};
  const engine::Tensor before = logits_of(setup, run, ids), after = logits_of(setup, imported, ids);
  REQUIRE(before.shape() == after.shape());
  double worst = 0;
  for (int64_t i = 0; i < before.numel(); ++i)
    worst = std::max(
        worst, static_cast<double>(std::abs(before.data<float>()[i] - after.data<float>()[i])));
  CHECK(worst < 1e-5);  // the q/k rows un-permuted: a wrong order would change the logits
  // The tokenizer from the metadata gives the original's ids.
  const runtime::TokenizerHandle original =
      data::load_tokenizer(setup.registry, run / "tokenizer.txt", {"bpe", {}, {}, {}});
  const runtime::TokenizerHandle loaded =
      data::load_tokenizer(setup.registry, imported / "tokenizer.txt", {"bpe", {}, {}, {}});
  const std::string sample = "In the beginning, 12 tokens; the end.\n";
  CHECK(loaded.encode(sample, false) == original.encode(sample, false));
  CHECK(loaded.vocab_size() == original.vocab_size());
  // The chat template and the special tokens are kept with the run.
  std::ifstream chat(imported / "chat_template.jinja"), info_in(imported / "imported_model.json");
  CHECK(std::string(std::istreambuf_iterator<char>(chat), {}) ==
        "{% for m in messages %}{{ m['content'] }}{% endfor %}");
  const json info = json::parse(info_in);
  CHECK(info["format"] == "gguf");
  CHECK(info["eos_token"]["id"] == original.vocab_size() - 1);
  CHECK(info["general.name"] == "tiny test model");
  // train.init_from reads the GGUF file and the HF directory as the import does (issue 36 item
  // 2): the same tensors as the imported run's checkpoint, bit for bit.
  const train::InitialWeights from_run = train::read_checkpoint_weights(imported);
  for (const fs::path& source : {gguf, hf}) {
    const train::InitialWeights from_source = interop::read_initial_weights(source);
    INFO("init_from " << source.string());
    REQUIRE(from_source.tensors.size() == from_run.tensors.size());
    for (const auto& [name, tensor] : from_run.tensors) {
      INFO("tensor " << name);
      REQUIRE(from_source.tensors.count(name) == 1);
      CHECK(from_source.tensors.at(name).to_vector() == tensor.to_vector());
    }
  }
  // A GGUF whose tensors disagree with the metadata is refused before anything is read.
  auto import_error = [&](const GgufWriter& w) {
    w.write((folder.path() / "wrong.gguf").string());
    return error_of([&] {
      interop::import_from_gguf(folder.path() / "wrong.gguf", folder.path() / "w", setup.registry,
                                setup.lookup);
    });
  };
  GgufWriter wrong = tiny_llama();
  wrong.f32_tensor("token_embd.weight", {8, 300}, std::vector<float>(2400));
  CHECK(import_error(wrong).find("'blk.0.attn_norm.weight' is missing") != std::string::npos);
  wrong.f32_tensor("blk.0.attn_norm.weight", {8}, std::vector<float>(8));
  wrong.f32_tensor("blk.0.attn_q.weight", {8, 4}, std::vector<float>(32));
  CHECK(import_error(wrong).find(
            "'blk.0.attn_q.weight' has shape [4, 8] where the metadata implies [8, 8]") !=
        std::string::npos);
  CHECK(!fs::exists(folder.path() / "w"));
}
