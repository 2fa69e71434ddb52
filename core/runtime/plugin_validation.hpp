// Validation of what a plugin declares (private to the runtime). Each function returns the
// problems found, each one sentence saying what is wrong and what to do; empty means valid.
// The registry prefixes the file name.
#pragma once

#include <string>
#include <vector>

#include "patchbay/plugin.h"
#include "runtime/host_api.hpp"
#include "runtime/plugin_metadata.hpp"

namespace patchbay::runtime {

// Interfaces this host implements, one per kind, with the interface version it speaks.
struct KindInterface {
  pb_component_kind kind;
  const char* name;  // "tokenizer"
  uint32_t interface_major;
  uint32_t interface_minor;
  // Checks the kind's vtable (non-null, struct_size, required functions).
  std::vector<std::string> (*check_vtable)(const void* vtable);
};
const std::vector<KindInterface>& kind_interfaces();
const KindInterface* kind_interface(pb_component_kind kind);
const KindInterface* kind_interface(std::string_view name);

// Before loading: ABI and host versions, names, kinds, interface versions.
std::vector<std::string> validate_metadata(const PluginMetadata& metadata, Version host);

// After loading: the descriptor the entry returned, and its agreement with the metadata.
std::vector<std::string> validate_descriptor(const pb_plugin_descriptor* descriptor,
                                             const PluginMetadata& metadata, Version host);

}  // namespace patchbay::runtime
