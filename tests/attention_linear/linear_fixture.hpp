// Shared set-up of the linear-attention, Performer and Linformer plugin tests: the process host api
// wired to the engine's ops table (as the CLI does), a registry that has loaded the real plugin
// libraries named here from PATCHBAY_PLUGIN_PATH, and helpers to create attention objects by kind.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "engine/ops_table.hpp"
#include "patchbay/testing/attention_conformance.hpp"
#include "runtime/attention_handle.hpp"
#include "runtime/registry.hpp"

namespace linear_test {

namespace rt = patchbay::runtime;
using Configure = std::function<void(rt::ComponentConfig&)>;

inline rt::Registry& registry() {
  static rt::Registry* instance = [] {
    rt::set_host_ops(patchbay::engine::host_ops_table());
    const pb_host_api* host = rt::host_api();
    patchbay::engine::set_ops_status_functions(
        {host->status_create, host->status_code, host->status_message, host->status_free});
    const char* env = std::getenv("PATCHBAY_PLUGIN_PATH");
    REQUIRE_MESSAGE(env != nullptr, "PATCHBAY_PLUGIN_PATH is not set (run through ctest)");
    auto* r = new rt::Registry(host);
    for (const char* file : {"attention_linear.so", "attention_performer.so",
                             "attention_linformer.so", "attention_dense.so", "ffn_mlp.so"})
      if (std::filesystem::exists(std::filesystem::path(env) / file))
        r->scan_file(std::filesystem::path(env) / file);
    for (const rt::RefusedPlugin& refused : r->refused()) FAIL_CHECK(refused.reason);
    return r;
  }();
  return *instance;
}

inline const pb_component_descriptor& descriptor(const std::string& kind) {
  return *registry().find(PB_KIND_ATTENTION, kind).descriptor;
}

// A conformance-kit factory over the loaded plugin; `configure` adjusts the config.
inline patchbay::testing::AttentionFactory factory(const std::string& kind, Configure configure) {
  return [kind, configure] {
    auto config = std::make_shared<rt::ComponentConfig>(descriptor(kind));
    configure(*config);
    auto instance = std::make_shared<rt::ComponentInstance>(
        registry().create(PB_KIND_ATTENTION, kind, config->view()));
    return patchbay::testing::AttentionUnderTest(
        static_cast<const pb_attention_vtable*>(instance->component()->vtable), instance->get(),
        registry().host(), [instance] {});
  };
}

inline rt::AttentionHandle handle(const std::string& kind, const Configure& configure) {
  rt::ComponentConfig config(descriptor(kind));
  configure(config);
  return rt::AttentionHandle(registry().create(PB_KIND_ATTENTION, kind, config.view()),
                             registry().host());
}

inline pb_layer_context layer_context(int64_t d_model, int64_t n_heads, int64_t max_seq_len,
                                      bool causal = true, uint64_t seed = 5) {
  pb_layer_context ctx{};
  ctx.struct_size = sizeof(ctx);
  ctx.d_model = d_model;
  ctx.n_heads = n_heads;
  ctx.d_ff = 4 * d_model;
  ctx.max_seq_len = max_seq_len;
  ctx.n_layers = 2;
  ctx.causal = causal ? 1 : 0;
  ctx.positional = PB_POSITIONAL_NONE;
  ctx.rope_theta = 10000.0;
  ctx.init_std = 0.3;
  ctx.residual_init_std = 0.2;
  ctx.seed = seed;
  ctx.param_dtype = PB_DTYPE_F32;
  ctx.device_type = PB_DEVICE_CPU;
  return ctx;
}

}  // namespace linear_test
