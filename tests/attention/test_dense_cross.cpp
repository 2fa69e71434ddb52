// attention_dense as cross-attention (attention interface 1.3): the conformance kit's
// cross-attention checks with a naive reference written here from the layer's parameters
// (explicit scores, -inf on padded keys, softmax; multi-head and grouped-query), the host's
// AttentionHandle (memory once, several calls, gradients reaching the parameters), and the
// refusal of every built-in attention kind that does not declare PB_ATTENTION_CAP_CROSS.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "attention_fixture.hpp"
#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "runtime/plugin_validation.hpp"

namespace {

namespace pt = patchbay::testing;
namespace rt = patchbay::runtime;
namespace eng = patchbay::engine;
using patchbay::Tensor;

using Parameters = std::vector<std::pair<std::string, Tensor>>;

Tensor parameter(const Parameters& parameters, const std::string& name) {
  for (const auto& [n, t] : parameters)
    if (n == name) return t;
  FAIL("no parameter " << name);
  return {};
}

// softmax(q k^T / sqrt(Dh) with -inf at padded keys) v, then the output projection; the
// qkv rows are q (H heads), k, v (Hkv heads each), query head h reading kv head h / (H / Hkv).
Tensor naive_cross(const Parameters& parameters, const Tensor& x, const Tensor& memory,
                   const std::vector<uint8_t>& valid, int64_t heads, int64_t kv_heads) {
  patchbay::Ops ops(x.ops());
  const int64_t b = x.size(0), tq = x.size(1), tk = memory.size(1), c = x.size(2);
  const int64_t dh = c / heads;
  const Tensor weight = parameter(parameters, "qkv.weight");
  const Tensor bias = parameter(parameters, "qkv.bias");
  auto part = [&](const Tensor& in, int64_t lo, int64_t n) {
    const int64_t hi = lo + n * dh;
    return (in.matmul(weight.slice(0, lo, hi), false, true) + bias.slice(0, lo, hi))
        .reshape({b, in.size(1), n, dh})
        .permute({0, 2, 1, 3});
  };
  const Tensor q = part(x, 0, heads);
  Tensor k = part(memory, c, kv_heads), v = part(memory, c + kv_heads * dh, kv_heads);
  if (kv_heads < heads) {
    std::vector<Tensor> ks, vs;
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = h / (heads / kv_heads);
      ks.push_back(k.slice(1, g, g + 1));
      vs.push_back(v.slice(1, g, g + 1));
    }
    k = ops.concat(ks, 1);
    v = ops.concat(vs, 1);
  }
  std::vector<float> padded(valid.size());
  for (size_t i = 0; i < valid.size(); ++i) padded[i] = valid[i] != 0 ? 0.f : 1.f;
  const Tensor scores = (q.matmul(k, false, true) * (1.0 / std::sqrt(static_cast<double>(dh))))
                            .masked_fill(ops.from_vector(padded, {b, 1, 1, tk}),
                                         -std::numeric_limits<double>::infinity());
  const Tensor o = scores.softmax().matmul(v).permute({0, 2, 1, 3}).reshape({b, tq, c});
  return o.matmul(parameter(parameters, "proj.weight"), false, true) +
         parameter(parameters, "proj.bias");
}

TEST_CASE("attention 'dense' cross-attention equals a naive masked softmax reference") {
  pt::AttentionConformanceOptions options;
  options.cross_reference = [&](const Parameters& p, const Tensor& x, const Tensor& memory,
                                const std::vector<uint8_t>& valid) {
    return naive_cross(p, x, memory, valid, options.n_heads, options.n_heads);
  };
  pt::check_cross_attention_conformance(attention_test::dense_factory([](rt::ComponentConfig&) {}),
                                        options);
}

TEST_CASE("attention 'dense' grouped-query cross-attention equals the naive reference") {
  pt::AttentionConformanceOptions options;
  options.d_model = 24;
  options.n_heads = 4;
  options.grad_d_model = 8;
  options.grad_n_heads = 4;
  options.cross_memory_len = 9;
  options.cross_query_len = 3;
  options.cross_reference = [&](const Parameters& p, const Tensor& x, const Tensor& memory,
                                const std::vector<uint8_t>& valid) {
    return naive_cross(p, x, memory, valid, options.n_heads, 2);
  };
  pt::check_cross_attention_conformance(
      attention_test::dense_factory([](rt::ComponentConfig& c) { c.set_int("n_kv_heads", 2); }),
      options);
}

TEST_CASE("AttentionHandle runs dense as cross-attention: one memory, several calls, gradients") {
  rt::AttentionHandle attn = attention_test::dense_handle();
  attn.init(attention_test::layer_context(16, 2, 32));
  CHECK(attn.can_cross());
  CHECK_NOTHROW(attn.require_cross());
  eng::Generator gen(3);
  const eng::Tensor memory = eng::uniform({2, 6, 16}, gen, -1.0, 1.0);
  const eng::Tensor x = eng::uniform({2, 4, 16}, gen, -1.0, 1.0);
  const eng::Tensor mask =
      eng::Tensor::from_vector(std::vector<float>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {2, 6});
  rt::AttentionHandle::CrossMemory m = attn.cross_memory_create(memory, &mask, /*training=*/true);
  CHECK(m.batch() == 2);
  const eng::Tensor y = attn.forward_cross(x, m, /*training=*/true);
  CHECK(y.shape() == eng::Shape{2, 4, 16});
  eng::backward(eng::sum(y));
  for (const auto& p : attn.parameters()) {
    CAPTURE(p.name);
    CHECK(p.tensor.grad().defined());
  }
  // A second call on the same memory (a decoding step) without gradients.
  eng::NoGradGuard no_grad;
  const eng::Tensor step = attn.forward_cross(x.slice(1, 3, 4), m, false);
  std::vector<float> a = step.to_vector(), b = y.slice(1, 3, 4).contiguous().to_vector();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-5));
}

TEST_CASE(
    "attention kinds without PB_ATTENTION_CAP_CROSS are refused as cross-attention, by name") {
  attention_test::registry();  // wires the host api to the engine's ops table
  const char* env = std::getenv("PATCHBAY_PLUGIN_PATH");
  REQUIRE(env != nullptr);
  rt::Registry others(rt::host_api());
  for (const char* file : {"attention_linear.so", "attention_linformer.so", "attention_lsh.so",
                           "attention_performer.so", "attention_sparse.so"})
    others.scan_file(std::filesystem::path(env) / file);
  for (const rt::RefusedPlugin& refused : others.refused()) FAIL_CHECK(refused.reason);
  std::set<std::string> refused_kinds;
  for (const auto& plugin : others.plugins()) {
    for (const rt::ComponentEntry& component : plugin->components) {
      if (component.kind != PB_KIND_ATTENTION) continue;
      CAPTURE(component.name);
      rt::ComponentConfig config(*component.descriptor);
      rt::AttentionHandle handle(others.create(PB_KIND_ATTENTION, component.name, config.view()),
                                 others.host());
      if (handle.can_cross()) continue;
      refused_kinds.insert(component.name);
      try {
        handle.require_cross();
        FAIL("no refusal");
      } catch (const patchbay::Error& e) {
        const std::string message = e.what();
        CHECK(message.find("attention '" + component.name + "'") != std::string::npos);
        CHECK(message.find("cannot serve as cross-attention") != std::string::npos);
      }
      eng::Tensor memory = eng::zeros({1, 2, 16});
      CHECK_THROWS_AS(handle.cross_memory_create(memory, nullptr, false), patchbay::Error);
    }
  }
  // The kinds that cannot be cross-attention yet (dense, linear, performer and linformer can;
  // see their tests).
  CHECK(refused_kinds.count("lsh") == 1);
  CHECK(refused_kinds.count("sparse") == 1);
  CHECK(refused_kinds.count("linear") == 0);     // linear, performer, linformer can
  CHECK(refused_kinds.count("performer") == 0);  // (tests/attention_linear)
  CHECK(refused_kinds.count("linformer") == 0);
}

TEST_CASE("the host refuses a vtable declaring cross-attention without its functions") {
  const rt::KindInterface* attention = rt::kind_interface(PB_KIND_ATTENTION);
  REQUIRE(attention != nullptr);
  pb_attention_vtable vt =
      *static_cast<const pb_attention_vtable*>(attention_test::dense_descriptor().vtable);
  REQUIRE((vt.capabilities & PB_ATTENTION_CAP_CROSS) != 0);
  CHECK(attention->check_vtable(&vt).empty());
  pb_attention_vtable missing = vt;
  missing.forward_cross = nullptr;
  std::vector<std::string> problems = attention->check_vtable(&missing);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("'forward_cross' is NULL") != std::string::npos);
  pb_attention_vtable old = vt;
  old.struct_size = offsetof(pb_attention_vtable, cross_memory_create);  // an interface 1.1 size
  old.capabilities &= ~static_cast<uint64_t>(PB_ATTENTION_CAP_PACKED);   // a 1.5 capability
  problems = attention->check_vtable(&old);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("predates the cross-attention functions") != std::string::npos);
  old.capabilities &= ~static_cast<uint64_t>(PB_ATTENTION_CAP_CROSS);  // a 1.1 layer: fine
  CHECK(attention->check_vtable(&old).empty());
}

TEST_CASE("the host refuses PB_ATTENTION_CAP_CROSS_POSITIONAL without PB_ATTENTION_CAP_CROSS") {
  const rt::KindInterface* attention = rt::kind_interface(PB_KIND_ATTENTION);
  REQUIRE(attention != nullptr);
  pb_attention_vtable vt =
      *static_cast<const pb_attention_vtable*>(attention_test::dense_descriptor().vtable);
  vt.capabilities |= PB_ATTENTION_CAP_CROSS_POSITIONAL;  // with CROSS: a valid declaration
  CHECK(attention->check_vtable(&vt).empty());
  vt.capabilities &= ~static_cast<uint64_t>(PB_ATTENTION_CAP_CROSS);
  vt.cross_memory_create = nullptr;
  vt.cross_memory_destroy = nullptr;
  vt.forward_cross = nullptr;
  const std::vector<std::string> problems = attention->check_vtable(&vt);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("without PB_ATTENTION_CAP_CROSS") != std::string::npos);
}

}  // namespace
