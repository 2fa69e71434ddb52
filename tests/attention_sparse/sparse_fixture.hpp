// Shared set-up of the sparse/LSH attention tests: the host api wired to the engine's ops
// table (as the CLI does), a registry that has loaded the real attention .so files from
// PATCHBAY_PLUGIN_PATH, and a conformance-kit factory for a named component with a config.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "engine/ops_table.hpp"
#include "patchbay/testing/attention_conformance.hpp"
#include "runtime/registry.hpp"

namespace structured_attention_test {

namespace rt = patchbay::runtime;

inline rt::Registry& registry() {
  static rt::Registry* instance = [] {
    rt::set_host_ops(patchbay::engine::host_ops_table());
    const pb_host_api* host = rt::host_api();
    patchbay::engine::set_ops_status_functions(
        {host->status_create, host->status_code, host->status_message, host->status_free});
    const char* env = std::getenv("PATCHBAY_PLUGIN_PATH");
    REQUIRE_MESSAGE(env != nullptr, "PATCHBAY_PLUGIN_PATH is not set (run through ctest)");
    auto* r = new rt::Registry(host);
    for (const char* name : {"attention_sparse.so", "attention_lsh.so"})
      if (std::filesystem::exists(std::filesystem::path(env) / name))
        r->scan_file(std::filesystem::path(env) / name);
    for (const rt::RefusedPlugin& refused : r->refused()) FAIL_CHECK(refused.reason);
    return r;
  }();
  return *instance;
}

// A conformance-kit factory for attention `kind`; `configure` adjusts its config.
inline patchbay::testing::AttentionFactory factory(
    const std::string& kind, std::function<void(rt::ComponentConfig&)> configure) {
  return [kind, configure] {
    const pb_component_descriptor& descriptor =
        *registry().find(PB_KIND_ATTENTION, kind).descriptor;
    auto config = std::make_shared<rt::ComponentConfig>(descriptor);
    configure(*config);
    auto instance = std::make_shared<rt::ComponentInstance>(
        registry().create(PB_KIND_ATTENTION, kind, config->view()));
    return patchbay::testing::AttentionUnderTest(
        static_cast<const pb_attention_vtable*>(instance->component()->vtable), instance->get(),
        registry().host(), [instance] {});
  };
}

}  // namespace structured_attention_test
