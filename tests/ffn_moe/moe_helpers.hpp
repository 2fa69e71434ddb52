// Shared helpers of the ffn_moe registry tests: the plugin files loaded through the host
// registry, layer contexts, parameter lookup and comparisons.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/ops.hpp"
#include "engine_host.hpp"
#include "patchbay/testing/feedforward_conformance.hpp"
#include "runtime/feedforward_handle.hpp"

namespace moe_test {

namespace rt = patchbay::runtime;
namespace eng = patchbay::engine;
namespace pt = patchbay::testing;

struct Loaded {
  rt::Registry registry{patchbay::test::engine_host_api()};
  Loaded() {
    registry.scan_file(patchbay::test::built_plugin("ffn_moe.so"));
    registry.scan_file(patchbay::test::built_plugin("ffn_mlp.so"));
    REQUIRE(registry.refused().empty());
  }
  const pb_component_descriptor& descriptor(const std::string& name) {
    return *registry.find(PB_KIND_FEEDFORWARD, name).descriptor;
  }
  rt::FeedForwardHandle make(const std::string& name, rt::ComponentConfig& config) {
    return rt::FeedForwardHandle(registry.create(PB_KIND_FEEDFORWARD, name, config.view()),
                                 registry.host());
  }
};

inline pb_layer_context context(int64_t d_model, int64_t d_ff, uint64_t seed, bool causal = true) {
  pb_layer_context ctx = pt::feedforward_test_context();
  ctx.d_model = d_model;
  ctx.d_ff = d_ff;
  ctx.seed = seed;
  ctx.causal = causal ? 1 : 0;
  return ctx;
}

inline eng::Tensor param(const std::vector<rt::FeedForwardHandle::Parameter>& params,
                         const std::string& name) {
  for (const auto& p : params)
    if (p.name == name) return p.tensor;
  FAIL("no parameter " << name);
  return {};
}

inline double max_abs_diff(const eng::Tensor& a, const eng::Tensor& b) {
  const std::vector<float> va = a.to_vector(), vb = b.to_vector();
  REQUIRE(va.size() == vb.size());
  double worst = 0;
  for (size_t i = 0; i < va.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(va[i]) - vb[i]));
  return worst;
}

inline const std::vector<float>& stat(const rt::FeedForwardHandle::Output& out,
                                      const std::string& name) {
  for (const auto& s : out.stats)
    if (s.name == name) return s.values;
  FAIL("no statistic " << name);
  return out.stats.front().values;
}

// Sets an environment variable for its lifetime (the engine reads PATCHBAY_BATCH_INVARIANCE
// at every matmul), restoring the former value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace moe_test
