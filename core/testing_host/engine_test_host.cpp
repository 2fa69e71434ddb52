// libpatchbay_testing.so: the engine test host declared in sdk/include/patchbay/testing/
// engine_host.hpp. Wires the process host api (core/runtime) to the engine's ops table with
// shared status functions, as the CLI does, and loads plugin files through the runtime's
// Registry (same validation as `patchbay`). Registries and default configs are kept until
// the process exits (never unloaded: kit objects may be destroyed in static destructors).
#include "patchbay/testing/engine_host.hpp"

#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>

#include "engine/ops_table.hpp"
#include "runtime/registry.hpp"

namespace rt = patchbay::runtime;

namespace {

std::mutex& host_mutex() {
  static std::mutex m;
  return m;
}

void write_error(char* error, size_t error_size, const std::string& text) {
  if (error == nullptr || error_size == 0) return;
  const size_t n = std::min(text.size(), error_size - 1);
  std::memcpy(error, text.data(), n);
  error[n] = '\0';
}

const pb_host_api* wired_host() {
  static const pb_host_api* host = [] {
    rt::set_host_ops(patchbay::engine::host_ops_table());
    const pb_host_api* h = rt::host_api();
    patchbay::engine::set_ops_status_functions(
        {h->status_create, h->status_code, h->status_message, h->status_free});
    return h;
  }();
  return host;
}

// One registry per plugin file (canonical path), leaked on purpose: see the opening comment.
std::map<std::string, rt::Registry*>& registries() {
  static auto* m = new std::map<std::string, rt::Registry*>();
  return *m;
}

}  // namespace

extern "C" const pb_host_api* pb_testing_engine_host(void) {
  std::lock_guard<std::mutex> lock(host_mutex());
  return wired_host();
}

extern "C" const pb_component_descriptor* pb_testing_load_component(const char* plugin_file,
                                                                    pb_component_kind kind,
                                                                    const char* name,
                                                                    char* error,
                                                                    size_t error_size) {
  std::lock_guard<std::mutex> lock(host_mutex());
  try {
    const pb_host_api* host = wired_host();
    if (plugin_file == nullptr || name == nullptr) {
      write_error(error, error_size, "pb_testing_load_component: plugin_file and name must not be NULL");
      return nullptr;
    }
    const std::filesystem::path file(plugin_file);
    if (!std::filesystem::exists(file)) {
      write_error(error, error_size,
                  "plugin file '" + file.string() +
                      "' does not exist; build the plugin first and pass the path of its .so");
      return nullptr;
    }
    const std::string key = std::filesystem::canonical(file).string();
    rt::Registry*& registry = registries()[key];
    if (registry == nullptr) {
      registry = new rt::Registry(host);
      registry->scan_file(key);
    }
    if (!registry->refused().empty()) {
      write_error(error, error_size, registry->refused().front().reason);
      return nullptr;
    }
    return registry->find(kind, name).descriptor;
  } catch (const std::exception& e) {
    write_error(error, error_size, e.what());
    return nullptr;
  }
}

extern "C" const pb_config_view* pb_testing_default_config(const pb_component_descriptor* component,
                                                           char* error, size_t error_size) {
  std::lock_guard<std::mutex> lock(host_mutex());
  try {
    if (component == nullptr) {
      write_error(error, error_size, "pb_testing_default_config: component must not be NULL");
      return nullptr;
    }
    static auto* configs = new std::map<const pb_component_descriptor*, rt::ComponentConfig*>();
    rt::ComponentConfig*& config = (*configs)[component];
    if (config == nullptr) {
      auto* made = new rt::ComponentConfig(*component);
      made->check_complete();
      config = made;
    }
    return &config->view();
  } catch (const std::exception& e) {
    write_error(error, error_size, e.what());
    return nullptr;
  }
}
