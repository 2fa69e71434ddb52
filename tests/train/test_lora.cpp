// LoRA ([train.lora], core/train/lora.hpp) on a tiny model trained in the test: the adapted
// weight equals W0 + (alpha/rank)·B·A computed by plain loops; the adapters' gradients match
// central finite differences of the loss; training changes the adapters and nothing else (the
// k rows of a fused qkv between adapted q and v rows included); checkpoints hold the adapters
// only; `export --merge-lora`'s plain run gives the adapted model's logits; a resumed LoRA run
// is bit-identical to one that never stopped; bad settings are refused with what exists.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "common/error.hpp"
#include "config/config_loader.hpp"
#include "engine/autograd.hpp"
#include "engine/generator.hpp"
#include "engine/ops.hpp"
#include "train/checkpoint.hpp"
#include "train/lora_merge.hpp"
#include "train/trainer.hpp"
#include "train/training_data.hpp"
#include "train_fixture.hpp"

using namespace patchbay;
using train::testing::TinySetup;

namespace {

constexpr const char* kLoraTable =
    "[train.lora]\nrank = 4\nalpha = 8.0\ntargets = [\"attention.q\", \"attention.v\", "
    "\"mlp.down\"]\n";

bool same_bytes(const engine::Tensor& x, const engine::Tensor& y) {
  return x.nbytes() == y.nbytes() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

struct LoraFixture {
  TinySetup setup;
  patchbay::testing::TempDir folder;
  std::filesystem::path base;
  std::vector<std::string> model_overrides;  // the same for the base and the LoRA runs
  explicit LoraFixture(const std::string& name, std::vector<std::string> model = {})
      : folder(train::testing::fresh_folder(name)), model_overrides(std::move(model)) {
    train::testing::write_tiny_corpus(folder);
    base = folder / "base";
    std::vector<std::string> overrides = model_overrides;
    overrides.push_back("train.out_dir=\"" + base.string() + "\"");
    train::train_model(setup.config(train::testing::tiny_config_text(folder), overrides),
                       setup.registry, setup.lookup, train::testing::quiet_request());
  }
  config::ResolvedConfig lora_config(const std::filesystem::path& out,
                                     const std::string& table = kLoraTable) {
    std::vector<std::string> overrides = model_overrides;
    overrides.insert(overrides.end(), {"train.init_from=\"" + base.string() + "\"",
                                       "train.out_dir=\"" + out.string() + "\"", "train.lr=0.02"});
    return setup.config(train::testing::tiny_config_text(folder, table), overrides);
  }
  // The adapted model in memory, from the base's weights.
  train::TrainableModel adapted(const config::ResolvedConfig& c) {
    const train::InitialWeights initial = train::read_checkpoint_weights(base);
    return train::build_trainable_model(c, setup.registry, setup.lookup,
                                        initial.tensors.at("wte.weight").size(0), 0, 1, &initial);
  }
};

// The mean cross-entropy of the batch, summed in double from the f32 logits (so that central
// differences resolve gradients well below f32's resolution of the loss itself).
double batch_loss(train::TrainableModel& t, const train::Batch& batch) {
  engine::NoGradGuard no_grad;
  const engine::Tensor logits = t.model->forward(batch.inputs, false).logits;
  const std::vector<float> values = logits.to_vector();
  const std::vector<float> targets = batch.targets.to(engine::DType::kF32).to_vector();
  const int64_t vocab = logits.size(-1);
  double total = 0;
  for (size_t row = 0; row < targets.size(); ++row) {
    const float* z = values.data() + row * static_cast<size_t>(vocab);
    double peak = z[0], sum = 0;
    for (int64_t v = 1; v < vocab; ++v) peak = std::max(peak, static_cast<double>(z[v]));
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(z[v] - peak);
    total += peak + std::log(sum) - z[static_cast<int64_t>(targets[row])];
  }
  return total / static_cast<double>(targets.size());
}

// rows of W (row-major [n, k], merged) against W0 + s·B·A by plain loops in double.
double max_error_against_loops(const train::LoraAdapter& a, const engine::Tensor& w0_full,
                               double scale) {
  const std::vector<float> w = a.weight.to_vector(), w0 = w0_full.to_vector(), A = a.a.to_vector(),
                           B = a.b.to_vector();
  const int64_t k = a.weight.size(1), r = a.a.size(0);
  double worst = 0;
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = 0; j < k; ++j) {
      double delta = 0;
      for (int64_t q = 0; q < r; ++q) delta += static_cast<double>(B[i * r + q]) * A[q * k + j];
      const double expected = w0[(a.row_begin + i) * k + j] + scale * delta;
      worst = std::max(
          worst, std::abs(w[(a.row_begin + i) * k + j] - expected) / (1.0 + std::abs(expected)));
    }
  return worst;
}

// Runs the LoRA run `straight` again, stopped at step 3 and resumed: true when the stored
// tensors (adapters, optimizer state, layer state) and the last loss equal the straight run's.
bool second_run_matches(LoraFixture& f, const std::filesystem::path& straight,
                        const std::string& table, double last_loss) {
  const std::filesystem::path resumed = f.folder / "resumed";
  const config::ResolvedConfig resumed_config = f.lora_config(resumed, table);
  train::TrainRequest stop_at_3 = train::testing::quiet_request();
  stop_at_3.before_step = [](int64_t step, const std::vector<model::NamedParameter>&) {
    if (step == 3) throw std::runtime_error("interrupted");
  };
  CHECK_THROWS_WITH(train::train_model(resumed_config, f.setup.registry, f.setup.lookup, stop_at_3),
                    "interrupted");
  train::TrainRequest resume = train::testing::quiet_request();
  resume.resume = resumed;
  const train::TrainSummary second =
      train::train_model(resumed_config, f.setup.registry, f.setup.lookup, resume);
  CHECK(second.start_step == 3);
  bool same = second.last_loss == last_loss;
  const train::Checkpoint x = train::load_checkpoint(straight), y = train::load_checkpoint(resumed);
  REQUIRE(x.names() == y.names());
  for (const std::string& name : x.names()) {
    INFO("tensor " << name);
    CHECK(same_bytes(x.tensor(name), y.tensor(name)));
    same = same && same_bytes(x.tensor(name), y.tensor(name));
  }
  return same;
}

}  // namespace

TEST_CASE(
    "LoRA: training moves the adapters and nothing else; merging writes W0 + s·B·A into the "
    "weights") {
  LoraFixture f("lora_only_adapters");
  const config::ResolvedConfig c = f.lora_config(f.folder / "unused");
  train::TrainableModel t = f.adapted(c);
  REQUIRE(t.lora);
  CHECK(t.lora->scale() == 2.0);
  REQUIRE(t.lora->adapters().size() == 6);  // q, v, mlp.down in 2 blocks
  std::map<std::string, engine::Tensor> before;
  for (const model::NamedParameter& p : t.model->parameters()) before[p.name] = p.tensor.clone();
  // At the start B = 0: the adapted model is the base model, bit for bit.
  const train::InitialWeights base = train::read_checkpoint_weights(f.base);
  for (const auto& [name, tensor] : before) CHECK(same_bytes(tensor, base.tensors.at(name)));

  train::TrainOptions o = train::train_options_from_config(c);
  train::TrainingData data = train::prepare_training_data(c, f.setup.registry, f.setup.lookup);
  for (int64_t step = 0; step < 4; ++step)
    REQUIRE(train::train_step(t, o, step, [&](int64_t m) {
              return train::training_batch(data.train, 3, step, m, o.batch_size, o.seq_len);
            }).finite);
  // The engine applies the adapters: the model's weights themselves never change (frozen, no
  // gradient), and no parameter of the model has one.
  for (const model::NamedParameter& p : t.model->parameters()) {
    INFO("parameter " << p.name);
    CHECK(same_bytes(p.tensor, before[p.name]));
    CHECK_FALSE(p.tensor.requires_grad());
    CHECK_FALSE(p.tensor.grad().defined());
  }
  for (const train::LoraAdapter& a : t.lora->adapters()) {
    INFO("adapter " << a.name());
    CHECK(a.attached.uses() > 0);
    double b_norm = 0;
    for (float v : a.b.to_vector()) b_norm += std::abs(v);
    CHECK(b_norm > 0);
  }
  for (const auto& s : t.optimizer->state()) {
    INFO("optimizer state " << s.name);
    CHECK(s.name.find("lora/") != std::string::npos);
  }
  // Merged: the adapted rows are W0 + s·B·A, the rest (the k rows of qkv) untouched.
  t.lora->merge_into_weights();
  for (const train::LoraAdapter& a : t.lora->adapters()) {
    INFO("adapter " << a.name());
    CHECK_FALSE(a.attached.attached());
    CHECK(max_error_against_loops(a, before[a.parameter], t.lora->scale()) < 1e-6);
  }
  for (const model::NamedParameter& p : t.model->parameters()) {
    INFO("parameter " << p.name);
    const bool qkv = p.name.find("attn.qkv.weight") != std::string::npos;
    const bool down = p.name.find("ffn.proj.weight") != std::string::npos;
    if (qkv) {  // [96, 32]: rows [0, 32) q and [64, 96) v adapted; k rows [32, 64) untouched
      CHECK(same_bytes(p.tensor.narrow(0, 32, 32).contiguous(),
                       before[p.name].narrow(0, 32, 32).contiguous()));
      CHECK_FALSE(same_bytes(p.tensor.narrow(0, 0, 32).contiguous(),
                             before[p.name].narrow(0, 0, 32).contiguous()));
      CHECK_FALSE(same_bytes(p.tensor.narrow(0, 64, 32).contiguous(),
                             before[p.name].narrow(0, 64, 32).contiguous()));
    } else if (down) {
      CHECK_FALSE(same_bytes(p.tensor, before[p.name]));
    } else {
      CHECK(same_bytes(p.tensor, before[p.name]));
    }
  }
}

TEST_CASE("LoRA: the adapters' gradients equal central finite differences of the loss") {
  LoraFixture f("lora_gradcheck");
  const config::ResolvedConfig c = f.lora_config(f.folder / "unused");
  train::TrainableModel t = f.adapted(c);
  {  // B != 0, so that A's gradient is not zero
    engine::NoGradGuard no_grad;
    engine::Generator gen(5);
    for (const train::LoraAdapter& a : t.lora->adapters()) {
      engine::Tensor b = a.b;
      engine::copy_(b, engine::mul_scalar(engine::randn(b.shape(), gen), 0.3));
    }
  }
  train::TrainingData data = train::prepare_training_data(c, f.setup.registry, f.setup.lookup);
  const train::Batch batch = train::training_batch(data.train, 9, 0, 0, 4, 16);
  {
    const engine::Tensor logits = t.model->forward(batch.inputs, false).logits;
    engine::backward(
        engine::cross_entropy(logits.reshape({-1, logits.size(-1)}), batch.targets.reshape({-1})));
  }
  int checked = 0, large = 0;
  for (size_t which :
       {size_t{0}, size_t{1}, size_t{5}}) {  // q and v of block 0, mlp.down of block 1
    const train::LoraAdapter& adapter = t.lora->adapters()[which];
    for (engine::Tensor tensor : {adapter.a, adapter.b}) {
      const std::vector<float> grad = tensor.grad().to_vector();
      // the 3 largest entries of the gradient (their differences stand well above f32 noise)
      std::vector<size_t> order(grad.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::partial_sort(order.begin(), order.begin() + 3, order.end(),
                        [&](size_t x, size_t y) { return std::abs(grad[x]) > std::abs(grad[y]); });
      for (int n = 0; n < 3; ++n) {
        const size_t i = order[static_cast<size_t>(n)];
        const float eps = 1e-2f;
        float* value = tensor.data<float>() + i;
        const float saved = *value;
        *value = saved + eps;
        const double up = batch_loss(t, batch);
        *value = saved - eps;
        const double down = batch_loss(t, batch);
        *value = saved;
        const double numeric = (up - down) / (2.0 * eps);
        INFO(adapter.name() << (tensor.impl() == adapter.a.impl() ? "/A" : "/B") << "[" << i
                            << "]: analytic " << grad[i] << ", numeric " << numeric);
        CHECK(std::abs(numeric - grad[i]) <= 0.02 * std::abs(grad[i]) + 1e-5);
        ++checked;
        large += std::abs(grad[i]) > 1e-3 ? 1 : 0;
      }
    }
  }
  CHECK(checked == 18);
  CHECK(large >= 9);  // most of the checked entries are far above the tolerance's floor
}

TEST_CASE(
    "LoRA run: adapter-only checkpoints, merge-and-export gives the adapted logits, bit-exact "
    "resume") {
  LoraFixture f("lora_run");
  const std::filesystem::path tuned = f.folder / "tuned";
  const config::ResolvedConfig c = f.lora_config(tuned);
  const train::TrainSummary full =
      train::train_model(c, f.setup.registry, f.setup.lookup, train::testing::quiet_request());
  REQUIRE(full.steps_done == 6);
  const train::Checkpoint checkpoint = train::load_checkpoint(tuned);
  for (const std::string& name : checkpoint.names()) {
    INFO("stored " << name);
    CHECK(name.find("lora/") != std::string::npos);
  }
  CHECK(checkpoint.contains("lora/blocks.0.attn.qkv.weight/q/A"));
  CHECK(checkpoint.contains("lora/blocks.1.ffn.proj.weight/all/B"));
  CHECK_FALSE(checkpoint.contains("wte.weight"));

  // Merged into a plain run: its logits are the adapted model's.
  const std::filesystem::path merged = f.folder / "merged";
  const train::LoraMergeResult r =
      train::merge_lora_run(tuned, merged, f.setup.registry, f.setup.lookup);
  CHECK(r.adapters == 6);
  CHECK(r.step == 6);
  train::TrainableModel adapted = f.adapted(c);
  {
    std::vector<train::NamedTensor> adapters;
    for (const model::NamedParameter& p : adapted.parameters)
      adapters.push_back({p.name, p.tensor});
    checkpoint.load_into(adapters);
  }
  const train::Checkpoint plain_checkpoint = train::load_checkpoint(merged);
  config::ResolvedConfig plain_config =
      config::load_config_text(plain_checkpoint.config_text(), "merged config");
  train::validate_training_config(plain_config, f.setup.lookup);
  CHECK(plain_config.find("train.lora") == nullptr);
  train::TrainableModel plain =
      train::build_trainable_model(plain_config, f.setup.registry, f.setup.lookup,
                                   plain_checkpoint.tensor("wte.weight").size(0));
  CHECK_FALSE(plain.lora);
  {
    std::vector<train::NamedTensor> params;
    for (const model::NamedParameter& p : plain.parameters) params.push_back({p.name, p.tensor});
    plain_checkpoint.load_into(params);
  }
  train::TrainingData data = train::prepare_training_data(c, f.setup.registry, f.setup.lookup);
  const train::Batch batch = train::training_batch(data.val, 4, 0, 0, 4, 16);
  std::optional<engine::NoGradGuard> no_grad(std::in_place);
  const std::vector<float> a = adapted.model->forward(batch.inputs, false).logits.to_vector();
  const std::vector<float> b = plain.model->forward(batch.inputs, false).logits.to_vector();
  REQUIRE(a.size() == b.size());
  // The adapted model computes x·W0ᵀ + s·(x·Aᵀ)·Bᵀ, the merged one x·(W0 + s·B·A)ᵀ: equal up
  // to f32 rounding.
  double worst = 0, largest = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
    largest = std::max(largest, static_cast<double>(std::abs(a[i])));
  }
  MESSAGE("merged vs adapted logits: max |difference| " << worst << " (largest |logit| " << largest
                                                        << ")");
  CHECK(worst <= 1e-5 * std::max(1.0, largest));
  // ... and differ from the base model's: the adapters did something.
  train::TrainableModel base_model = f.adapted(c);
  const std::vector<float> base_logits =
      base_model.model->forward(batch.inputs, false).logits.to_vector();
  double moved = 0;
  for (size_t i = 0; i < a.size(); ++i)
    moved = std::max(moved, static_cast<double>(std::abs(a[i] - base_logits[i])));
  CHECK(moved > 1e-3);
  no_grad.reset();

  CHECK(second_run_matches(f, tuned, kLoraTable, full.last_loss));
}

TEST_CASE("a LoRA run of a Performer model resumes bit-exactly (its redraw state is stored)") {
  LoraFixture f("lora_performer", {"model.attention.kind=\"performer\"",
                                   "model.attention.performer.redraw_interval=2"});
  const std::string table = "[train.lora]\nrank = 2\ntargets = [\"mlp.*\"]\n";
  const std::filesystem::path tuned = f.folder / "tuned";
  const train::TrainSummary full = train::train_model(f.lora_config(tuned, table), f.setup.registry,
                                                      f.setup.lookup, train::testing::quiet_request());
  REQUIRE(full.steps_done == 6);
  bool layer_state = false;
  for (const std::string& name : train::load_checkpoint(tuned).names())
    layer_state = layer_state ||
                  (name.find("lora/") == std::string::npos && name.rfind("optimizer/", 0) != 0);
  CHECK(layer_state);  // the features / redraw count beside the adapters
  CHECK(second_run_matches(f, tuned, table, full.last_loss));
}

TEST_CASE("LoRA refusals: targets matching nothing, no base weights, a plain run to merge") {
  LoraFixture f("lora_refusals");
  try {
    f.adapted(f.lora_config(f.folder / "x", "[train.lora]\ntargets = [\"attention.x\"]\n"));
    FAIL("a target matching nothing was accepted");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK(message.find("'attention.x' matches no weight matrix") != std::string::npos);
    CHECK(message.find("blocks.0.attn.qkv.weight [96, 32]") != std::string::npos);
  }
  // dropout is taken (the engine applies it to the adapter's input; test below)
  CHECK(train::train_options_from_config(
            f.lora_config(f.folder / "x", "[train.lora]\ndropout = 0.1\n"))
            .lora.dropout == 0.1);
  CHECK_THROWS_WITH_AS(train::train_options_from_config(f.setup.config(
                           train::testing::tiny_config_text(f.folder, "[train.lora]\nrank = 2\n"))),
                       doctest::Contains("train.init_from is empty"), Error);
  CHECK_THROWS_WITH_AS(
      train::merge_lora_run(f.base, f.folder / "m", f.setup.registry, f.setup.lookup),
      doctest::Contains("has no LoRA adapters"), Error);
}

TEST_CASE("LoRA dropout: training differs from dropout 0, and a resumed run is bit-exact") {
  LoraFixture f("lora_dropout");
  const std::string table = std::string(kLoraTable) + "dropout = 0.3\n";
  const std::filesystem::path tuned = f.folder / "tuned";
  const train::TrainSummary with_dropout = train::train_model(
      f.lora_config(tuned, table), f.setup.registry, f.setup.lookup, train::testing::quiet_request());
  const train::TrainSummary without = train::train_model(
      f.lora_config(f.folder / "no_dropout"), f.setup.registry, f.setup.lookup, train::testing::quiet_request());
  REQUIRE(with_dropout.steps_done == 6);
  CHECK(with_dropout.last_loss != without.last_loss);  // the masks acted
  CHECK(train::load_checkpoint(tuned).meta(train::kMetaLora).find("\"dropout\":0.3") !=
        std::string::npos);
  CHECK(second_run_matches(f, tuned, table, with_dropout.last_loss));  // masks per micro-batch
}

TEST_CASE("LoRA on a weight a plugin reads in a form the engine cannot adapt is refused") {
  // Linformer multiplies its sequence projection E [k, n] from the left (E · K, in a batched
  // product over a column range): not y = x · Wᵀ. The engine refuses at the first product,
  // naming the adapter, the weight and the plugin.
  TinySetup setup;
  patchbay::testing::TempDir folder(train::testing::fresh_folder("lora_linformer"));
  train::testing::write_tiny_corpus(folder);
  const config::ResolvedConfig c = setup.config(
      train::testing::tiny_config_text(
          folder, "[train.lora]\nrank = 2\ntargets = [\"blocks.0.attn.proj_e\"]\n"),
      {"tokenizer.special_tokens=[\"<|endoftext|>\", \"<|mask|>\"]", "model.causal=false",
       "train.objective=\"mlm\"", "model.attention.kind=\"linformer\"", "model.attention.k=16",
       "model.attention.sharing=\"headwise\"",
       "train.init_from=\"" + (folder.path() / "unused").string() + "\""});
  train::TrainingData data = train::prepare_training_data(c, setup.registry, setup.lookup);
  train::TrainableModel t =
      train::build_trainable_model(c, setup.registry, setup.lookup, data.tokenizer.vocab_size());
  REQUIRE(t.lora);
  const train::TrainOptions o = train::train_options_from_config(c);
  std::string message;
  try {
    train::train_step(t, o, 0, [&](int64_t m) {
      return train::training_batch(data.train, o.seed, 0, m, o.batch_size, o.seq_len);
    });
  } catch (const std::exception& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("lora/blocks.0.attn.proj_e/all") != std::string::npos);
  CHECK(message.find("attention plugin 'linformer'") != std::string::npos);
  CHECK(message.find("left operand") != std::string::npos);
  CHECK(message.find("train.lora.targets") != std::string::npos);
}
