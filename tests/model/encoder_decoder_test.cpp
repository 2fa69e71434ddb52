// The encoder–decoder model (core/model/encoder_decoder.hpp): the relative-bias attention
// against a plain loop reference, gradients (the relative bias tables first) against finite
// differences, what each decoder position may depend on (earlier decoder inputs and every
// non-padded source token; never later decoder inputs nor padded source tokens), parameter
// names, the [model] keys of architecture = "encoder_decoder", refusals of bad input, and a
// tiny model that learns to reverse its source.
#include "model/encoder_decoder.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>

#include "config/config_loader.hpp"
#include "engine/ops.hpp"
#include "engine/ops_optimizer.hpp"
#include "model/relative_attention.hpp"
#include "model_fixture.hpp"

namespace eng = patchbay::engine;
namespace pm = patchbay::model;
namespace cfg = patchbay::config;

namespace {

eng::Tensor ids(const std::vector<int32_t>& values, int64_t rows) {
  return eng::Tensor::from_data(values.data(), {rows, static_cast<int64_t>(values.size()) / rows},
                                eng::DType::kI32);
}

pm::EncoderDecoderOptions tiny_seq2seq() {
  pm::EncoderDecoderOptions e;
  e.base = model_test::tiny_options();  // V 11, C 16, H 2, d_ff 64, init_std 0.2
  e.base.norm = pm::NormKind::kRmsNorm;
  e.base.context_length = 8;
  e.source_context_length = 8;
  e.encoder_layers = 2;
  e.decoder_layers = 2;
  e.relative_buckets = 8;
  e.relative_max_distance = 16;
  return e;
}

std::unique_ptr<pm::EncoderDecoderModel> build(const pm::EncoderDecoderOptions& e) {
  return pm::EncoderDecoderModel::build(e, {}, model_test::registry());
}

std::map<std::string, eng::Tensor> by_name(const pm::EncoderDecoderModel& model) {
  std::map<std::string, eng::Tensor> out;
  for (const pm::NamedParameter& p : model.parameters()) out[p.name] = p.tensor;
  return out;
}

// Two sequences; the second source has two padded positions at its end.
pm::Seq2SeqInputs sample_inputs() {
  pm::Seq2SeqInputs in;
  in.source = ids({3, 5, 7, 2, 9, 4, 6, 8, 1, 0, 0, 0}, 2);
  in.source_padding = ids({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, 2);
  in.target_inputs = ids({1, 4, 6, 10, 2, 1, 3, 3, 5, 7}, 2);
  return in;
}
const std::vector<int32_t> kSampleTargets = {4, 6, 10, 2, 8, 3, 3, 5, 7, 9};

double loss_of(pm::EncoderDecoderModel& model, const pm::Seq2SeqInputs& in) {
  const eng::Tensor logits = model.forward(in, false).logits;
  return eng::cross_entropy(eng::reshape(logits, {-1, model.options().base.vocab_size}),
                            eng::reshape(ids(kSampleTargets, 2), {-1}))
      .item();
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const patchbay::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("relative bias attention equals a plain loop reference with T5's buckets and masks") {
  const int64_t b = 2, t = 5, c = 8, h = 2, d = c / h;
  eng::Generator gen(3);
  pm::RelativeSelfAttention attn(c, h, 0.3, 0.3, gen, eng::cpu());
  pm::RelativePositionBias bias;
  bias.buckets = {false, 4, 8};  // causal buckets, as the decoder's
  bias.table = eng::mul_scalar(eng::randn({4, h}, gen), 0.5);
  const eng::Tensor x = eng::randn({b, t, c}, gen);
  const eng::Tensor padding = ids({1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, 2);
  const eng::Tensor blocked = pm::attention_blocked_mask(padding, b, t, t, true, 0);
  const std::vector<float> out = attn.forward(x, bias.bias(t, t), blocked).to_vector();

  std::map<std::string, std::vector<float>> w;
  for (auto& [name, tensor] : attn.parameters()) w[name] = tensor.to_vector();
  const std::vector<float> xs = x.to_vector(), table = bias.table.to_vector();
  auto project = [&](const std::vector<float>& m, int64_t row, int64_t out_col) {
    double s = 0;  // (x[row] · Wᵀ)[out_col]
    for (int64_t k = 0; k < c; ++k)
      s += xs[static_cast<size_t>(row * c + k)] * m[static_cast<size_t>(out_col * c + k)];
    return s;
  };
  const std::vector<float> pad = padding.to(eng::DType::kF32).to_vector();
  for (int64_t s = 0; s < b; ++s)
    for (int64_t i = 0; i < t; ++i) {
      std::vector<double> joined(static_cast<size_t>(c), 0.0);
      for (int64_t head = 0; head < h; ++head) {
        std::vector<double> p(static_cast<size_t>(t), 0.0);
        double top = -1e300;
        for (int64_t j = 0; j < t; ++j) {
          if (j > i || pad[static_cast<size_t>(s * t + j)] == 0) continue;
          double dot = 0;
          for (int64_t e = 0; e < d; ++e)
            dot += project(w["q.weight"], s * t + i, head * d + e) *
                   project(w["k.weight"], s * t + j, head * d + e);
          const int32_t bucket = patchbay::t5_relative_position_bucket(j - i, bias.buckets);
          p[static_cast<size_t>(j)] = dot / std::sqrt(static_cast<double>(d)) +
                                      table[static_cast<size_t>(bucket * h + head)];
          top = std::max(top, p[static_cast<size_t>(j)]);
        }
        double z = 0;
        for (int64_t j = 0; j < t; ++j) {
          const bool seen = j <= i && pad[static_cast<size_t>(s * t + j)] != 0;
          p[static_cast<size_t>(j)] = seen ? std::exp(p[static_cast<size_t>(j)] - top) : 0.0;
          z += p[static_cast<size_t>(j)];
        }
        for (int64_t e = 0; e < d; ++e)
          for (int64_t j = 0; j < t; ++j)
            joined[static_cast<size_t>(head * d + e)] +=
                p[static_cast<size_t>(j)] / z * project(w["v.weight"], s * t + j, head * d + e);
      }
      for (int64_t o = 0; o < c; ++o) {
        double y = 0;
        for (int64_t k = 0; k < c; ++k)
          y += joined[static_cast<size_t>(k)] * w["o.weight"][static_cast<size_t>(o * c + k)];
        INFO("sequence ", s, " query ", i, " channel ", o);
        CHECK(out[static_cast<size_t>((s * t + i) * c + o)] ==
              doctest::Approx(y).epsilon(1e-4).scale(1.0));
      }
    }
}

TEST_CASE("encoder-decoder gradients match finite differences (relative bias tables first)") {
  auto model = build(tiny_seq2seq());
  const pm::Seq2SeqInputs in = sample_inputs();
  const eng::Tensor logits = model->forward(in, false).logits;
  eng::backward(eng::cross_entropy(eng::reshape(logits, {-1, 11}),
                                   eng::reshape(ids(kSampleTargets, 2), {-1})));
  std::map<std::string, eng::Tensor> params = by_name(*model);
  const double eps = 1e-2;
  eng::NoGradGuard no_grad;
  for (const std::string name :
       {"encoder.relative_bias.weight", "decoder.relative_bias.weight", "shared.weight",
        "encoder.blocks.0.attn.q.weight", "encoder.blocks.1.ffn.fc.weight",
        "decoder.blocks.0.self_attn.k.weight", "decoder.blocks.1.cross_attn.qkv.weight",
        "decoder.blocks.0.norm_cross.gain", "encoder.norm_f.gain", "decoder.norm_f.gain"}) {
    INFO("parameter ", name);
    REQUIRE(params.count(name) == 1);
    eng::Tensor param = params[name];
    REQUIRE(param.grad().defined());
    const std::vector<float> grad = param.grad().to_vector();
    float* data = param.data<float>();
    const int64_t n = param.numel();
    for (int64_t index : {int64_t{0}, n / 2 + 1, n - 1}) {
      INFO("entry ", index);
      const float saved = data[index];
      data[index] = static_cast<float>(saved + eps);
      const double up = loss_of(*model, in);
      data[index] = static_cast<float>(saved - eps);
      const double down = loss_of(*model, in);
      data[index] = saved;
      const double numeric = (up - down) / (2 * eps);
      const double analytic = grad[static_cast<size_t>(index)];
      CHECK(std::abs(numeric - analytic) <= 1e-4 + 1e-2 * std::abs(analytic));
    }
  }
  // Every entry of the decoder's table that the 5 x 5 causal buckets use has a gradient.
  const std::vector<float> decoder_grad = params["decoder.relative_bias.weight"].grad().to_vector();
  CHECK(std::any_of(decoder_grad.begin(), decoder_grad.end(), [](float g) { return g != 0; }));
}

TEST_CASE("decoder position t sees decoder inputs up to t and every non-padded source token") {
  auto model = build(tiny_seq2seq());
  eng::NoGradGuard no_grad;
  const pm::Seq2SeqInputs in = sample_inputs();
  const std::vector<float> base = model->forward(in, false).logits.to_vector();
  const int64_t t = 5, v = 11;
  auto logits_with = [&](const pm::Seq2SeqInputs& changed) {
    return model->forward(changed, false).logits.to_vector();
  };
  auto row_equal = [&](const std::vector<float>& other, int64_t seq, int64_t pos) {
    for (int64_t k = 0; k < v; ++k)
      if (other[static_cast<size_t>((seq * t + pos) * v + k)] !=
          base[static_cast<size_t>((seq * t + pos) * v + k)])
        return false;
    return true;
  };
  // A later decoder input changes no earlier position (bit for bit), and does change its own.
  for (int64_t changed = 1; changed < t; ++changed) {
    pm::Seq2SeqInputs other = sample_inputs();
    std::vector<int32_t> target(10);
    const std::vector<float> raw = other.target_inputs.to(eng::DType::kF32).to_vector();
    for (size_t i = 0; i < raw.size(); ++i) target[i] = static_cast<int32_t>(raw[i]);
    target[static_cast<size_t>(changed)] = (target[static_cast<size_t>(changed)] + 5) % 11;
    other.target_inputs = ids(target, 2);
    const std::vector<float> out = logits_with(other);
    INFO("decoder input ", changed);
    for (int64_t pos = 0; pos < changed; ++pos) CHECK(row_equal(out, 0, pos));
    CHECK_FALSE(row_equal(out, 0, changed));
    for (int64_t pos = 0; pos < t; ++pos) CHECK(row_equal(out, 1, pos));  // other sequence
  }
  // Every non-padded source token reaches every decoder position; padded ones reach none.
  const std::vector<int32_t> source = {3, 5, 7, 2, 9, 4, 6, 8, 1, 0, 0, 0};
  for (size_t k = 0; k < source.size(); ++k) {
    std::vector<int32_t> changed = source;
    changed[k] = (changed[k] + 3) % 11;
    pm::Seq2SeqInputs other = sample_inputs();
    other.source = ids(changed, 2);
    const std::vector<float> out = logits_with(other);
    const int64_t seq = static_cast<int64_t>(k) / 6, pos_in_source = static_cast<int64_t>(k) % 6;
    const bool padded = seq == 1 && pos_in_source >= 4;
    INFO("source position ", k, padded ? " (padded)" : "");
    for (int64_t pos = 0; pos < t; ++pos) {
      if (padded)
        CHECK(row_equal(out, seq, pos));
      else
        CHECK_FALSE(row_equal(out, seq, pos));
      CHECK(row_equal(out, 1 - seq, pos));
    }
  }
}

TEST_CASE("encoder-decoder parameters: names, order, shared or separate embeddings, untied head") {
  auto shared = build(tiny_seq2seq());
  std::vector<std::string> names;
  for (const pm::NamedParameter& p : shared->parameters()) names.push_back(p.name);
  REQUIRE(names.size() > 6);
  CHECK(names[0] == "shared.weight");
  CHECK(names[1] == "encoder.relative_bias.weight");
  CHECK(names[2] == "encoder.blocks.0.norm1.gain");  // RMS norm: no bias
  CHECK(names[3] == "encoder.blocks.0.attn.q.weight");
  CHECK(std::find(names.begin(), names.end(), "decoder.relative_bias.weight") != names.end());
  CHECK(std::find(names.begin(), names.end(), "decoder.blocks.1.cross_attn.qkv.weight") !=
        names.end());
  CHECK(names.back() == "decoder.norm_f.gain");
  CHECK(std::none_of(names.begin(), names.end(), [](const std::string& n) {
    return n.find(".bias") != std::string::npos && n.find("relative_bias") == std::string::npos &&
           n.find(".ffn.") == std::string::npos && n.find("cross_attn") == std::string::npos;
  }));
  CHECK(by_name(*shared)["encoder.relative_bias.weight"].shape() == eng::Shape{8, 2});

  pm::EncoderDecoderOptions e = tiny_seq2seq();
  e.shared_embeddings = false;
  e.base.tie_embeddings = false;
  e.relative_bias = false;
  auto separate = build(e);
  std::map<std::string, eng::Tensor> params = by_name(*separate);
  CHECK(params.count("encoder.embed.weight") == 1);
  CHECK(params.count("decoder.embed.weight") == 1);
  CHECK(params.count("head.weight") == 1);
  CHECK(params.count("encoder.relative_bias.weight") == 0);
  CHECK(separate->parameter_count() == shared->parameter_count() + 2 * 11 * 16 - 2 * 8 * 2);
  eng::NoGradGuard no_grad;
  CHECK(separate->forward(sample_inputs(), false).logits.shape() == eng::Shape{2, 5, 11});
}

TEST_CASE("encoder-decoder refusals name the cause") {
  pm::EncoderDecoderOptions e = tiny_seq2seq();
  e.cross_attention = "bidirectional_test";
  const std::string cross = error_of([&] { build(e); });
  CHECK(cross.find("model.cross_attention = \"bidirectional_test\"") != std::string::npos);
  CHECK(cross.find("PB_ATTENTION_CAP_CROSS") != std::string::npos);

  e = tiny_seq2seq();
  e.decoder_feedforward = {"expert_choice_test"};
  CHECK(error_of([&] { build(e); }).find("cannot be used in the decoder") != std::string::npos);
  e.decoder_feedforward = {};
  e.encoder_feedforward = {"expert_choice_test"};  // position mixing is fine in the encoder
  CHECK(error_of([&] { build(e); }) == "(no error)");

  auto model = build(tiny_seq2seq());
  eng::NoGradGuard no_grad;
  pm::Seq2SeqInputs missing = sample_inputs();
  missing.source = eng::Tensor();
  CHECK(error_of([&] { model->forward(missing, false); }).find("no source given") !=
        std::string::npos);
  pm::Seq2SeqInputs too_long = sample_inputs();
  too_long.source = ids(std::vector<int32_t>(18, 3), 2);
  too_long.source_padding = eng::Tensor();
  CHECK(error_of([&] {
          model->forward(too_long, false);
        }).find("exceeds the model's 8 (model.source_context_length)") != std::string::npos);
  pm::Seq2SeqInputs bad_mask = sample_inputs();
  bad_mask.source_padding = ids({1, 1, 1, 1}, 2);
  CHECK(error_of([&] { model->forward(bad_mask, false); }).find("padding mask") !=
        std::string::npos);
  pm::Seq2SeqInputs rows = sample_inputs();
  rows.target_inputs = ids({1, 2, 3}, 1);
  CHECK(error_of([&] { model->forward(rows, false); }).find("different numbers of sequences") !=
        std::string::npos);
  const eng::Tensor narrow_memory = eng::zeros({2, 6, 8});  // another width than d_model 16
  CHECK(error_of([&] {
          model->decode(narrow_memory, eng::Tensor(), sample_inputs().target_inputs, eng::Tensor(),
                        false);
        }).find("does not match decoder inputs") != std::string::npos);
}

TEST_CASE("[model] architecture = \"encoder_decoder\" reads its keys and single-stack refuses it") {
  const cfg::ResolvedConfig config = cfg::load_config_text(R"(
[model]
architecture = "encoder_decoder"
encoder_layers = 3
decoder_layers = 1
n_layers = 2
d_model = 32
n_heads = 4
norm = "rmsnorm"
positional = "t5_relative"
context_length = 16
source_context_length = 24
shared_embeddings = false
relative_attention_num_buckets = 16
cross_attention = "dense"
decoder_feedforward = ["mlp"]
)",
                                                           "ed.toml");
  const pm::EncoderDecoderOptions e = pm::encoder_decoder_options_from_config(config, 50);
  CHECK(e.encoder_layers == 3);
  CHECK(e.decoder_layers == 1);
  CHECK(e.source_context_length == 24);
  CHECK(e.base.context_length == 16);
  CHECK_FALSE(e.shared_embeddings);
  CHECK(e.relative_bias);
  CHECK(e.relative_buckets == 16);
  CHECK(e.relative_max_distance == 128);
  CHECK(e.decoder_feedforward == std::vector<std::string>{"mlp"});
  CHECK(e.encoder_feedforward.empty());
  CHECK(pm::model_architecture(config) == "encoder_decoder");
  CHECK(error_of([&] {
          pm::model_options_from_config(config, 50);
        }).find("this command builds a single-stack model") != std::string::npos);

  const cfg::ResolvedConfig learned = cfg::load_config_text(
      "[model]\narchitecture = \"encoder_decoder\"\npositional = \"learned\"\n", "ed2.toml");
  CHECK(error_of([&] {
          pm::encoder_decoder_options_from_config(learned, 50);
        }).find("model.positional") != std::string::npos);
  const cfg::ResolvedConfig single =
      cfg::load_config_text("[model]\npositional = \"t5_relative\"\n", "single.toml");
  CHECK(error_of([&] {
          pm::model_options_from_config(single, 50);
        }).find("architecture = \"encoder_decoder\" only") != std::string::npos);
}

TEST_CASE("decoding with caches equals the whole forward; greedy equals no-cache recomputation") {
  auto model = build(tiny_seq2seq());
  eng::NoGradGuard no_grad;
  const pm::Seq2SeqInputs in = sample_inputs();
  const std::vector<float> whole = model->forward(in, false).logits.to_vector();  // [2, 5, 11]
  // Prefill 2 positions, then one at a time: every logit as the whole forward's.
  pm::Seq2SeqDecodeState state = model->start_decoding(in.source, in.source_padding, 5);
  std::vector<float> stepped = model->decode_step(state, ids({1, 4, 1, 3}, 2)).to_vector();
  for (const std::vector<int32_t>& next : {std::vector<int32_t>{6, 3}, {10, 5}, {2, 7}}) {
    const std::vector<float> more = model->decode_step(state, ids(next, 2)).to_vector();
    stepped.insert(stepped.end(), more.begin(), more.end());
  }
  CHECK(state.length() == 5);
  // stepped holds [2,2,V], then [2,1,V] x 3: compare position by position.
  auto stepped_at = [&](int64_t seq, int64_t pos) {
    const size_t offset = pos < 2 ? static_cast<size_t>((seq * 2 + pos) * 11)
                                  : static_cast<size_t>(44 + ((pos - 2) * 2 + seq) * 11);
    return std::vector<float>(stepped.begin() + static_cast<long>(offset),
                              stepped.begin() + static_cast<long>(offset) + 11);
  };
  for (int64_t seq = 0; seq < 2; ++seq)
    for (int64_t pos = 0; pos < 5; ++pos) {
      const std::vector<float> got = stepped_at(seq, pos);
      for (int64_t k = 0; k < 11; ++k) {
        INFO("sequence ", seq, " position ", pos, " logit ", k);
        CHECK(got[static_cast<size_t>(k)] ==
              doctest::Approx(whole[static_cast<size_t>((seq * 5 + pos) * 11 + k)]).epsilon(1e-4));
      }
    }
  CHECK(error_of([&] {
          model->decode_step(state, ids({1, 1}, 2));
        }).find("capacity") != std::string::npos);

  // Greedy: the cached decode against recomputing the whole decoder on each prefix.
  const std::vector<std::vector<int32_t>> cached =
      model->greedy_decode(in.source, in.source_padding, 1, -1, 6);
  for (int64_t seq = 0; seq < 2; ++seq) {
    std::vector<int32_t> prefix = {1};
    std::vector<int32_t> recomputed;
    const std::vector<float> src = in.source.to(eng::DType::kF32).to_vector();
    const std::vector<float> pad = in.source_padding.to(eng::DType::kF32).to_vector();
    std::vector<int32_t> one_source, one_pad;
    for (int64_t j = 0; j < 6; ++j) {
      one_source.push_back(static_cast<int32_t>(src[static_cast<size_t>(seq * 6 + j)]));
      one_pad.push_back(static_cast<int32_t>(pad[static_cast<size_t>(seq * 6 + j)]));
    }
    for (int step = 0; step < 6; ++step) {
      const std::vector<float> logits =
          model
              ->forward({ids(one_source, 1), ids(one_pad, 1), ids(prefix, 1), eng::Tensor()}, false)
              .logits.to_vector();
      const auto last = logits.end() - 11;
      const int32_t best = static_cast<int32_t>(std::max_element(last, logits.end()) - last);
      recomputed.push_back(best);
      prefix.push_back(best);
    }
    INFO("sequence ", seq);
    CHECK(cached[static_cast<size_t>(seq)] == recomputed);
  }
}
