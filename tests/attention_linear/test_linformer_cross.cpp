// attention 'linformer' as cross-attention (attention interface 1.3, keys positional: 1.6):
// the conformance kit's cross-attention checks with a naive Linformer reference written here
// from the parameters — K and V rows of padded keys multiplied by 0, then
// softmax(Q (E[:, :Tk] K)^T / sqrt(Dh)) (F[:, :Tk] V) with an explicit exp / sum softmax —
// for every sharing mode; that key order matters (why the layer declares
// PB_ATTENTION_CAP_CROSS_POSITIONAL); the refusal of a memory longer than n; and an
// encoder-decoder whose cross-attention is linformer: the projection length covers the
// source context, padded source tokens change no logit, cached decoding equals the whole
// forward, and greedy decoding equals recomputation.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "linear_fixture.hpp"
#include "model/encoder_decoder.hpp"

namespace {

namespace eng = patchbay::engine;
namespace pm = patchbay::model;
namespace pt = patchbay::testing;
namespace rt = patchbay::runtime;
using patchbay::Tensor;
using Parameters = std::vector<std::pair<std::string, Tensor>>;

Tensor parameter(const Parameters& parameters, const std::string& name) {
  for (const auto& [n, t] : parameters)
    if (n == name) return t;
  FAIL("no parameter " << name);
  return {};
}

bool has(const Parameters& parameters, const std::string& name) {
  return std::any_of(parameters.begin(), parameters.end(),
                     [&](const auto& p) { return p.first == name; });
}

// The naive reference: x [B, Tq, C], memory [B, Tk, C], valid [B * Tk] -> [B, Tq, C].
Tensor naive_linformer_cross(const Parameters& parameters, const Tensor& x, const Tensor& memory,
                             const std::vector<uint8_t>& valid, int64_t heads) {
  patchbay::Ops ops(x.ops());
  const int64_t b = x.size(0), tq = x.size(1), tk = memory.size(1), c = x.size(2);
  const int64_t dh = c / heads;
  const Tensor weight = parameter(parameters, "qkv.weight");
  const Tensor bias = parameter(parameters, "qkv.bias");
  auto block = [&](const Tensor& in, int64_t which) {  // -> [B, H, T, Dh]
    return (in.matmul(weight.slice(0, which * c, (which + 1) * c), false, true) +
            bias.slice(0, which * c, (which + 1) * c))
        .reshape({b, in.size(1), heads, dh})
        .permute({0, 2, 1, 3});
  };
  std::vector<float> kept(valid.begin(), valid.end());
  const Tensor keep = ops.from_vector(kept, {b, 1, tk, 1});
  const Tensor e = parameter(parameters, "proj_e");
  const Tensor f = has(parameters, "proj_f") ? parameter(parameters, "proj_f") : e;  // kv: F = E
  auto used = [&](const Tensor& p) {  // [.., k, n] -> [1 or (1, H), k, Tk]
    const Tensor cut = p.slice(p.dim() - 1, 0, tk);
    return p.dim() == 3 ? cut.reshape({1, heads, p.size(1), tk}) : cut;
  };
  const Tensor key_slots = used(e).matmul(block(memory, 1) * keep);  // [B, H, k, Dh]
  const Tensor value_slots = used(f).matmul(block(memory, 2) * keep);
  const Tensor scores = block(x, 0).matmul(key_slots, false, true) * (1.0 / std::sqrt(dh));
  const Tensor weights = (scores - scores.max({3}, true)).exp();
  const Tensor o = (weights / weights.sum({3}, true)).matmul(value_slots);  // [B, H, Tq, Dh]
  return o.permute({0, 2, 1, 3})
             .reshape({b, tq, c})
             .matmul(parameter(parameters, "proj.weight"), false, true) +
         parameter(parameters, "proj.bias");
}

pt::AttentionFactory linformer(int64_t k, const std::string& sharing) {
  return linear_test::factory("linformer", [=](rt::ComponentConfig& cfg) {
    cfg.set_int("k", k);
    cfg.set_string("sharing", sharing);
  });
}

}  // namespace

TEST_CASE("attention 'linformer' cross-attention passes the kit against the naive reference") {
  for (const char* sharing : {"none", "headwise", "kv"}) {
    CAPTURE(sharing);
    pt::AttentionConformanceOptions options;  // cross checks: n >= 7 (grad: n >= 5), so k <= 4
    options.cross_reference = [&](const Parameters& p, const Tensor& x, const Tensor& memory,
                                  const std::vector<uint8_t>& valid) {
      return naive_linformer_cross(p, x, memory, valid, options.n_heads);
    };
    pt::check_cross_attention_conformance(linformer(4, sharing), options);
  }
}

TEST_CASE("attention 'linformer' cross-attention with 3 heads, a longer memory and k = n") {
  pt::AttentionConformanceOptions options;
  options.d_model = 12;
  options.n_heads = 3;
  options.grad_d_model = 6;
  options.grad_n_heads = 3;
  options.cross_memory_len = 13;  // n = max(seq_len 12, 13) = 13
  options.cross_query_len = 2;
  options.cross_reference = [&](const Parameters& p, const Tensor& x, const Tensor& memory,
                                const std::vector<uint8_t>& valid) {
    return naive_linformer_cross(p, x, memory, valid, options.n_heads);
  };
  pt::check_cross_attention_conformance(linformer(5, "none"), options);
}

TEST_CASE("linformer cross-attention weighs keys by position; a memory longer than n is refused") {
  rt::AttentionHandle attn = linear_test::handle("linformer", [](rt::ComponentConfig& c) {
    c.set_int("k", 3);
    c.set_string("sharing", "headwise");
  });
  attn.init(linear_test::layer_context(8, 2, 6, /*causal=*/false, /*seed=*/9));
  eng::NoGradGuard no_grad;
  eng::Generator gen(3);
  const eng::Tensor memory = eng::uniform({1, 5, 8}, gen, -1.0, 1.0);
  const eng::Tensor x = eng::uniform({1, 2, 8}, gen, -1.0, 1.0);
  std::vector<eng::Tensor> rows;
  for (int64_t j = 4; j >= 0; --j) rows.push_back(memory.slice(1, j, j + 1));
  const eng::Tensor reversed = eng::concat(rows, 1);
  const std::vector<float> forward_order =
      attn.forward_cross(x, attn.cross_memory_create(memory, nullptr, false), false).to_vector();
  const std::vector<float> reverse_order =
      attn.forward_cross(x, attn.cross_memory_create(reversed, nullptr, false), false).to_vector();
  double moved = 0;
  for (size_t i = 0; i < forward_order.size(); ++i)
    moved = std::max(moved, static_cast<double>(std::fabs(forward_order[i] - reverse_order[i])));
  CHECK(moved > 1e-3);  // why the kit must not check key-order invariance for it
  CHECK((attn.capabilities() & PB_ATTENTION_CAP_CROSS_POSITIONAL) != 0);
  CHECK_THROWS_WITH_AS(attn.cross_memory_create(eng::zeros({1, 7, 8}), nullptr, false),
                       doctest::Contains("exceeds the projection length n = max_seq_len = 6"),
                       patchbay::Error);
}

namespace {

eng::Tensor ids(const std::vector<int32_t>& values, int64_t rows) {
  return eng::Tensor::from_data(values.data(), {rows, static_cast<int64_t>(values.size()) / rows},
                                eng::DType::kI32);
}

// A 2 + 2-block encoder-decoder (V 11, C 16, H 2) whose cross-attention is linformer k = 4;
// sources up to 10 tokens, targets up to 6: the projection length is max(6, 10) = 10.
std::unique_ptr<pm::EncoderDecoderModel> linformer_seq2seq() {
  pm::EncoderDecoderOptions e;
  e.base.vocab_size = 11;
  e.base.context_length = 6;
  e.base.n_heads = 2;
  e.base.d_model = 16;
  e.base.d_ff = 64;
  e.base.init_std = 0.2;
  e.base.seed = 7;
  e.base.norm = pm::NormKind::kRmsNorm;
  e.source_context_length = 10;
  e.relative_buckets = 8;
  e.relative_max_distance = 16;
  e.cross_attention = "linformer";
  pm::ComponentTables tables;
  tables.attention.insert("linformer", toml::table{{"k", 4}, {"sharing", "none"}});
  return pm::EncoderDecoderModel::build(e, tables, linear_test::registry());
}

// Two sequences of 6 source tokens, the second with its last two padded.
pm::Seq2SeqInputs sample_inputs() {
  pm::Seq2SeqInputs in;
  in.source = ids({3, 5, 7, 2, 9, 4, 6, 8, 1, 2, 0, 0}, 2);
  in.source_padding = ids({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, 2);
  in.target_inputs = ids({1, 4, 6, 10, 2, 1, 3, 3, 5, 7}, 2);
  return in;
}

}  // namespace

TEST_CASE(
    "an encoder-decoder with linformer cross-attention: padding, cached and greedy decoding") {
  auto model = linformer_seq2seq();
  std::map<std::string, eng::Tensor> named;
  for (const pm::NamedParameter& p : model->parameters()) named[p.name] = p.tensor;
  REQUIRE(named.count("decoder.blocks.0.cross_attn.proj_e") == 1);
  CHECK(named["decoder.blocks.0.cross_attn.proj_e"].shape() == eng::Shape{2, 4, 10});
  eng::NoGradGuard no_grad;
  const pm::Seq2SeqInputs in = sample_inputs();
  const std::vector<float> whole = model->forward(in, false).logits.to_vector();  // [2, 5, 11]

  // Padded source tokens change no logit (bit for bit); a real one changes its sequence's.
  pm::Seq2SeqInputs padded_changed = sample_inputs();
  padded_changed.source = ids({3, 5, 7, 2, 9, 4, 6, 8, 1, 2, 9, 5}, 2);
  CHECK(model->forward(padded_changed, false).logits.to_vector() == whole);
  pm::Seq2SeqInputs real_changed = sample_inputs();
  real_changed.source = ids({3, 5, 7, 2, 9, 4, 6, 8, 4, 2, 0, 0}, 2);
  const std::vector<float> moved = model->forward(real_changed, false).logits.to_vector();
  CHECK(std::equal(moved.begin(), moved.begin() + 55, whole.begin()));  // sequence 0 unchanged
  CHECK_FALSE(std::equal(moved.begin() + 55, moved.end(), whole.begin() + 55));

  // Prefill 2 positions, then one at a time, over the cross memory made once.
  pm::Seq2SeqDecodeState state = model->start_decoding(in.source, in.source_padding, 5);
  std::vector<float> stepped = model->decode_step(state, ids({1, 4, 1, 3}, 2)).to_vector();
  for (const std::vector<int32_t>& next : {std::vector<int32_t>{6, 3}, {10, 5}, {2, 7}}) {
    const std::vector<float> more = model->decode_step(state, ids(next, 2)).to_vector();
    stepped.insert(stepped.end(), more.begin(), more.end());
  }
  for (int64_t seq = 0; seq < 2; ++seq)
    for (int64_t pos = 0; pos < 5; ++pos)
      for (int64_t k = 0; k < 11; ++k) {
        const size_t at = pos < 2 ? static_cast<size_t>((seq * 2 + pos) * 11 + k)
                                  : static_cast<size_t>(44 + ((pos - 2) * 2 + seq) * 11 + k);
        INFO("sequence ", seq, " position ", pos, " logit ", k);
        CHECK(stepped[at] ==
              doctest::Approx(whole[static_cast<size_t>((seq * 5 + pos) * 11 + k)]).epsilon(1e-4));
      }

  // Greedy with the caches equals recomputing the whole decoder on each prefix.
  const std::vector<std::vector<int32_t>> cached =
      model->greedy_decode(in.source, in.source_padding, 1, -1, 5);
  const std::vector<std::vector<int32_t>> sources = {{3, 5, 7, 2, 9, 4}, {6, 8, 1, 2, 0, 0}};
  const std::vector<std::vector<int32_t>> masks = {{1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0}};
  for (size_t seq = 0; seq < 2; ++seq) {
    std::vector<int32_t> prefix = {1}, recomputed;
    for (int step = 0; step < 5; ++step) {
      const std::vector<float> logits =
          model
              ->forward({ids(sources[seq], 1), ids(masks[seq], 1), ids(prefix, 1), eng::Tensor()},
                        false)
              .logits.to_vector();
      const auto last = logits.end() - 11;
      const auto best = static_cast<int32_t>(std::max_element(last, logits.end()) - last);
      recomputed.push_back(best);
      prefix.push_back(best);
    }
    INFO("sequence ", seq);
    CHECK(cached[seq] == recomputed);
  }
}

TEST_CASE("an encoder-decoder refuses linformer cross-attention with k above the source context") {
  pm::EncoderDecoderOptions e;
  e.base.vocab_size = 11;
  e.base.context_length = 6;
  e.base.n_heads = 2;
  e.base.d_model = 16;
  e.base.d_ff = 64;
  e.base.norm = pm::NormKind::kRmsNorm;
  e.source_context_length = 10;
  e.cross_attention = "linformer";
  pm::ComponentTables tables;
  tables.attention.insert("linformer", toml::table{{"k", 11}});
  CHECK_THROWS_WITH_AS(pm::EncoderDecoderModel::build(e, tables, linear_test::registry()),
                       doctest::Contains("k = 11 exceeds the projection length n"),
                       patchbay::Error);
}
