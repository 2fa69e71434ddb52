// Encoder-decoder export/import as transformers' T5ForConditionalGeneration (core/interop/
// t5_architecture.hpp), without Python: tiny encoder-decoders trained a few steps with span
// corruption through the real plugins are exported; the files are checked against the key
// list and shapes T5ForConditionalGeneration's save_pretrained writes, config.json against
// T5Config's fields, the q weights against Patchbay's × 1/√Dh (Dh = 16: an exact power of two,
// so the round trip moves floats without rounding); the import of the export must give the
// original's logits exactly. Models T5 cannot express are refused by name.
// (scripts/seq2seq/check_t5_export.py compares the logits with transformers itself.)
#include <doctest/doctest.h>

#include <fstream>
#include <utility>
#include <nlohmann/json.hpp>

#include "../train/train_fixture.hpp"
#include "common/error.hpp"
#include "config/config_loader.hpp"
#include "engine/autograd.hpp"
#include "interop/hf_io.hpp"
#include "interop/t5_architecture.hpp"
#include "model/encoder_decoder.hpp"
#include "run/safetensors.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"

using namespace patchbay;
using nlohmann::json;
using train::testing::TinySetup;
namespace fs = std::filesystem;

namespace {

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// d_model 32, 2 heads (Dh 16), 2 encoder + 1 decoder blocks, 8 buckets / distance 32.
std::vector<std::string> t5_overrides(std::vector<std::string> extra = {}) {
  std::vector<std::string> o = {"model.architecture=\"encoder_decoder\"",
                                "model.positional=\"t5_relative\"",
                                "model.norm=\"rmsnorm\"",
                                "model.encoder_layers=2",
                                "model.decoder_layers=1",
                                "model.d_ff=48",
                                "model.relative_attention_num_buckets=8",
                                "model.relative_attention_max_distance=32",
                                "model.attention.bias=false",
                                "model.feedforward.bias=false",
                                "model.feedforward.activation=\"relu\"",
                                "train.objective=\"span_corruption\"",
                                "train.span_corruption.sentinels=8",
                                "train.max_steps=3",
                                "train.checkpoint_every=3"};
  o.insert(o.end(), extra.begin(), extra.end());
  return o;
}

void train_tiny(TinySetup& setup, const fs::path& folder,
                const std::vector<std::string>& overrides) {
  train::TrainRequest quiet;
  quiet.show_progress = false;
  quiet.print_samples = false;
  const train::TrainSummary trained =
      train::train_model(setup.config(train::testing::tiny_config_text(folder), overrides),
                         setup.registry, setup.lookup, quiet);
  REQUIRE(trained.steps_done == 3);
}

// The encoder-decoder a run's checkpoint holds, with its logits on fixed source and decoder
// input ids.
engine::Tensor seq2seq_logits(TinySetup& setup, const fs::path& run) {
  const train::Checkpoint checkpoint = train::load_checkpoint(run);
  const config::ResolvedConfig config =
      config::load_config_text(checkpoint.config_text(), "stored");
  const int64_t vocab = checkpoint.tensor("shared.weight").size(0);
  auto lm = model::LanguageModel::build_encoder_decoder(
      model::encoder_decoder_options_from_config(config, vocab),
      model::component_tables_from_config(config), setup.registry);
  std::vector<train::NamedTensor> params;
  for (const model::NamedParameter& p : lm->parameters()) params.push_back({p.name, p.tensor});
  checkpoint.load_into(params);
  engine::NoGradGuard no_grad;
  const std::vector<int32_t> source = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3};
  const std::vector<int32_t> target = {0, 2, 7, 1, 8, 2, 8, 1, 8, 2, 8};
  model::Seq2SeqInputs inputs;
  inputs.source = engine::Tensor::from_data(source.data(), {1, 18}, engine::DType::kI32);
  inputs.target_inputs = engine::Tensor::from_data(target.data(), {1, 11}, engine::DType::kI32);
  return lm->encoder_decoder()->forward(inputs, false).logits.contiguous();
}

double max_abs_diff(const engine::Tensor& a, const engine::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(worst, static_cast<double>(std::abs(a.data<float>()[i] - b.data<float>()[i])));
  return worst;
}

// T5ForConditionalGeneration's state dict as save_pretrained writes it (tied head, relu).
std::map<std::string, std::vector<int64_t>> t5_keys(int64_t v, int64_t c, int64_t f, int64_t h,
                                                    int64_t buckets, int64_t enc, int64_t dec,
                                                    bool gated) {
  std::map<std::string, std::vector<int64_t>> keys = {
      {"shared.weight", {v, c}},
      {"encoder.final_layer_norm.weight", {c}},
      {"decoder.final_layer_norm.weight", {c}},
      {"encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", {buckets, h}},
      {"decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", {buckets, h}}};
  auto ffn = [&](const std::string& p) {
    if (gated) {
      keys[p + "wi_0.weight"] = {f, c};
      keys[p + "wi_1.weight"] = {f, c};
    } else {
      keys[p + "wi.weight"] = {f, c};
    }
    keys[p + "wo.weight"] = {c, f};
  };
  for (int64_t i = 0; i < enc; ++i) {
    const std::string b = "encoder.block." + std::to_string(i) + ".layer.";
    keys[b + "0.layer_norm.weight"] = {c};
    for (const char* w : {"q", "k", "v", "o"})
      keys[b + "0.SelfAttention." + w + ".weight"] = {c, c};
    keys[b + "1.layer_norm.weight"] = {c};
    ffn(b + "1.DenseReluDense.");
  }
  for (int64_t i = 0; i < dec; ++i) {
    const std::string b = "decoder.block." + std::to_string(i) + ".layer.";
    for (const char* w : {"q", "k", "v", "o"}) {
      keys[b + "0.SelfAttention." + w + ".weight"] = {c, c};
      keys[b + "1.EncDecAttention." + w + ".weight"] = {c, c};
    }
    for (const char* n : {"0", "1", "2"}) keys[b + n + ".layer_norm.weight"] = {c};
    ffn(b + "2.DenseReluDense.");
  }
  return keys;
}

void check_layout(const fs::path& file, const std::map<std::string, std::vector<int64_t>>& keys) {
  const run::SafetensorsFile st(file);
  CHECK(st.metadata().at("format") == "pt");
  std::vector<std::string> names = st.names(), wanted;
  std::sort(names.begin(), names.end());
  for (const auto& [name, shape] : keys) wanted.push_back(name);
  CHECK(names == wanted);
  for (const auto& [name, shape] : keys) {
    INFO("tensor " << name);
    REQUIRE(st.contains(name));
    CHECK(st.tensor(name).shape == shape);
    CHECK(st.tensor(name).dtype == run::StoredDType::kF32);
  }
}

const float* floats(const run::SafetensorsFile& st, const std::string& name) {
  return reinterpret_cast<const float*>(st.tensor(name).data.data());
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE(
    "encoder-decoder export writes T5ForConditionalGeneration's names, shapes and config; "
    "import gives identical logits") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("interop_t5");
  train::testing::write_tiny_corpus(folder);
  train_tiny(setup, folder, t5_overrides());
  const fs::path run = folder / "run", hf = folder / "hf", imported = folder / "imported";
  const interop::HfExportResult exported = interop::export_to_hf(run, hf);
  CHECK(exported.shape.family == interop::HfFamily::kT5);
  CHECK(exported.step == 3);
  for (const char* file :
       {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
        "tokenizer_config.json", "special_tokens_map.json", "patchbay_export.json"})
    CHECK(fs::exists(hf / file));

  const json config = read_json(hf / "config.json");
  CHECK(config["architectures"] == json::array({"T5ForConditionalGeneration"}));
  CHECK(config["model_type"] == "t5");
  CHECK(config["d_model"] == 32);
  CHECK(config["d_kv"] == 16);
  CHECK(config["d_ff"] == 48);
  CHECK(config["num_heads"] == 2);
  CHECK(config["num_layers"] == 2);
  CHECK(config["num_decoder_layers"] == 1);
  CHECK(config["relative_attention_num_buckets"] == 8);
  CHECK(config["relative_attention_max_distance"] == 32);
  CHECK(config["feed_forward_proj"] == "relu");
  CHECK(config["tie_word_embeddings"] == true);  // HF then scales by d_model^-1/2, as Patchbay
  CHECK(config["is_encoder_decoder"] == true);
  const int64_t vocab = config["vocab_size"].get<int64_t>();
  const train::Checkpoint original = train::load_checkpoint(run);
  CHECK(original.tensor("shared.weight").size(0) == vocab);
  // <pad> is the decoder's start and padding, </s> would end targets; the char tokenizer's
  // specials follow its characters, the sentinels <extra_id_k> come last (highest ids).
  CHECK(config["pad_token_id"].is_number_integer());
  CHECK(config["decoder_start_token_id"] == config["pad_token_id"]);
  const json generation = read_json(hf / "generation_config.json");
  CHECK(generation["decoder_start_token_id"] == config["pad_token_id"]);
  CHECK(generation["do_sample"] == false);

  check_layout(hf / "model.safetensors", t5_keys(vocab, 32, 48, 2, 8, 2, 1, false));
  const run::SafetensorsFile st(hf / "model.safetensors");
  // q carries the 1/√Dh = 1/4 HF T5 does not apply; k, v and o are copied.
  const engine::Tensor q = original.tensor("encoder.blocks.1.attn.q.weight");
  const engine::Tensor k = original.tensor("encoder.blocks.1.attn.k.weight");
  CHECK(floats(st, "encoder.block.1.layer.0.SelfAttention.q.weight")[37] ==
        q.data<float>()[37] * 0.25f);
  CHECK(floats(st, "encoder.block.1.layer.0.SelfAttention.k.weight")[37] == k.data<float>()[37]);
  // Cross-attention: q, k, v are the row blocks of qkv.weight [3C, C].
  const engine::Tensor qkv = original.tensor("decoder.blocks.0.cross_attn.qkv.weight");
  CHECK(floats(st, "decoder.block.0.layer.1.EncDecAttention.q.weight")[3 * 32 + 5] ==
        qkv.data<float>()[3 * 32 + 5] * 0.25f);
  CHECK(floats(st, "decoder.block.0.layer.1.EncDecAttention.v.weight")[3 * 32 + 5] ==
        qkv.data<float>()[(64 + 3) * 32 + 5]);
  const engine::Tensor bias = original.tensor("decoder.relative_bias.weight");
  CHECK(floats(st, "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight")[9] ==
        bias.data<float>()[9]);

  interop::HfImportOptions options;
  options.overrides = {"train.max_steps=5"};
  const interop::HfImportResult result =
      interop::import_from_hf(hf, imported, setup.registry, setup.lookup, options);
  CHECK(result.shape.family == interop::HfFamily::kT5);
  CHECK(result.tokenizer_kind == "char");
  const config::ResolvedConfig after =
      config::load_config_text(train::load_checkpoint(imported).config_text(), "imported");
  CHECK(after.find("model.architecture")->value<std::string>() == "encoder_decoder");
  CHECK(after.find("train.objective")->value<std::string>() == "span_corruption");
  CHECK(max_abs_diff(seq2seq_logits(setup, run), seq2seq_logits(setup, imported)) == 0.0);
}

TEST_CASE(
    "T5 export of a gated mlp (swiglu -> gated-silu, geglu -> gated-gelu), an untied head and no "
    "positions; import gives identical logits") {
  TinySetup setup;
  for (const auto& [activation, proj] :
       {std::pair<std::string, std::string>{"swiglu", "gated-silu"}, {"geglu", "gated-gelu"}}) {
    CAPTURE(activation);
    const auto folder = train::testing::fresh_folder("interop_t5_" + activation);
    train::testing::write_tiny_corpus(folder);
    train_tiny(setup, folder,
               t5_overrides({"model.feedforward.activation=\"" + activation + "\"",
                             "model.tie_embeddings=false", "model.positional=\"none\""}));
    const fs::path run = folder / "run", hf = folder / "hf";
    interop::export_to_hf(run, hf);
    const json config = read_json(hf / "config.json");
    CHECK(config["feed_forward_proj"] == proj);
    CHECK(config["tie_word_embeddings"] == false);
    const int64_t vocab = config["vocab_size"].get<int64_t>();
    auto keys = t5_keys(vocab, 32, 48, 2, 8, 2, 1, true);
    keys["lm_head.weight"] = {vocab, 32};
    check_layout(hf / "model.safetensors", keys);
    const run::SafetensorsFile st(hf / "model.safetensors");
    for (int i = 0; i < 16; ++i)  // positional = "none": zero bias tables
      CHECK(floats(st, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight")[i] ==
            0.0f);
    // act(gate) * fc: wi_0 is the gate (activated), wi_1 the linear branch.
    const train::Checkpoint original = train::load_checkpoint(run);
    CHECK(floats(st, "decoder.block.0.layer.2.DenseReluDense.wi_0.weight")[11] ==
          original.tensor("decoder.blocks.0.ffn.gate.weight").data<float>()[11]);
    CHECK(floats(st, "decoder.block.0.layer.2.DenseReluDense.wi_1.weight")[11] ==
          original.tensor("decoder.blocks.0.ffn.fc.weight").data<float>()[11]);
    interop::import_from_hf(hf, folder / "imported", setup.registry, setup.lookup, {});
    CHECK(max_abs_diff(seq2seq_logits(setup, run), seq2seq_logits(setup, folder / "imported")) ==
          0.0);
  }
}

TEST_CASE("encoder-decoders T5 cannot express are refused naming the item") {
  model::EncoderDecoderOptions base;
  base.base.vocab_size = 10;
  base.base.norm = model::NormKind::kRmsNorm;
  model::ComponentTables tables;
  tables.attention = toml::table{{"kind", "dense"}, {"bias", false}};
  tables.feedforward = toml::table{{"kind", "mlp"}, {"activation", "relu"}, {"bias", false}};
  base.base.feedforward_kinds = {"mlp"};
  CHECK(interop::t5_shape_of_model(base, tables, {}).t5.feed_forward_proj == "relu");
  struct Case {
    std::string what;
    std::function<void(model::EncoderDecoderOptions&, model::ComponentTables&)> change;
  };
  const std::vector<Case> cases = {
      {"model.shared_embeddings = false", [](auto& e, auto&) { e.shared_embeddings = false; }},
      {"model.norm = \"layernorm\"",
       [](auto& e, auto&) { e.base.norm = model::NormKind::kLayerNorm; }},
      {"model.cross_attention = \"linear\"", [](auto& e, auto&) { e.cross_attention = "linear"; }},
      {"feed-forward 'moe'", [](auto& e, auto&) { e.decoder_feedforward = {"moe"}; }},
      {"cross-attention n_kv_heads = 1",
       [](auto& e, auto& t) {
         e.base.n_heads = 2;
         t.attention = toml::table{{"kind", "dense"}, {"n_kv_heads", 1}};
       }},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    model::EncoderDecoderOptions e = base;
    model::ComponentTables t = tables;
    c.change(e, t);
    CHECK_THROWS_WITH_AS(
        interop::t5_shape_of_model(e, t, {}),
        doctest::Contains(doctest::String((c.what + " has no counterpart in transformers' "
                                                    "T5ForConditionalGeneration")
                                              .c_str())),
        Error);
  }

  // A trained model whose cross-attention has biases: refused naming the tensor.
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("interop_t5_bias");
  train::testing::write_tiny_corpus(folder);
  train_tiny(setup, folder, t5_overrides({"model.attention.bias=true"}));
  CHECK(error_of([&] {
          interop::export_to_hf(folder / "run", folder / "hf");
        }).find("'decoder.blocks.0.cross_attn.qkv.bias' is not zero") != std::string::npos);
}

TEST_CASE("T5 config.json fields without a Patchbay counterpart are refused on import") {
  const json t5 = {{"model_type", "t5"}, {"vocab_size", 10}, {"d_model", 16}, {"d_kv", 4},
                   {"d_ff", 32},         {"num_layers", 2},  {"num_heads", 4}};
  CHECK(interop::hf_shape_from_config_json(t5).family == interop::HfFamily::kT5);
  CHECK(interop::hf_shape_from_config_json(t5).activation == "relu");
  CHECK(interop::hf_shape_from_config_json(t5).t5.decoder_layers == 2);
  json gated = t5;
  gated["feed_forward_proj"] = "gated-gelu";  // T5 v1.1: mlp geglu
  CHECK(interop::hf_shape_from_config_json(gated).activation == "geglu");
  gated["feed_forward_proj"] = "gated-relu";
  CHECK(error_of([&] {
          interop::hf_shape_from_config_json(gated);
        }).find("feed_forward_proj = \"gated-relu\" has no Patchbay counterpart") !=
        std::string::npos);
  json kv = t5;
  kv["d_kv"] = 8;
  CHECK(error_of([&] { interop::hf_shape_from_config_json(kv); }).find("d_kv = 8") !=
        std::string::npos);
  // transformers 5's tied head without rescaling: an untied head filled from shared.weight.
  json unscaled = t5;
  unscaled["scale_decoder_outputs"] = false;
  const interop::HfModelShape untied = interop::hf_shape_from_config_json(unscaled);
  CHECK_FALSE(untied.options.tie_embeddings);
  CHECK(untied.t5.head_from_shared);
  const std::vector<interop::TensorRule> rules = interop::t5_tensor_rules(untied);
  CHECK(rules.back().patchbay_name == "head.weight");
  CHECK(rules.back().parts.front().hf_name == "shared.weight");
  CHECK(interop::hf_shape_from_config_json(t5).options.tie_embeddings);  // default: scaled, tied
}
