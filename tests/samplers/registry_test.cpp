// sampler_basic.so through the host's plugin registry (core/runtime): the host loads and
// validates it, finds every component, builds configs from the declared schemas (defaults and
// ranges), and each component passes the conformance kit with the host's own pb_host_api.
#include "runtime/registry.hpp"

#include <doctest/doctest.h>

#include <string>

#include "patchbay/sampler.h"
#include "patchbay/testing/sampler_conformance.hpp"

namespace rt = patchbay::runtime;
namespace pt = patchbay::testing;

namespace {

const char* const kComponents[] = {"temperature",
                                   "top_k",
                                   "top_p",
                                   "min_p",
                                   "typical",
                                   "repetition_penalty",
                                   "frequency_penalty",
                                   "presence_penalty",
                                   "no_repeat_ngram",
                                   "greedy",
                                   "sample",
                                   "mirostat_v1",
                                   "mirostat_v2"};

}  // namespace

TEST_CASE("the registry loads sampler_basic.so and every component conforms through the host") {
  rt::Registry registry;
  registry.scan_file(SAMPLER_BASIC_SO);
  REQUIRE(registry.refused().empty());
  for (const char* name : kComponents) {
    CAPTURE(name);
    const rt::ComponentEntry& entry = registry.find(PB_KIND_SAMPLER, name);
    CHECK(entry.interface_major == PB_SAMPLER_INTERFACE_MAJOR);
    rt::ComponentConfig config(*entry.descriptor);
    const auto failures =
        pt::check_sampler_conformance(*entry.descriptor, &config.view(), registry.host());
    CHECK_MESSAGE(failures.empty(), pt::join_failures(failures));
  }
}

TEST_CASE("the host enforces the declared ranges and carries create()'s refusal") {
  rt::Registry registry;
  registry.scan_file(SAMPLER_BASIC_SO);
  rt::ComponentConfig top_p(*registry.find(PB_KIND_SAMPLER, "top_p").descriptor);
  CHECK_THROWS(top_p.set_float("p", 1.5));

  rt::ComponentConfig temperature(*registry.find(PB_KIND_SAMPLER, "temperature").descriptor);
  temperature.set_float("temperature", 0.0);
  std::string message;
  try {
    registry.create(PB_KIND_SAMPLER, "temperature", temperature.view());
  } catch (const patchbay::Error& e) {
    message = e.what();
  }
  CHECK(message.find("use the `greedy` selector") != std::string::npos);
}
