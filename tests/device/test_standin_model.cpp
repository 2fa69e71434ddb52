// The language model on the host stand-in device (cuda:0 backed by host memory, CPU kernels
// aliased; core/engine/host_standin_device.hpp), with the real built-in plugins
// attention_dense, ffn_mlp and attention_linformer loaded through the registry: every parameter
// lives on the device, the forward and backward give the CPU model's bits and copy nothing back to
// the host, KV-cache decoding works there, a device model's checkpoint loads into a CPU model, and
// a plugin with CPU-only code (attention_lsh) refuses the device naming itself; attention_linear
// (the causal_linear_attention op) and attention_performer (the same op, features redrawn in
// place) run there with the CPU's bits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/host_standin_device.hpp"
#include "engine/ops.hpp"
#include "engine/ops_indexing.hpp"
#include "engine/ops_table.hpp"
#include "model/language_model.hpp"
#include "patchbay/testing/temp_dir.hpp"
#include "runtime/registry.hpp"
#include "train/checkpoint.hpp"

namespace {

namespace eng = patchbay::engine;
namespace pm = patchbay::model;
namespace rt = patchbay::runtime;

rt::Registry& registry() {
  static rt::Registry* instance = [] {
    rt::set_host_ops(eng::host_ops_table());
    const pb_host_api* host = rt::host_api();
    eng::set_ops_status_functions(
        {host->status_create, host->status_code, host->status_message, host->status_free});
    const char* env = std::getenv("PATCHBAY_PLUGIN_PATH");
    REQUIRE_MESSAGE(env != nullptr, "PATCHBAY_PLUGIN_PATH is not set (run through ctest)");
    auto* r = new rt::Registry(host);
    for (const char* file :
         {"attention_dense.so", "ffn_mlp.so", "attention_lsh.so", "attention_linformer.so",
          "attention_linear.so", "attention_performer.so", "ffn_moe.so"})
      r->scan_file(std::filesystem::path(env) / file);
    for (const rt::RefusedPlugin& refused : r->refused()) FAIL_CHECK(refused.reason);
    return r;
  }();
  return *instance;
}

pm::ModelOptions tiny(eng::Device device, uint64_t seed = 7) {
  pm::ModelOptions o;
  o.vocab_size = 11;
  o.context_length = 8;
  o.n_layers = 2;
  o.n_heads = 2;
  o.d_model = 16;
  o.d_ff = 64;
  o.init_std = 0.2;
  o.seed = seed;
  o.device = device;
  return o;
}

eng::Tensor tokens(int64_t batch, int64_t length) {
  std::vector<int64_t> ids;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < length; ++t) ids.push_back((7 * t + 3 * b + (t * t) % 5) % 11);
  return eng::Tensor::from_data(ids.data(), {batch, length}, eng::DType::kI64);
}

std::vector<unsigned char> bytes_of(const eng::Tensor& t) {
  eng::Tensor c = t.to(eng::cpu()).contiguous();
  std::vector<unsigned char> out(c.nbytes());
  if (!out.empty()) std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}

float max_abs_diff(const eng::Tensor& a, const eng::Tensor& b) {
  const std::vector<float> x = a.to_vector(), y = b.to_vector();
  REQUIRE(x.size() == y.size());
  float worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

// A device gradient against the CPU's: bit for bit, except the tied embedding "wte.weight",
// whose two gradients meet in another order: on the CPU the embedding's rows are added into
// the head's gradient in place (autograd's add-into form, CPU only), elsewhere its dense
// gradient is built first and then added. Same sum, one rounding apart.
void check_grad_matches_cpu(const pm::NamedParameter& dev, const pm::NamedParameter& cpu) {
  if (dev.name == "wte.weight")
    CHECK(max_abs_diff(dev.tensor.grad(), cpu.tensor.grad()) < 1e-6f);
  else
    CHECK(bytes_of(dev.tensor.grad()) == bytes_of(cpu.tensor.grad()));
}

// Mean next-token loss of a forward pass (targets: the inputs shifted by one, wrapped).
eng::Tensor loss_of(pm::LanguageModel& model, const eng::Tensor& ids) {
  eng::Tensor logits = model.forward(ids, /*training=*/true).logits;
  eng::Tensor targets =
      eng::concat({eng::narrow(ids, 1, 1, ids.size(1) - 1), eng::narrow(ids, 1, 0, 1)}, 1);
  return eng::cross_entropy(logits.reshape({-1, 11}), targets.reshape({-1}).to(logits.device()));
}

}  // namespace

TEST_CASE("the model on the stand-in device: parameters there, CPU bits, no copy back") {
  const eng::Device dev = eng::install_host_standin_device();
  auto on_cpu = pm::LanguageModel::build(tiny(eng::cpu()), {}, registry());
  auto on_dev = pm::LanguageModel::build(tiny(dev), {}, registry());
  const std::vector<pm::NamedParameter> cpu_params = on_cpu->parameters();
  const std::vector<pm::NamedParameter> dev_params = on_dev->parameters();
  REQUIRE(cpu_params.size() == dev_params.size());
  for (size_t i = 0; i < dev_params.size(); ++i) {
    CAPTURE(dev_params[i].name);
    CHECK(dev_params[i].tensor.device() == dev);
    CHECK(dev_params[i].tensor.requires_grad());
    CHECK(bytes_of(dev_params[i].tensor) == bytes_of(cpu_params[i].tensor));  // same init
  }

  const eng::Tensor ids = tokens(2, 8);  // on the host, as the trainer makes them
  const size_t copies_back = eng::standin_transfer_counts().device_to_host;
  eng::Tensor dev_loss = loss_of(*on_dev, ids);
  CHECK(dev_loss.device() == dev);
  eng::backward(dev_loss);
  CHECK(eng::standin_transfer_counts().device_to_host == copies_back);

  eng::Tensor cpu_loss = loss_of(*on_cpu, ids);
  eng::backward(cpu_loss);
  CHECK(bytes_of(dev_loss) == bytes_of(cpu_loss));
  for (size_t i = 0; i < dev_params.size(); ++i) {
    CAPTURE(dev_params[i].name);
    REQUIRE(dev_params[i].tensor.grad().defined());
    CHECK(dev_params[i].tensor.grad().device() == dev);
    check_grad_matches_cpu(dev_params[i], cpu_params[i]);
  }
}

TEST_CASE("KV-cache decoding on the stand-in device gives the full forward's logits") {
  const eng::Device dev = eng::install_host_standin_device();
  auto model = pm::LanguageModel::build(tiny(dev), {}, registry());
  eng::NoGradGuard no_grad;
  const eng::Tensor ids = tokens(1, 6);
  const eng::Tensor full = model->forward(ids, false).logits;
  pm::DecodeState state = model->start_decoding(1, 8);
  eng::Tensor first = model->decode_step(state, eng::narrow(ids, 1, 0, 5).contiguous());
  eng::Tensor last = model->decode_step(state, eng::narrow(ids, 1, 5, 1).contiguous());
  CHECK(last.device() == dev);
  const std::vector<float> want = eng::narrow(full, 1, 5, 1).to_vector();
  const std::vector<float> got = last.to_vector();
  REQUIRE(want.size() == got.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
  CHECK(first.shape() == eng::Shape{1, 5, 11});
}

TEST_CASE("a device model's checkpoint loads into a CPU model, which then computes the same") {
  const eng::Device dev = eng::install_host_standin_device();
  patchbay::testing::TempDir dir("device_model_checkpoint");
  auto on_dev = pm::LanguageModel::build(tiny(dev, 3), {}, registry());
  std::vector<patchbay::train::NamedTensor> saved;
  for (const pm::NamedParameter& p : on_dev->parameters()) saved.push_back({p.name, p.tensor});
  const auto file = patchbay::train::save_checkpoint(
      dir.path(), 1, saved, {{patchbay::train::kMetaConfig, "[run]\nname = \"device\"\n"}});

  auto on_cpu = pm::LanguageModel::build(tiny(eng::cpu(), 99), {}, registry());  // other init
  std::vector<patchbay::train::NamedTensor> targets;
  for (const pm::NamedParameter& p : on_cpu->parameters()) targets.push_back({p.name, p.tensor});
  patchbay::train::Checkpoint(file).load_into(targets);
  eng::NoGradGuard no_grad;
  const eng::Tensor ids = tokens(1, 8);
  CHECK(bytes_of(on_cpu->forward(ids, false).logits) ==
        bytes_of(on_dev->forward(ids, false).logits));
}

TEST_CASE("linformer (ops composed in the plugin) runs on the device unchanged") {
  const eng::Device dev = eng::install_host_standin_device();
  auto options = [&](eng::Device device) {
    pm::ModelOptions o = tiny(device);
    o.causal = false;  // plain Linformer mixes positions: a bidirectional encoder
    o.attention_kinds = {"linformer"};
    return o;
  };
  pm::ComponentTables tables;
  tables.attention = toml::table{{"kind", "linformer"}, {"k", 4}};  // k <= max_seq_len = 8
  auto on_cpu = pm::LanguageModel::build(options(eng::cpu()), tables, registry());
  auto on_dev = pm::LanguageModel::build(options(dev), tables, registry());
  for (const pm::NamedParameter& p : on_dev->parameters()) CHECK(p.tensor.device() == dev);
  eng::NoGradGuard no_grad;
  const eng::Tensor ids = tokens(2, 8);
  CHECK(bytes_of(on_dev->forward(ids, false).logits) ==
        bytes_of(on_cpu->forward(ids, false).logits));
}

TEST_CASE("linear attention (causal_linear_attention op) runs on the device: CPU bits, grads") {
  const eng::Device dev = eng::install_host_standin_device();
  auto options = [&](eng::Device device) {
    pm::ModelOptions o = tiny(device);
    o.attention_kinds = {"linear"};
    return o;
  };
  pm::ComponentTables tables;
  tables.attention = toml::table{{"kind", "linear"}};
  auto on_cpu = pm::LanguageModel::build(options(eng::cpu()), tables, registry());
  auto on_dev = pm::LanguageModel::build(options(dev), tables, registry());
  for (const pm::NamedParameter& p : on_dev->parameters()) CHECK(p.tensor.device() == dev);
  const eng::Tensor ids = tokens(2, 8);
  const size_t before = eng::standin_transfer_counts().device_to_host;
  eng::Tensor dev_loss = loss_of(*on_dev, ids);
  eng::backward(dev_loss);
  CHECK(eng::standin_transfer_counts().device_to_host == before);  // nothing read back
  eng::Tensor cpu_loss = loss_of(*on_cpu, ids);
  eng::backward(cpu_loss);
  CHECK(bytes_of(dev_loss) == bytes_of(cpu_loss));
  const auto cpu_params = on_cpu->parameters(), dev_params = on_dev->parameters();
  REQUIRE(cpu_params.size() == dev_params.size());
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    CAPTURE(cpu_params[i].name);
    if (!cpu_params[i].tensor.grad().defined()) continue;
    check_grad_matches_cpu(dev_params[i], cpu_params[i]);
  }
}

TEST_CASE("performer runs on the device: CPU bits across feature redraws, nothing read back") {
  const eng::Device dev = eng::install_host_standin_device();
  auto options = [&](eng::Device device) {
    pm::ModelOptions o = tiny(device);
    o.attention_kinds = {"performer"};
    return o;
  };
  pm::ComponentTables tables;
  tables.attention = toml::table{{"kind", "performer"}, {"redraw_interval", 2}};
  auto on_cpu = pm::LanguageModel::build(options(eng::cpu()), tables, registry());
  auto on_dev = pm::LanguageModel::build(options(dev), tables, registry());
  for (const pm::NamedParameter& p : on_dev->parameters()) {
    CAPTURE(p.name);
    // The redraw count is host bookkeeping (never trained); everything else is on the device.
    const bool host_count = p.name.find("features.training_forwards") != std::string::npos;
    CHECK(p.tensor.device() == (host_count ? eng::cpu() : dev));
  }
  const eng::Tensor ids = tokens(2, 8);
  // Three training forwards with redraw_interval 2: draws 0, 0, 1 (omega rewritten in place).
  for (int forward = 0; forward < 3; ++forward) {
    CAPTURE(forward);
    const size_t before = eng::standin_transfer_counts().device_to_host;
    eng::Tensor dev_loss = loss_of(*on_dev, ids);
    eng::backward(dev_loss);
    CHECK(eng::standin_transfer_counts().device_to_host == before);  // nothing read back
    eng::Tensor cpu_loss = loss_of(*on_cpu, ids);
    eng::backward(cpu_loss);
    CHECK(bytes_of(dev_loss) == bytes_of(cpu_loss));
    const auto cpu_params = on_cpu->parameters(), dev_params = on_dev->parameters();
    REQUIRE(cpu_params.size() == dev_params.size());
    for (size_t i = 0; i < cpu_params.size(); ++i) {
      CAPTURE(cpu_params[i].name);
      if (!cpu_params[i].tensor.grad().defined()) {
        CHECK(bytes_of(dev_params[i].tensor) == bytes_of(cpu_params[i].tensor));  // omega, count
        continue;
      }
      check_grad_matches_cpu(dev_params[i], cpu_params[i]);
      eng::Tensor dev_param = dev_params[i].tensor, cpu_param = cpu_params[i].tensor;  // handles
      dev_param.zero_grad();
      cpu_param.zero_grad();
    }
  }
}

TEST_CASE("moe runs on the device (fixed-capacity dispatch): the CPU's losses and gradients") {
  const eng::Device dev = eng::install_host_standin_device();
  auto options = [&](eng::Device device) {
    pm::ModelOptions o = tiny(device);
    o.feedforward_kinds = {"moe"};
    return o;
  };
  for (const char* router : {"topk", "switch", "noisy_topk"}) {
    CAPTURE(router);
    pm::ComponentTables tables;
    // capacity 0.75: ceil(0.75 * 16 tokens * k / 4) slots per expert, so assignments are dropped.
    tables.feedforward =
        toml::table{{"kind", "moe"},           {"router", router},      {"experts", 4},
                    {"capacity_factor", 0.75}, {"router_jitter", 0.05}, {"shared_expert", true}};
    auto on_cpu = pm::LanguageModel::build(options(eng::cpu()), tables, registry());
    auto on_dev = pm::LanguageModel::build(options(dev), tables, registry());
    for (const pm::NamedParameter& p : on_dev->parameters()) CHECK(p.tensor.device() == dev);
    const eng::Tensor ids = tokens(2, 8);
    auto objective = [&](pm::LanguageModel& model) {  // next-token loss + the layers' aux losses
      pm::ForwardResult out = model.forward(ids, /*training=*/true);
      eng::Tensor targets =
          eng::concat({eng::narrow(ids, 1, 1, ids.size(1) - 1), eng::narrow(ids, 1, 0, 1)}, 1)
              .to(out.logits.device());
      eng::Tensor loss = eng::cross_entropy(out.logits.reshape({-1, 11}), targets.reshape({-1}));
      REQUIRE(out.aux_loss.defined());
      return eng::add(loss, out.aux_loss);
    };
    const size_t before = eng::standin_transfer_counts().device_to_host;
    eng::Tensor dev_loss = objective(*on_dev);
    eng::backward(dev_loss);
    CHECK(eng::standin_transfer_counts().device_to_host == before);  // nothing read back
    eng::Tensor cpu_loss = objective(*on_cpu);
    eng::backward(cpu_loss);
    // The experts multiply C rows on the device (M_e on the CPU) and the input gradient is
    // summed in another order: equal to f32 rounding, not bit for bit.
    CHECK(std::abs(dev_loss.item() - cpu_loss.item()) <= 1e-6 * std::abs(cpu_loss.item()));
    const auto cpu_params = on_cpu->parameters(), dev_params = on_dev->parameters();
    REQUIRE(cpu_params.size() == dev_params.size());
    for (size_t i = 0; i < cpu_params.size(); ++i) {
      CAPTURE(cpu_params[i].name);
      REQUIRE(dev_params[i].tensor.grad().defined());
      if (!cpu_params[i].tensor.grad().defined()) {
        // An expert that kept no assignment: untouched on the CPU, its C masked rows on the
        // device (gradient exactly 0).
        for (float g : dev_params[i].tensor.grad().to_vector()) CHECK(g == 0.f);
        continue;
      }
      const std::vector<float> want = cpu_params[i].tensor.grad().to_vector();
      float scale = 0;
      for (float g : want) scale = std::max(scale, std::abs(g));
      CHECK(max_abs_diff(dev_params[i].tensor.grad(), cpu_params[i].tensor.grad()) <=
            1e-5f * scale + 1e-7f);
    }
  }
}

TEST_CASE("moe refuses a device where its dispatch needs the host, naming why") {
  const eng::Device dev = eng::install_host_standin_device();
  for (const char* kind : {"moe", "moe_expert_choice"}) {
    CAPTURE(kind);
    pm::ModelOptions o = tiny(dev);
    o.feedforward_kinds = {kind};
    o.causal = std::string(kind) == "moe";  // expert choice mixes positions: bidirectional only
    pm::ComponentTables tables;
    tables.attention.insert("causal", o.causal);
    tables.feedforward = toml::table{{"kind", kind}};
    if (std::string(kind) == "moe") tables.feedforward.insert("dropless", true);
    try {
      (void)pm::LanguageModel::build(o, tables, registry());
      FAIL("expected a refusal of the device");
    } catch (const patchbay::Error& e) {
      const std::string message = e.what();
      CAPTURE(message);
      CHECK(message.find(kind) != std::string::npos);
      CHECK(message.find("CPU only") != std::string::npos);
    }
  }
}

TEST_CASE("a token id past the vocabulary: the device model runs on, the next read names it") {
  const eng::Device dev = eng::install_host_standin_device();
  auto on_dev = pm::LanguageModel::build(tiny(dev), {}, registry());
  (void)eng::zeros({1}, eng::DType::kF32, dev).to(eng::cpu());  // a clean record to start from
  std::vector<int64_t> values(16, 3);
  values[9] = 11;  // vocab_size is 11
  const eng::Tensor ids = eng::Tensor::from_data(values.data(), {2, 8}, eng::DType::kI64);
  const size_t before = eng::standin_transfer_counts().device_to_host;
  eng::Tensor loss;
  CHECK_NOTHROW(loss = loss_of(*on_dev, ids));
  CHECK_NOTHROW(eng::backward(loss));
  CHECK(eng::standin_transfer_counts().device_to_host == before);  // no read, no wait
  std::string message;
  try {
    (void)loss.item();
  } catch (const patchbay::Error& e) {
    message = e.what();
  }
  CAPTURE(message);
  // The embedding saw it first (the shifted targets hold it too): first error wins.
  CHECK(message.find("embedding: id value 11 at flat position 9") != std::string::npos);
  CHECK(message.find("vocabulary") != std::string::npos);
}

TEST_CASE("a layer with CPU-only code refuses the device, naming itself") {
  const eng::Device dev = eng::install_host_standin_device();
  pm::ModelOptions o = tiny(dev);
  o.attention_kinds = {"lsh"};
  pm::ComponentTables tables;
  try {
    (void)pm::LanguageModel::build(o, tables, registry());
    FAIL("expected attention 'lsh' to refuse cuda:0");
  } catch (const patchbay::Error& e) {
    const std::string message = e.what();
    CHECK(message.find("lsh") != std::string::npos);
    CHECK(message.find("CPU") != std::string::npos);
  }
}
