// Shared set-up of the model and generation tests: the process host api wired to the engine's
// ops table (as the CLI does), one registry holding the real built-in plugins the model uses
// (attention_dense, ffn_mlp, sampler_basic, tokenizer_char from PATCHBAY_PLUGIN_PATH) and the
// test-only model_test_layers plugin, and tiny model options.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "engine/ops_table.hpp"
#include "model/language_model.hpp"
#include "runtime/registry.hpp"

namespace model_test {

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
    for (const char* file :
         {"attention_dense.so", "ffn_mlp.so", "sampler_basic.so", "tokenizer_char.so"}) {
      r->scan_file(std::filesystem::path(env) / file);
    }
    r->scan_file(std::filesystem::path(MODEL_TEST_PLUGIN_DIR) / "model_test_layers.so");
    for (const rt::RefusedPlugin& refused : r->refused()) FAIL_CHECK(refused.reason);
    return r;
  }();
  return *instance;
}

// V = 11, C = 16, L = 2, H = 2, T = 8 (the brief's tiny dims).
inline patchbay::model::ModelOptions tiny_options() {
  patchbay::model::ModelOptions o;
  o.vocab_size = 11;
  o.context_length = 8;
  o.n_layers = 2;
  o.n_heads = 2;
  o.d_model = 16;
  o.d_ff = 64;
  o.init_std = 0.2;  // larger than GPT-2's 0.02 so that every path visibly shapes the logits
  o.seed = 7;
  return o;
}

}  // namespace model_test
