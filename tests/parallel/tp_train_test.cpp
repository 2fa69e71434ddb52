// Tensor parallelism (Megatron) on 2 ranks against one process (ctest runs this under
// mpirun -np 2):
//   - the conjugate pair f / g (ops table version 9) on known answers;
//   - a model split over 2 ranks (attention_dense heads, ffn_mlp hidden units; gelu, relu and
//     swiglu; learned, rotary and ALiBi positions) starts equal to the one-process model
//     (gathered slices bitwise equal), gives the same logits, the same gradient for every
//     parameter (the slices' gradients gathered) and the same decoding logits;
//   - 5 AdamW steps (clipping, dropout in the model and both layers, 2 micro-batches, swiglu)
//     with [parallelism] kind = "mpi_tensor" through the trainer end where one
//     process ends, the 2-rank checkpoint (full tensors) resumes on 1 rank to the same end and
//     on 2 ranks bit-identically, and a one-process checkpoint resumes on 2 ranks;
//   - refusals: a layer without the TENSOR_PARALLEL capability, heads or d_ff that do not split.
// Tolerances: the split changes only the order of sums — each rank's row-parallel GEMM sums
// half of the K dim and the all-reduce adds the halves, where one process sums K in one GEMM;
// the gradients of x sum the ranks' partial products the same way. That is f32 rounding
// (relative 1e-7 per sum), grown through a 2-layer model to about 1e-6: logits and gradients
// are checked to 1e-5 relative to their largest magnitude. AdamW divides by sqrt(v), so after
// 5 steps parameters agree to about 1e-6 absolute; 1e-4 is far below one update (lr 0.01) and
// fails for any real mistake (a missing all-reduce halves a projection, a wrong slice
// scrambles heads).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../train/train_fixture.hpp"
#include "mpi_test_fixture.hpp"
#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "engine/tensor_parallel.hpp"
#include "model/language_model.hpp"
#include "parallel/parallel_run.hpp"
#include "parallel/tensor_parallel.hpp"
#include "run/metrics_log.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"

namespace fs = std::filesystem;
namespace tt = patchbay::train::testing;
namespace eng = patchbay::engine;
namespace model = patchbay::model;
using patchbay::parallel::ParallelRun;
namespace pt = patchbay::parallel::testing;
using pt::quiet;
using pt::setup;

namespace {


const std::string kTensorParallel = "[parallelism]\nkind = \"mpi_tensor\"\n";

ParallelRun& world() { return pt::world(kTensorParallel); }

fs::path shared_folder(std::optional<patchbay::testing::TempDir>& owned, const std::string& name) {
  return pt::shared_folder(world(), owned, name);
}

// max |a - b| / max(max |b|, tiny): the error relative to the reference's scale.
double relative_difference(const eng::Tensor& a, const eng::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<float> x = a.contiguous().to_vector(), y = b.contiguous().to_vector();
  double worst = 0, scale = 1e-30;
  for (size_t i = 0; i < x.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(x[i] - y[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(y[i])));
  }
  return worst / scale;
}

model::ModelOptions small_options(const std::string& positional) {
  model::ModelOptions o;
  o.vocab_size = 13;
  o.context_length = 16;
  o.n_layers = 2;
  o.n_heads = 4;
  o.d_model = 32;
  o.d_ff = 64;
  o.init_std = 0.2;  // larger than GPT-2's so that every path shapes the logits
  o.seed = 11;
  if (positional == "rotary") o.positional = model::PositionalKind::kRotary;
  if (positional == "alibi") o.positional = model::PositionalKind::kAlibi;
  return o;
}

model::ComponentTables tables_with_activation(const std::string& activation) {
  model::ComponentTables t;
  t.feedforward.insert("activation", activation);
  return t;
}

std::unique_ptr<model::LanguageModel> build(model::ModelOptions o, const model::ComponentTables& t,
                                            int64_t tp_rank, int64_t tp_size) {
  o.tp_rank = tp_rank;
  o.tp_size = tp_size;
  return model::LanguageModel::build(o, t, setup().registry);
}

std::unique_ptr<patchbay::parallel::TensorParallel> group_for(const model::LanguageModel& m) {
  std::map<std::string, patchbay::parallel::ShardLayout> layouts;
  for (const auto& [name, p] : m.tensor_parallel_partitions()) layouts[name] = {p.dim, p.stride};
  return std::make_unique<patchbay::parallel::TensorParallel>(world().group(), layouts);
}

eng::Tensor tokens(int64_t batch, int64_t length) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < batch * length; ++i) ids.push_back((i * 7 + 3) % 13);
  return eng::Tensor::from_data(ids.data(), {batch, length}, eng::DType::kI64);
}

std::vector<double> losses(const fs::path& metrics) {
  std::vector<double> out;
  for (const nlohmann::json& r : patchbay::run::read_metrics(metrics))
    if (r.contains("loss")) out.push_back(r["loss"].get<double>());
  return out;
}

double max_abs_difference(const patchbay::train::Checkpoint& a,
                          const patchbay::train::Checkpoint& b, bool bitwise_required = false) {
  double worst = 0;
  REQUIRE(a.names() == b.names());  // parameters AND optimizer state, under full names
  for (const std::string& name : a.names()) {
    const eng::Tensor x = a.tensor(name), y = b.tensor(name);
    REQUIRE_MESSAGE(x.shape() == y.shape(), name);
    const std::vector<float> u = x.to(eng::DType::kF32).to_vector(),
                             v = y.to(eng::DType::kF32).to_vector();
    for (size_t i = 0; i < u.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(u[i] - v[i])));
      if (bitwise_required && u[i] != v[i]) FAIL_CHECK(name, " differs at ", i);
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("f (tp_copy_to_region) and g (tp_reduce_from_region): known answers on 2 ranks") {
  REQUIRE(world().world_size() == 2);
  const double r = static_cast<double>(world().rank());
  {
    patchbay::parallel::TensorParallel group(world().group(), {});
    REQUIRE(eng::tensor_parallel_installed());
    // g: forward sums x over ranks (1 + 2 = 3 everywhere), backward is the identity.
    eng::Tensor x = eng::full({3}, r + 1.0).set_requires_grad(true);
    const eng::Tensor summed = eng::tp_reduce_from_region(x);
    CHECK(summed.to_vector() == std::vector<float>(3, 3.0f));
    eng::backward(eng::sum(summed) * (r + 5.0));
    CHECK(x.grad().to_vector() == std::vector<float>(3, static_cast<float>(r + 5.0)));
    // f: forward is x itself, backward sums the ranks' gradients ((0+5) + (1+5) = 11).
    eng::Tensor y = eng::full({2, 2}, r).set_requires_grad(true);
    const eng::Tensor copied = eng::tp_copy_to_region(y);
    CHECK(copied.to_vector() == std::vector<float>(4, static_cast<float>(r)));
    eng::backward(eng::sum(copied) * (r + 5.0));
    CHECK(y.grad().to_vector() == std::vector<float>(4, 11.0f));
  }
  // Without a group both are the identity.
  CHECK(!eng::tensor_parallel_installed());
  eng::Tensor z = eng::full({2}, r + 1.0);
  CHECK(eng::tp_reduce_from_region(z).to_vector() ==
        std::vector<float>(2, static_cast<float>(r + 1.0)));
}

TEST_CASE("a model split over 2 ranks equals one process: init, logits, every gradient, decoding") {
  struct Variant {
    std::string activation, positional;
  };
  for (const Variant& v : {Variant{"gelu", "learned"}, Variant{"swiglu", "alibi"},
                           Variant{"relu", "rotary"}, Variant{"gelu_erf", "learned"}}) {
    CAPTURE(v.activation);
    CAPTURE(v.positional);
    const model::ModelOptions o = small_options(v.positional);
    const model::ComponentTables t = tables_with_activation(v.activation);
    std::unique_ptr<model::LanguageModel> single = build(o, t, 0, 1);  // no collectives inside
    std::unique_ptr<model::LanguageModel> split = build(o, t, world().rank(), 2);
    const auto group = group_for(*split);
    CHECK(split->tensor_parallel_partitions().size() ==
          2u * (3u + (v.activation == "swiglu" ? 5u : 3u)));

    // Init: the gathered slices are the one-process tensors, bit for bit.
    const std::vector<model::NamedParameter> a = split->parameters(), b = single->parameters();
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      REQUIRE(a[i].name == b[i].name);
      CHECK_MESSAGE(group->gather(a[i].name, a[i].tensor).to_vector() == b[i].tensor.to_vector(),
                    a[i].name);
    }

    // Forward and backward on the same batch.
    const eng::Tensor ids = tokens(2, 12), targets = tokens(2, 13).narrow(1, 1, 12);
    auto loss_of = [&](model::LanguageModel& m) {
      const eng::Tensor logits = m.forward(ids, true).logits;
      eng::backward(
          eng::cross_entropy(logits.reshape({-1, 13}), targets.contiguous().reshape({-1})));
      return logits.detach();
    };
    const eng::Tensor logits_split = loss_of(*split), logits_single = loss_of(*single);
    CHECK(relative_difference(logits_split, logits_single) < 1e-5);
    double worst_gradient = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const double d =
          relative_difference(group->gather(a[i].name, a[i].tensor.grad()), b[i].tensor.grad());
      CHECK_MESSAGE(d < 1e-5, a[i].name, " gradient differs by ", d);
      worst_gradient = std::max(worst_gradient, d);
    }
    // Replicated parameters (embeddings, norms, head, row-parallel biases): the same gradient,
    // bit for bit, on every rank, so the trainer need not all-reduce them.
    for (size_t i = 0; i < a.size(); ++i) {
      if (split->tensor_parallel_partitions().count(a[i].name) != 0) continue;
      const eng::Tensor g = a[i].tensor.grad().contiguous();
      const std::vector<float> both =
          world().group().all_gather(g.reshape({1, g.numel()})).to_vector();
      const size_t n = static_cast<size_t>(g.numel());
      CHECK_MESSAGE(std::equal(both.begin(), both.begin() + static_cast<std::ptrdiff_t>(n),
                               both.begin() + static_cast<std::ptrdiff_t>(n)),
                    a[i].name, ": replicated gradient differs between the ranks");
    }
    MESSAGE(v.activation, "/", v.positional, ": logits ",
            relative_difference(logits_split, logits_single), ", worst gradient ", worst_gradient,
            " (relative to its largest element)");

    // Decoding: prefill 5 tokens, then 3 single steps, every rank with its heads' KV cache.
    eng::NoGradGuard no_grad;
    model::DecodeState state_split = split->start_decoding(2, 16),
                       state_single = single->start_decoding(2, 16);
    CHECK(relative_difference(split->decode_step(state_split, ids.narrow(1, 0, 5)),
                              single->decode_step(state_single, ids.narrow(1, 0, 5))) < 1e-5);
    for (int64_t s = 5; s < 8; ++s)
      CHECK(relative_difference(split->decode_step(state_split, ids.narrow(1, s, 1)),
                                single->decode_step(state_single, ids.narrow(1, s, 1))) < 1e-5);
  }
}

TEST_CASE("refusals: a layer that cannot split, heads or d_ff that do not divide by the ranks") {
  const model::ComponentTables plain;
  model::ModelOptions o = small_options("learned");
  o.attention_kinds = {"dense", "linear"};
  try {
    build(o, plain, world().rank(), 2);
    FAIL("no error");
  } catch (const patchbay::Error& e) {
    const std::string m = e.what();
    CHECK(m.find("block 1 attention 'linear'") != std::string::npos);
    CHECK(m.find("cannot be split over tensor-parallel ranks") != std::string::npos);
  }
  o = small_options("learned");
  o.feedforward_kinds = {"moe"};
  try {
    build(o, plain, world().rank(), 2);
    FAIL("no error");
  } catch (const patchbay::Error& e) {
    CHECK(std::string(e.what()).find("feed-forward 'moe'") != std::string::npos);
    CHECK(std::string(e.what()).find("does not declare the TENSOR_PARALLEL capability") !=
          std::string::npos);
  }
  o = small_options("learned");
  o.n_heads = 1;
  try {
    build(o, plain, world().rank(), 2);
    FAIL("no error");
  } catch (const patchbay::Error& e) {
    CHECK(std::string(e.what()).find("n_heads 1 is not divisible by the 2 ranks") !=
          std::string::npos);
  }
  o = small_options("learned");
  o.d_ff = 63;
  try {
    build(o, plain, world().rank(), 2);
    FAIL("no error");
  } catch (const patchbay::Error& e) {
    CHECK(std::string(e.what()).find("d_ff 63 is not divisible by the 2 ranks") !=
          std::string::npos);
  }
}

TEST_CASE("5 training steps on 2 ranks equal one process; checkpoints resume across world sizes") {
  std::optional<patchbay::testing::TempDir> owned;
  const fs::path folder = shared_folder(owned, "tp");
  if (world().writer()) tt::write_tiny_corpus(folder);
  world().barrier();
  // Clipping on (a global norm over the slices), weight decay, swiglu, dropout in the model and
  // in both layers (the same masks on every rank; replayed on resume), 2 micro-batches.
  const std::string extra =
      "[model.feedforward]\nactivation = \"swiglu\"\ndropout = 0.1\n"
      "[model.attention]\ndropout = 0.1\n";
  const std::vector<std::string> steps = {"train.max_steps=5", "train.grad_clip=0.5",
                                          "model.dropout=0.1", "train.grad_accum_steps=2"};
  auto run = [&](const std::string& name, bool split, const fs::path& resume = {}) {
    std::vector<std::string> overrides = steps;
    overrides.push_back("train.out_dir=\"" + (folder / name).string() + "\"");
    const auto config = setup().config(
        tt::tiny_config_text(folder, extra) + (split ? kTensorParallel : ""), overrides);
    patchbay::train::TrainRequest request = quiet();
    request.resume = resume;
    return patchbay::train::train_model(config, setup().registry, setup().lookup, request);
  };
  const patchbay::train::TrainSummary tp = run("tp", true);
  CHECK(tp.steps_done == 5);
  // Resume the 2-rank step-3 checkpoint on 2 ranks: bit-identical to not stopping.
  run("tp_resumed", true, folder / "tp" / "checkpoints" / "step_3.safetensors");
  world().barrier();
  if (world().writer()) {
    const patchbay::train::TrainSummary single = run("single", false);
    const auto tp_end = patchbay::train::load_checkpoint(folder / "tp");
    const auto single_end = patchbay::train::load_checkpoint(folder / "single");
    CHECK(tp_end.step() == 5);
    const double diff = max_abs_difference(tp_end, single_end);
    MESSAGE("max |tensor_tp - tensor_single| (parameters and AdamW state) after 5 steps: ", diff);
    CHECK(diff < 1e-4);
    const std::vector<double> a = losses(folder / "tp" / "metrics.jsonl"),
                              b = losses(folder / "single" / "metrics.jsonl");
    REQUIRE(a.size() == 5);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      MESSAGE("step ", i + 1, ": loss tp ", a[i], ", single ", b[i]);
      CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-5));
    }
    // The summary (and model_size.json) count the full model, not one rank's slices.
    CHECK(tp.parameter_count == single.parameter_count);
    CHECK(max_abs_difference(patchbay::train::load_checkpoint(folder / "tp_resumed"), tp_end,
                             true) == 0.0);
    // The 2-rank checkpoint (full tensors) resumed in one process.
    const patchbay::train::TrainSummary resumed =
        run("resumed_on_1", false, folder / "tp" / "checkpoints" / "step_3.safetensors");
    CHECK(resumed.start_step == 3);
    CHECK(max_abs_difference(patchbay::train::load_checkpoint(folder / "resumed_on_1"), tp_end) <
          1e-4);
  }
  world().barrier();
  // A one-process checkpoint resumed on 2 ranks (sliced on load).
  const patchbay::train::TrainSummary from_single =
      run("resumed_on_2", true, folder / "single" / "checkpoints" / "step_3.safetensors");
  CHECK(from_single.start_step == 3);
  world().barrier();
  if (world().writer())
    CHECK(max_abs_difference(patchbay::train::load_checkpoint(folder / "resumed_on_2"),
                             patchbay::train::load_checkpoint(folder / "single")) < 1e-4);
  world().barrier();
}
