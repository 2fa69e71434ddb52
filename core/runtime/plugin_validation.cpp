// Plugin validation (see plugin_validation.hpp). The rules are those of sdk/ABI.md:
// same ABI major, plugin minor <= host minor, min host version <= host, struct_size at least
// the ABI 1.0 layout, required callbacks non-null, kind known with an acceptable interface
// version, names [a-z0-9_-]+, and a descriptor that says what the metadata says.
#include "runtime/plugin_validation.hpp"

#include <cstddef>
#include <set>

#include "common/error.hpp"
#include "runtime/component_config.hpp"

namespace patchbay::runtime {
namespace {

// Smallest struct_size accepted for each struct: the ABI 1.0 layouts, frozen by
// tests/loader/abi_layout_test.cpp. A later minor appends fields and keeps these minimums.
constexpr size_t kPluginDescriptorSize10 =
    offsetof(pb_plugin_descriptor, component_count) + sizeof(size_t);
constexpr size_t kComponentDescriptorSize10 =
    offsetof(pb_component_descriptor, vtable) + sizeof(const void*);
constexpr size_t kConfigFieldSize10 = offsetof(pb_config_field, doc) + sizeof(const char*);

std::string version_text(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

void check_abi(uint32_t major, uint32_t minor, std::vector<std::string>& problems) {
  const std::string plugin_abi = version_text(major, minor);
  const std::string host_abi = version_text(PB_ABI_VERSION_MAJOR, PB_ABI_VERSION_MINOR);
  if (major != PB_ABI_VERSION_MAJOR) {
    problems.push_back("built against Patchbay ABI " + plugin_abi +
                       " but this host implements ABI " + host_abi +
                       " (another major version is incompatible); rebuild the plugin "
                       "against this host's SDK");
  } else if (minor > PB_ABI_VERSION_MINOR) {
    problems.push_back("built against Patchbay ABI " + plugin_abi +
                       ", newer than this host's ABI " + host_abi +
                       "; upgrade Patchbay or rebuild the plugin against this host's SDK");
  }
}

void check_interface(const std::string& what, const KindInterface& kind, uint32_t major,
                     uint32_t minor, std::vector<std::string>& problems) {
  if (major != kind.interface_major || minor > kind.interface_minor) {
    problems.push_back(what + " implements " + kind.name + " interface " +
                       version_text(major, minor) + " but this host speaks " +
                       version_text(kind.interface_major, kind.interface_minor) +
                       " (same major, minor not newer); rebuild it against this host's SDK");
  }
}

std::string known_kinds() {
  std::string out;
  for (const KindInterface& k : kind_interfaces()) {
    out += (out.empty() ? "" : ", ") + std::string(k.name) + " " +
           version_text(k.interface_major, k.interface_minor);
  }
  return out;
}

const char* or_null(const char* s) { return s != nullptr ? s : "(NULL)"; }

constexpr const char* kFillIt =
    "; set it (make_tokenizer_component and the other SDK helpers fill every callback)";

}  // namespace

const KindInterface* kind_interface(pb_component_kind kind) {
  for (const KindInterface& k : kind_interfaces()) {
    if (k.kind == kind) return &k;
  }
  return nullptr;
}

const KindInterface* kind_interface(std::string_view name) {
  for (const KindInterface& k : kind_interfaces()) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

std::vector<std::string> validate_metadata(const PluginMetadata& m, Version host) {
  std::vector<std::string> problems;
  check_abi(m.abi_major, m.abi_minor, problems);
  const Version needed{m.min_host_major, m.min_host_minor, m.min_host_patch};
  if (host < needed) {
    problems.push_back("needs Patchbay " + needed.str() + " or newer, this host is " + host.str() +
                       "; upgrade Patchbay");
  }
  if (!valid_plugin_name(m.name)) {
    problems.push_back("plugin name '" + m.name + "' is not [a-z0-9_-]+; rename the plugin");
  }
  if (m.components.empty()) problems.push_back("provides no components");
  std::set<std::pair<std::string, std::string>> seen;
  for (const ComponentMetadata& c : m.components) {
    const std::string what = c.kind + " '" + c.name + "'";
    const KindInterface* kind = kind_interface(c.kind);
    if (kind == nullptr) {
      problems.push_back("component " + what + " has a kind this host does not know (known: " +
                         known_kinds() + "); upgrade Patchbay");
    } else {
      check_interface("component " + what, *kind, c.interface_major, c.interface_minor, problems);
    }
    if (!valid_plugin_name(c.name)) {
      problems.push_back("component name '" + c.name + "' is not [a-z0-9_-]+; rename it");
    }
    if (!seen.insert({c.kind, c.name}).second) {
      problems.push_back("component " + what + " is declared twice");
    }
  }
  return problems;
}

std::vector<std::string> validate_descriptor(const pb_plugin_descriptor* d, const PluginMetadata& m,
                                             Version host) {
  if (d == nullptr) return {"the entry '" PB_PLUGIN_ENTRY_SYMBOL "' returned NULL"};
  if (d->struct_size < kPluginDescriptorSize10) {
    return {"pb_plugin_descriptor struct_size " + std::to_string(d->struct_size) +
            " is smaller than the ABI 1.0 layout (" + std::to_string(kPluginDescriptorSize10) +
            " bytes); rebuild the plugin against this host's SDK"};
  }
  std::vector<std::string> problems;
  check_abi(d->abi_major, d->abi_minor, problems);
  if (!problems.empty()) return problems;  // nothing else can be read safely

  // What the descriptor says, in the metadata's shape, to compare and validate alike.
  PluginMetadata said;
  said.name = or_null(d->name);
  said.version = or_null(d->version);
  said.abi_major = d->abi_major;
  said.abi_minor = d->abi_minor;
  said.min_host_major = d->min_host_major;
  said.min_host_minor = d->min_host_minor;
  said.min_host_patch = d->min_host_patch;
  if (d->component_count > 0 && d->components == nullptr) {
    return {"descriptor has component_count " + std::to_string(d->component_count) +
            " but components is NULL"};
  }
  for (size_t i = 0; i < d->component_count; ++i) {
    const pb_component_descriptor* c = d->components[i];
    const std::string where = "component #" + std::to_string(i);
    if (c == nullptr) {
      problems.push_back(where + " is a NULL pointer");
      continue;
    }
    if (c->struct_size < kComponentDescriptorSize10) {
      problems.push_back(where + ": pb_component_descriptor struct_size " +
                         std::to_string(c->struct_size) + " is smaller than the ABI 1.0 layout (" +
                         std::to_string(kComponentDescriptorSize10) + " bytes)");
      continue;
    }
    const KindInterface* kind = kind_interface(c->kind);
    const std::string kind_text = kind != nullptr ? kind->name : "kind " + std::to_string(c->kind);
    const std::string what = "component " + kind_text + " '" + or_null(c->name) + "'";
    said.components.push_back(ComponentMetadata{kind_text, or_null(c->name), or_null(c->version),
                                                c->interface_major, c->interface_minor});
    if (c->version == nullptr) problems.push_back(what + ": version is NULL");
    if (c->create == nullptr)
      problems.push_back(what + ": required callback 'create' is NULL" + kFillIt);
    if (c->destroy == nullptr)
      problems.push_back(what + ": required callback 'destroy' is NULL" + kFillIt);
    if (c->vtable == nullptr) {
      problems.push_back(what + ": required 'vtable' is NULL" + kFillIt);
    } else if (kind != nullptr) {
      for (const std::string& p : kind->check_vtable(c->vtable))
        problems.push_back(what + ": " + p);
    }
    if (c->config_field_count > 0 && c->config_fields == nullptr) {
      problems.push_back(what + ": config_field_count is " + std::to_string(c->config_field_count) +
                         " but config_fields is NULL");
    } else if (c->config_field_count > 0 && c->config_fields->struct_size < kConfigFieldSize10) {
      problems.push_back(what + ": pb_config_field struct_size " +
                         std::to_string(c->config_fields->struct_size) +
                         " is smaller than the ABI 1.0 layout");
    } else {
      try {
        ComponentConfig defaults(*c);  // keys unique, defaults parse and lie in range
      } catch (const Error& e) {
        problems.push_back(std::string(e.what()) +
                           " (checking the schema's defaults; fix the component's schema)");
      }
    }
  }
  for (const std::string& p : validate_metadata(said, host)) {
    if (p.rfind("built against", 0) != 0) problems.push_back(p);  // ABI already reported
  }

  // Agreement with the metadata the host read before loading.
  auto mismatch = [&](const std::string& field, const std::string& in_meta,
                      const std::string& in_desc) {
    if (in_meta != in_desc) {
      problems.push_back("metadata and descriptor disagree on " + field + ": metadata says '" +
                         in_meta + "', descriptor says '" + in_desc +
                         "'; rebuild the plugin (both come from PATCHBAY_PLUGIN) and do not "
                         "edit either by hand");
    }
  };
  mismatch("the plugin name", m.name, said.name);
  mismatch("the plugin version", m.version, said.version);
  mismatch("the ABI version", version_text(m.abi_major, m.abi_minor),
           version_text(said.abi_major, said.abi_minor));
  mismatch("the minimum host version",
           Version{m.min_host_major, m.min_host_minor, m.min_host_patch}.str(),
           Version{said.min_host_major, said.min_host_minor, said.min_host_patch}.str());
  auto component_list = [](const PluginMetadata& p) {
    std::string out;
    for (const ComponentMetadata& c : p.components) {
      out += (out.empty() ? "" : ", ") + c.kind + " " + c.name + " " + c.version + " " +
             version_text(c.interface_major, c.interface_minor);
    }
    return out;
  };
  mismatch("the components", component_list(m), component_list(said));
  return problems;
}

}  // namespace patchbay::runtime
