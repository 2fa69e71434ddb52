// The SDK's sampler conformance kit (patchbay/testing/sampler_conformance.hpp) on every
// sampler_basic component: directly through its descriptor with several configs, and through
// the built sampler_basic.so loaded with Boost.DLL exactly as the host does (entry alias ->
// plugin descriptor -> components). Two deliberately broken samplers check that the kit
// itself catches what it claims to (a clone that restarts, as llama.cpp's mirostat v1 clone
// does, and a processor that raises removed tokens).
#include <doctest/doctest.h>

#define BOOST_DLL_USE_STD_FS
#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <set>
#include <string>

#include "frequency_penalty.hpp"
#include "greedy.hpp"
#include "logits_math.hpp"
#include "min_p.hpp"
#include "mirostat_v1.hpp"
#include "mirostat_v2.hpp"
#include "no_repeat_ngram.hpp"
#include "patchbay/plugin.h"
#include "patchbay/testing/sampler_conformance.hpp"
#include "presence_penalty.hpp"
#include "repetition_penalty.hpp"
#include "sample.hpp"
#include "temperature.hpp"
#include "top_k.hpp"
#include "top_p.hpp"
#include "typical.hpp"

namespace pt = patchbay::testing;
using namespace sampler_basic;

namespace {

void expect_conformant(const pb_component_descriptor& d,
                       const std::function<void(pt::SamplerConfig&)>& configure = {}) {
  pt::SamplerConfig config(d);
  if (configure) configure(config);
  REQUIRE(config.missing().empty());
  const std::vector<std::string> failures = pt::check_sampler_conformance(d, config.view());
  CHECK_MESSAGE(failures.empty(), pt::join_failures(failures));
}

}  // namespace

TEST_CASE("every processor passes the conformance kit") {
  expect_conformant(kTemperature);
  expect_conformant(kTemperature, [](auto& c) { c.set_float("temperature", 0.05); });
  expect_conformant(kTopK, [](auto& c) { c.set_int("k", 5); });
  expect_conformant(kTopK, [](auto& c) { c.set_int("k", 1); });
  expect_conformant(kTopP);
  expect_conformant(kTopP, [](auto& c) { c.set_float("p", 0.0); });
  expect_conformant(kMinP, [](auto& c) { c.set_float("min_p", 0.3); });
  expect_conformant(kTypical, [](auto& c) { c.set_float("mass", 0.3); });
  expect_conformant(kRepetitionPenalty, [](auto& c) { c.set_float("penalty", 1.3); });
  expect_conformant(kRepetitionPenalty, [](auto& c) { c.set_int("last_n", 4); });
  expect_conformant(kFrequencyPenalty, [](auto& c) { c.set_float("penalty", 2.0); });
  expect_conformant(kPresencePenalty,
                    [](auto& c) { c.set_float("penalty", -2.0).set_bool("include_prompt", true); });
  expect_conformant(kNoRepeatNgram);
  expect_conformant(kNoRepeatNgram, [](auto& c) { c.set_int("n", 1); });
}

TEST_CASE("every selector passes the conformance kit") {
  expect_conformant(kGreedy);
  expect_conformant(kSample);
  expect_conformant(kSample, [](auto& c) { c.set_int("seed", -3); });
  expect_conformant(kMirostatV1);
  expect_conformant(kMirostatV1, [](auto& c) { c.set_float("tau", 1.5).set_int("m", 2); });
  expect_conformant(kMirostatV2);
  expect_conformant(kMirostatV2, [](auto& c) { c.set_float("tau", 1.5).set_float("eta", 1.0); });
}

TEST_CASE("create refuses a temperature of 0 with a status naming the greedy selector") {
  pt::SamplerConfig config(kTemperature);
  config.set_float("temperature", 0.0);
  const pb_host_api* host = pt::sampler_test_host();
  void* object = reinterpret_cast<void*>(1);
  pb_status* status = kTemperature.create(host, config.view(), &object);
  REQUIRE(status != nullptr);
  CHECK(object == nullptr);
  CHECK(host->status_code(status) == PB_STATUS_INVALID_ARGUMENT);
  CHECK(std::string(host->status_message(status)).find("greedy") != std::string::npos);
  host->status_free(status);
}

TEST_CASE("sampler_basic.so loads through its entry alias and every component conforms") {
  std::filesystem::path file = SAMPLER_BASIC_SO;
  if (const char* dir = std::getenv("PATCHBAY_PLUGIN_PATH")) {
    if (std::filesystem::exists(std::filesystem::path(dir) / "sampler_basic.so"))
      file = std::filesystem::path(dir) / "sampler_basic.so";
  }
  boost::dll::shared_library library(file);
  const auto entry = library.get_alias<const pb_plugin_descriptor*()>(PB_PLUGIN_ENTRY_SYMBOL);
  const pb_plugin_descriptor* plugin = entry();
  REQUIRE(plugin != nullptr);
  CHECK(std::string(plugin->name) == "sampler_basic");
  CHECK(plugin->abi_major == PB_ABI_VERSION_MAJOR);
  std::set<std::string> names;
  for (size_t i = 0; i < plugin->component_count; ++i) {
    const pb_component_descriptor& d = *plugin->components[i];
    CHECK(d.kind == PB_KIND_SAMPLER);
    CHECK(d.interface_major == PB_SAMPLER_INTERFACE_MAJOR);
    CHECK(d.interface_minor == PB_SAMPLER_INTERFACE_MINOR);
    names.insert(d.name);
    CAPTURE(d.name);
    expect_conformant(d);
  }
  CHECK(names == std::set<std::string>{"temperature", "top_k", "top_p", "min_p", "typical",
                                       "repetition_penalty", "frequency_penalty",
                                       "presence_penalty", "no_repeat_ngram", "greedy", "sample",
                                       "mirostat_v1", "mirostat_v2"});
}

// ---- the kit catches broken samplers ---------------------------------------------------

namespace {

// A selector whose copy restarts its generator: llama.cpp's mirostat v1 clone bug in
// miniature (the copy gets the state of a freshly created object).
class RestartingClone : public patchbay::Sampler {
 public:
  static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_SELECTOR | PB_SAMPLER_CAP_STATEFUL;
  RestartingClone(const patchbay::Host&, const patchbay::ConfigView&) {}
  RestartingClone(const RestartingClone&) : rng_(1) {}
  int32_t select(std::span<const float> logits) override {
    check_logits(logits, "restarting_clone");
    if (std::none_of(logits.begin(), logits.end(), [](float z) { return std::isfinite(z); }))
      throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT, "no finite logit");
    for (;;) {
      const size_t i = static_cast<size_t>(rng_.next() % logits.size());
      if (std::isfinite(logits[i])) return static_cast<int32_t>(i);
    }
  }
  void reset() override { rng_ = SplitMix64(1); }

 private:
  SplitMix64 rng_{1};
};

// A processor that brings removed tokens back.
class RaisesRemoved : public patchbay::Sampler {
 public:
  static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_PROCESSOR;
  RaisesRemoved(const patchbay::Host&, const patchbay::ConfigView&) {}
  void apply(std::span<float> logits, std::span<const int32_t>, size_t) override {
    check_logits(logits, "raises_removed");
    for (float& z : logits) z = std::isfinite(z) ? z : 0.0f;
  }
};

constexpr pb_component_descriptor kRestartingClone =
    patchbay::make_sampler_component<RestartingClone>("restarting_clone", "0.0.1", "broken");
constexpr pb_component_descriptor kRaisesRemoved =
    patchbay::make_sampler_component<RaisesRemoved>("raises_removed", "0.0.1", "broken");

bool mentions(const std::vector<std::string>& failures, const std::string& phrase) {
  for (const std::string& f : failures) {
    if (f.find(phrase) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("the kit reports a clone that does not continue as its original") {
  pt::SamplerConfig config(kRestartingClone);
  const auto failures = pt::check_sampler_conformance(kRestartingClone, config.view());
  CHECK(mentions(failures, "clone does not continue"));
}

TEST_CASE("the kit reports a processor that raises removed tokens") {
  pt::SamplerConfig config(kRaisesRemoved);
  const auto failures = pt::check_sampler_conformance(kRaisesRemoved, config.view());
  CHECK(mentions(failures, "raised removed token"));
}
