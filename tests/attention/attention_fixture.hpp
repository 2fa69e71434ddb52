// Shared set-up of the attention tests: the process host api wired to the engine's ops table
// (as the CLI does), a registry that has loaded the real attention_dense.so from
// PATCHBAY_PLUGIN_PATH, and helpers to create "dense" objects with a given config.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "engine/ops_table.hpp"
#include "patchbay/testing/attention_conformance.hpp"
#include "runtime/attention_handle.hpp"
#include "runtime/registry.hpp"

namespace attention_test {

namespace rt = patchbay::runtime;

// The registry every test uses; the plugin library stays loaded for the whole process.
inline rt::Registry& registry() {
  static rt::Registry* instance = [] {
    rt::set_host_ops(patchbay::engine::host_ops_table());
    const pb_host_api* host = rt::host_api();
    patchbay::engine::set_ops_status_functions(
        {host->status_create, host->status_code, host->status_message, host->status_free});
    const char* env = std::getenv("PATCHBAY_PLUGIN_PATH");
    REQUIRE_MESSAGE(env != nullptr, "PATCHBAY_PLUGIN_PATH is not set (run through ctest)");
    auto* r = new rt::Registry(host);
    r->scan_file(std::filesystem::path(env) / "attention_dense.so");
    for (const rt::RefusedPlugin& refused : r->refused()) FAIL_CHECK(refused.reason);
    return r;
  }();
  return *instance;
}

inline const pb_component_descriptor& dense_descriptor() {
  return *registry().find(PB_KIND_ATTENTION, "dense").descriptor;
}

// A conformance-kit factory over the loaded plugin; `configure` adjusts the config.
template <class Configure>
patchbay::testing::AttentionFactory dense_factory(Configure configure) {
  return [configure] {
    auto config = std::make_shared<rt::ComponentConfig>(dense_descriptor());
    configure(*config);
    auto instance = std::make_shared<rt::ComponentInstance>(
        registry().create(PB_KIND_ATTENTION, "dense", config->view()));
    return patchbay::testing::AttentionUnderTest(
        static_cast<const pb_attention_vtable*>(instance->component()->vtable), instance->get(),
        registry().host(),
        [instance] {});  // the instance (and the library) go when the last copy of the lambda does
  };
}

inline rt::AttentionHandle dense_handle(bool causal = true, double dropout = 0.0) {
  rt::ComponentConfig config(dense_descriptor());
  config.set_bool("causal", causal);
  config.set_float("dropout", dropout);
  return rt::AttentionHandle(registry().create(PB_KIND_ATTENTION, "dense", config.view()),
                             registry().host());
}

inline pb_layer_context layer_context(int64_t d_model, int64_t n_heads, int64_t max_seq_len,
                                      pb_positional_kind positional = PB_POSITIONAL_NONE,
                                      uint64_t seed = 5) {
  pb_layer_context ctx{};
  ctx.struct_size = sizeof(ctx);
  ctx.d_model = d_model;
  ctx.n_heads = n_heads;
  ctx.d_ff = 4 * d_model;
  ctx.max_seq_len = max_seq_len;
  ctx.n_layers = 2;
  ctx.causal = 1;
  ctx.positional = positional;
  ctx.rope_theta = 10000.0;
  ctx.init_std = 0.3;
  ctx.residual_init_std = 0.2;
  ctx.seed = seed;
  ctx.param_dtype = PB_DTYPE_F32;
  ctx.device_type = PB_DEVICE_CPU;
  return ctx;
}

}  // namespace attention_test
