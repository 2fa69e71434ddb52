// Patchbay SDK testing: the engine test host, for running a conformance kit (or a plugin
// author's own tests) against a built plugin .so outside the Patchbay source tree.
//
// Declared here, implemented by the shared library libpatchbay_testing.so of the installed
// package: link the CMake target patchbay::testing (find_package(Patchbay) provides it; the
// Patchbay tree defines the same name) and nothing else — it brings the tensor engine
// (oneDNN, OpenMP), the plugin loader and doctest's include folder.
//
//   #include <patchbay/testing/engine_host.hpp>
//   namespace pt = patchbay::testing;
//   const pb_host_api* host = pt::engine_host();          // pb_host_api with ops != NULL
//   const pb_component_descriptor& c =
//       pt::load_component("build/my_plugin.so", PB_KIND_ATTENTION, "mine");
//   void* object = pt::create_object(c, &view, host);      // view: any pb_config_view
//
// engine_host() is the host the `patchbay` CLI hands plugins: spdlog logging, the 64-byte
// aligned allocator, host status objects and the engine's ops table (sdk ops.h), with status
// objects shared by both sides. load_component() loads a plugin file through the host's
// registry (metadata, ABI and descriptor validation exactly as `patchbay` does) and keeps
// it loaded until the process exits, so descriptors and objects never outlive their code.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>

#include "patchbay/component.h"
#include "patchbay/host.h"
#include "patchbay/ops.h"

#if defined(PATCHBAY_TESTING_BUILD)
#define PB_TESTING_API __attribute__((visibility("default")))
#else
#define PB_TESTING_API
#endif

extern "C" {
// The engine host (never NULL; lives for the whole process).
PB_TESTING_API const pb_host_api* pb_testing_engine_host(void);
// Loads `plugin_file` (once per path; kept loaded) and returns the descriptor of component
// (`kind`, `name`), or NULL with the reason written (NUL-terminated, truncated) to `error`.
PB_TESTING_API const pb_component_descriptor* pb_testing_load_component(
    const char* plugin_file, pb_component_kind kind, const char* name, char* error,
    size_t error_size);
// A view holding every schema default of `component` (owned by the host, valid for the
// process). NULL with the reason in `error` when a key has no default (a required key).
PB_TESTING_API const pb_config_view* pb_testing_default_config(
    const pb_component_descriptor* component, char* error, size_t error_size);
}

namespace patchbay::testing {

inline const pb_host_api* engine_host() { return pb_testing_engine_host(); }

// Throws std::runtime_error naming the file and the problem.
inline const pb_component_descriptor& load_component(const std::string& plugin_file,
                                                     pb_component_kind kind,
                                                     const std::string& name) {
  char error[2048] = {0};
  const pb_component_descriptor* d =
      pb_testing_load_component(plugin_file.c_str(), kind, name.c_str(), error, sizeof(error));
  if (d == nullptr) throw std::runtime_error(error);
  return *d;
}

// The schema defaults of `component` as a view pointer, the form ConfigBuilder::view(),
// create_object() and every check_*_conformance() use: `pt::create_object(c,
// pt::default_view(c))`. Throws when a key is required (set it with a ConfigBuilder instead).
// The view lives as long as the engine test host.
inline const pb_config_view* default_view(const pb_component_descriptor& component) {
  char error[2048] = {0};
  const pb_config_view* v = pb_testing_default_config(&component, error, sizeof(error));
  if (v == nullptr) throw std::runtime_error(error);
  return v;
}

// The same defaults as a reference (the older spelling: `&pt::default_config(c)`); kept so
// existing tests build unchanged.
inline const pb_config_view& default_config(const pb_component_descriptor& component) {
  return *default_view(component);
}

// Calls component.create; throws with the plugin's status message on failure. The caller
// releases the object with component.destroy (or owns it through make_owned()).
inline void* create_object(const pb_component_descriptor& component, const pb_config_view* config,
                           const pb_host_api* host = engine_host()) {
  void* object = nullptr;
  pb_status* st = component.create(host, config, &object);
  if (st != nullptr) {
    const std::string message = std::string("create of '") + component.name +
                                "' failed: " + host->status_message(st);
    host->status_free(st);
    throw std::runtime_error(message);
  }
  return object;
}

inline std::shared_ptr<void> make_owned(const pb_component_descriptor& component, void* object) {
  return std::shared_ptr<void>(object, [destroy = component.destroy](void* p) {
    if (p != nullptr) destroy(p);
  });
}

}  // namespace patchbay::testing
