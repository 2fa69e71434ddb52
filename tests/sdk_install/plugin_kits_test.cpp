// Every SDK conformance kit run on the built-in plugins' .so files through the engine test
// host (patchbay::testing, the shared library a third party links from an installed prefix):
// the in-tree plugins take the same path as out-of-tree ones. Plugin files come from this
// build's plugin folder (PATCHBAY_PLUGIN_PATH, set by patchbay_add_test). Small shapes, so
// the whole file runs in about a second.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "patchbay/testing/attention_conformance.hpp"
#include "patchbay/testing/engine_host.hpp"
#include "patchbay/testing/feedforward_conformance.hpp"
#include "patchbay/testing/optimizer_conformance.hpp"
#include "patchbay/testing/parallelism_conformance.hpp"
#include "patchbay/testing/sampler_conformance.hpp"
#include "patchbay/testing/tokenizer_conformance.hpp"

namespace pt = patchbay::testing;

namespace {

std::string plugin(const std::string& file) {
  const char* dir = std::getenv("PATCHBAY_PLUGIN_PATH");
  REQUIRE_MESSAGE(dir != nullptr, "PATCHBAY_PLUGIN_PATH is not set (run through ctest)");
  return std::string(dir) + "/" + file;
}

}  // namespace

TEST_CASE("engine test host: a host with the ops table, and clear refusals") {
  const pb_host_api* host = pt::engine_host();
  REQUIRE(host != nullptr);
  CHECK(host->ops != nullptr);
  CHECK(host->ops->version >= 2);
  try {
    pt::load_component(plugin("no_such_plugin.so"), PB_KIND_ATTENTION, "dense");
    FAIL("a missing file must throw");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("no_such_plugin.so' does not exist") != std::string::npos);
  }
  try {
    pt::load_component(plugin("attention_dense.so"), PB_KIND_ATTENTION, "dnese");
    FAIL("an unknown component must throw");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("dnese") != std::string::npos);
  }
}

TEST_CASE("tokenizer kit: char") {
  const pb_component_descriptor& c = pt::load_component(plugin("tokenizer_char.so"), PB_KIND_TOKENIZER, "char");
  pt::TokenizerConformanceOptions options;
  for (int i = 0; i < 40; ++i) options.training_text += "In the beginning was the word. Grüße, 世界! ";
  options.random_trials = 10;
  pt::check_tokenizer_conformance(pt::factory_for(c, pt::TokenizerConfig(c)), options);
}

TEST_CASE("attention kit: dense") {
  const pb_component_descriptor& c = pt::load_component(plugin("attention_dense.so"), PB_KIND_ATTENTION, "dense");
  pt::check_attention_conformance(
      [&c] {
        void* object = pt::create_object(c, &pt::default_config(c));
        return pt::AttentionUnderTest(static_cast<const pb_attention_vtable*>(c.vtable), object,
                                      pt::engine_host(), [&c, object] { c.destroy(object); });
      },
      pt::AttentionConformanceOptions{});
}

TEST_CASE("feed-forward kit: mlp") {
  const pb_component_descriptor& c = pt::load_component(plugin("ffn_mlp.so"), PB_KIND_FEEDFORWARD, "mlp");
  const auto report = pt::check_feedforward_conformance(c, &pt::default_config(c), pt::engine_host());
  CHECK_MESSAGE(report.ok(), report.message());
}

TEST_CASE("optimizer kit: sgd (plain: p <- p - lr g)") {
  const pb_component_descriptor& c = pt::load_component(plugin("optimizers_basic.so"), PB_KIND_OPTIMIZER, "sgd");
  pt::OptimizerCase sgd;
  sgd.params = {{"w", {3}, {1.0f, -2.0f, 0.5f}}};
  sgd.lrs = {0.1, 0.2};
  sgd.grads = {{{1.0f, 0.5f, -1.0f}}, {{2.0f, 0.0f, 1.0f}}};
  sgd.expected = {{{0.9, -2.05, 0.6}}, {{0.5, -2.05, 0.4}}};
  const auto report = pt::check_optimizer_conformance(c, &pt::default_config(c), pt::engine_host(), sgd);
  CHECK_MESSAGE(report.ok(), report.message());
}

TEST_CASE("sampler kit: top_k") {
  const pb_component_descriptor& c = pt::load_component(plugin("sampler_basic.so"), PB_KIND_SAMPLER, "top_k");
  const auto failures = pt::check_sampler_conformance(c, &pt::default_config(c), pt::engine_host());
  CHECK_MESSAGE(failures.empty(), pt::join_failures(failures));
}

TEST_CASE("parallelism kit: single") {
  const pb_component_descriptor& c = pt::load_component(plugin("parallel_single.so"), PB_KIND_PARALLELISM, "single");
  const auto report = pt::check_parallelism_conformance(c, &pt::default_config(c), pt::engine_host());
  CHECK_MESSAGE(report.ok(), report.message());
}
