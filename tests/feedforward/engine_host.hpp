// Test helpers shared by the feed-forward tests: the host api with the engine's ops table and
// a registry holding one plugin file from this build's plugin folder (PATCHBAY_PLUGIN_PATH,
// set by patchbay_add_test).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include "engine/ops_table.hpp"
#include "runtime/registry.hpp"

namespace patchbay::test {

// The process-wide host api with the engine attached (lives forever, as plugin objects need).
inline const pb_host_api* engine_host_api() {
  static const pb_host_api api = runtime::make_host_api(engine::host_ops_table());
  return &api;
}

inline std::filesystem::path built_plugin(const std::string& file_name) {
  const char* dir = std::getenv("PATCHBAY_PLUGIN_PATH");
  return std::filesystem::path(dir != nullptr ? dir : ".") / file_name;
}

}  // namespace patchbay::test
