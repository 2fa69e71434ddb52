// engine_host(): the runtime's host services with the engine's ops table (see header).
#include "optimizer_test_host.hpp"

#include "engine/ops_table.hpp"
#include "runtime/host_api.hpp"

namespace optimizer_tests {

const pb_host_api* engine_host() {
  static const pb_host_api api =
      patchbay::runtime::make_host_api(patchbay::engine::host_ops_table());
  return &api;
}

}  // namespace optimizer_tests
