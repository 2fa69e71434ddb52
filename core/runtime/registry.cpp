// The plugin registry (contract in registry.hpp): scanning, loading, lookup, creation.
#include "runtime/registry.hpp"

#include <link.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <cstdint>
#include <stdexcept>

#include "patchbay/component.hpp"
#include "runtime/plugin_validation.hpp"

namespace patchbay::runtime {
namespace fs = std::filesystem;

namespace {

// A plugin whose entry symbol is not what PATCHBAY_PLUGIN exports: refused, never called.
struct BadEntry : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Whether `address` lies in an executable segment of the loaded object that also holds
// `anchor` (the entry alias itself): only then is it the plugin's own code.
bool in_code_of_same_object(const void* address, const void* anchor) {
  struct Query {
    uintptr_t address, anchor;
    bool anchor_here = false, address_in_code = false;
  } query{reinterpret_cast<uintptr_t>(address), reinterpret_cast<uintptr_t>(anchor)};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto& q = *static_cast<Query*>(data);
        bool anchor_here = false, address_in_code = false;
        for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          const uintptr_t begin = info->dlpi_addr + ph.p_vaddr, end = begin + ph.p_memsz;
          if (q.anchor >= begin && q.anchor < end) anchor_here = true;
          if ((ph.p_flags & PF_X) != 0 && q.address >= begin && q.address < end)
            address_in_code = true;
        }
        if (!anchor_here) return 0;
        q.anchor_here = true;
        q.address_in_code = address_in_code;
        return 1;  // found the object: stop
      },
      &query);
  return query.anchor_here && query.address_in_code;
}

}  // namespace

// A loaded plugin library; the descriptor points into it.
class PluginLibrary {
 public:
  explicit PluginLibrary(const fs::path& file)
      : library_(file.string(),
                 boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local) {}
  const pb_plugin_descriptor* call_entry() {
    // The alias is a pointer variable holding the entry function's address. It is checked
    // before the call: NULL, or anything but code of this library (e.g. a plain function
    // exported under the alias's name, whose first instruction bytes would be read as the
    // address), is refused instead of jumped to.
    void* const* alias = &library_.get<void*>(PB_PLUGIN_ENTRY_SYMBOL);
    void* const target = *alias;
    if (target == nullptr)
      throw BadEntry(std::string("its entry '") + PB_PLUGIN_ENTRY_SYMBOL +
                     "' is a NULL pointer; export the entry with PATCHBAY_PLUGIN (sdk/ABI.md)");
    if (!in_code_of_same_object(target, alias))
      throw BadEntry(
          std::string("its entry '") + PB_PLUGIN_ENTRY_SYMBOL +
          "' does not point at code in the plugin (it must be Boost.DLL's alias, a pointer "
          "to the entry function, as PATCHBAY_PLUGIN exports it; sdk/ABI.md)");
    using Entry = const pb_plugin_descriptor* (*)();
    return reinterpret_cast<Entry>(target)();
  }

 private:
  boost::dll::shared_library library_;
};

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : separator) + s;
  return out;
}

}  // namespace

std::string kind_name(pb_component_kind kind) {
  const char* name = component_kind_name(kind);
  return name != nullptr ? name : "kind " + std::to_string(static_cast<int>(kind));
}

int kind_from_name(std::string_view name) {
  for (int k = PB_KIND_TOKENIZER; k <= PB_KIND_SAMPLER; ++k) {
    if (kind_name(static_cast<pb_component_kind>(k)) == name) return k;
  }
  return 0;
}

Registry::Registry(const pb_host_api* host) : host_(host) {}

Registry::~Registry() = default;

std::string Registry::refuse(const fs::path& file, const std::string& problem) {
  std::string reason = file.string() + ": " + problem;
  spdlog::debug("plugin refused: {}", reason);
  refused_.push_back(RefusedPlugin{file, reason});
  return reason;
}

void Registry::scan(const std::vector<fs::path>& search_path, LoadMode mode) {
  searched_.insert(searched_.end(), search_path.begin(), search_path.end());
  for (const fs::path& file : plugin_files(search_path)) examine(file, mode);
}

void Registry::scan_file(const fs::path& file, LoadMode mode) {
  searched_.push_back(file);
  examine(file, mode);
}

void Registry::examine(const fs::path& file, LoadMode mode) {
  for (const auto& p : plugins_) {
    if (p->file == file) return;  // already examined
  }
  for (const RefusedPlugin& r : refused_) {
    if (r.file == file) return;
  }
  PluginMetadata metadata;
  try {
    metadata = read_plugin_metadata(file);
  } catch (const std::exception& e) {
    refuse(file, e.what());
    return;
  }
  const std::vector<std::string> problems = validate_metadata(metadata, host_version());
  if (!problems.empty()) {
    refuse(file, join(problems, "; "));
    return;
  }
  for (const auto& p : plugins_) {
    if (p->metadata.name == metadata.name) {
      refuse(file, "plugin '" + metadata.name + "' is already loaded from " + p->file.string() +
                       " (earlier search-path entries win); remove one of the two files");
      return;
    }
    for (const ComponentMetadata& mine : metadata.components) {
      for (const ComponentMetadata& theirs : p->metadata.components) {
        if (mine.kind == theirs.kind && mine.name == theirs.name) {
          refuse(file, "provides " + mine.kind + " '" + mine.name + "', which plugin '" +
                           p->metadata.name + "' (" + p->file.string() +
                           ") already provides; component names must be unique per kind: "
                           "rename one of them or remove one file from the plugin path");
          return;
        }
      }
    }
  }
  auto entry = std::make_unique<PluginEntry>();
  entry->file = file;
  entry->metadata = metadata;
  for (const ComponentMetadata& c : metadata.components) {
    ComponentEntry component;
    component.kind = static_cast<pb_component_kind>(kind_from_name(c.kind));
    component.name = c.name;
    component.version = c.version;
    component.interface_major = c.interface_major;
    component.interface_minor = c.interface_minor;
    entry->components.push_back(std::move(component));
  }
  plugins_.push_back(std::move(entry));
  if (mode == LoadMode::kLoad) load(plugins_.size() - 1, /*throw_on_failure=*/false);
}

bool Registry::load(size_t index, bool throw_on_failure) {
  PluginEntry& entry = *plugins_[index];
  if (entry.loaded()) return true;
  std::string problem;
  try {
    auto library = std::make_shared<PluginLibrary>(entry.file);
    const pb_plugin_descriptor* descriptor = library->call_entry();
    const std::vector<std::string> problems =
        validate_descriptor(descriptor, entry.metadata, host_version());
    if (problems.empty()) {
      for (size_t i = 0; i < descriptor->component_count; ++i) {
        const pb_component_descriptor* c = descriptor->components[i];
        ComponentEntry& component = entry.components[i];  // same order: validated above
        component.descriptor = c;
        component.summary = c->summary != nullptr ? c->summary : "";
      }
      entry.library = std::move(library);
      return true;
    }
    problem = join(problems, "; ");
  } catch (const BadEntry& e) {
    problem = e.what();
  } catch (const std::exception& e) {
    problem = std::string("cannot be loaded: ") + e.what() +
              "; check that its dependencies are installed (ldd shows missing ones)";
  }
  const std::string reason = refuse(entry.file, problem);
  plugins_.erase(plugins_.begin() + static_cast<std::ptrdiff_t>(index));
  if (throw_on_failure) throw Error(ErrorKind::kPluginRefused, reason);
  return false;
}

std::vector<std::string> Registry::suggestions(pb_component_kind kind, std::string_view name,
                                               size_t limit) const {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& p : plugins_) {
    for (const ComponentEntry& c : p->components) {
      if (c.kind == kind) scored.emplace_back(edit_distance(name, c.name), c.name);
    }
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (const auto& [distance, candidate] : scored) {
    if (out.size() == limit) break;
    out.push_back(candidate);
  }
  return out;
}

const ComponentEntry& Registry::find(pb_component_kind kind, std::string_view name) {
  for (size_t i = 0; i < plugins_.size(); ++i) {
    for (size_t j = 0; j < plugins_[i]->components.size(); ++j) {
      const ComponentEntry& c = plugins_[i]->components[j];
      if (c.kind != kind || c.name != name) continue;
      load(i, /*throw_on_failure=*/true);
      return plugins_[i]->components[j];
    }
  }
  const std::string kind_text = kind_name(kind);
  std::vector<std::string> available;
  for (const auto& p : plugins_) {
    for (const ComponentEntry& c : p->components) {
      if (c.kind == kind) available.push_back(c.name);
    }
  }
  std::sort(available.begin(), available.end());
  std::string message = "no " + kind_text + " named '" + std::string(name) + "'.";
  const std::vector<std::string> close = suggestions(kind, name);
  if (!close.empty() &&
      edit_distance(name, close.front()) <= std::max<size_t>(2, name.size() / 3)) {
    message += " Did you mean '" + close.front() + "'?";
  }
  message += " Available " + kind_text +
             "s: " + (available.empty() ? std::string("none") : join(available, ", ")) + ".";
  std::vector<std::string> searched;
  for (const fs::path& p : searched_) searched.push_back(p.string());
  message += " Plugin path searched: " +
             (searched.empty() ? std::string("(empty)") : join(searched, ":")) + ".";
  if (!refused_.empty()) {
    message += " " + std::to_string(refused_.size()) +
               " plugin file(s) were refused; `patchbay plugins list` says why.";
  }
  throw Error(ErrorKind::kComponentNotFound, message);
}

const PluginEntry& Registry::plugin_of(const ComponentEntry& component) const {
  for (const auto& p : plugins_) {
    for (const ComponentEntry& c : p->components) {
      if (&c == &component) return *p;
    }
  }
  throw Error(ErrorKind::kInternal, "component '" + component.name + "' belongs to no plugin");
}

ComponentInstance Registry::create(pb_component_kind kind, std::string_view name,
                                   const pb_config_view& config) {
  const ComponentEntry& component = find(kind, name);
  const PluginEntry& plugin = plugin_of(component);
  const pb_component_descriptor* d = component.descriptor;
  const std::string what = kind_name(kind) + " '" + component.name + "' (plugin '" +
                           plugin.metadata.name + "', " + plugin.file.string() + ")";
  // The view must carry every schema key (ComponentConfig builds such views).
  for (size_t i = 0; i < d->config_field_count; ++i) {
    const char* key = PB_ARRAY_AT(pb_config_field, d->config_fields, i)->key;
    bool present = false;
    for (size_t k = 0; k < config.count && !present; ++k) {
      present = std::string_view(PB_ARRAY_AT(pb_config_value, config.values, k)->key) == key;
    }
    if (!present) {
      throw Error(ErrorKind::kInternal, what + ": the config handed to create() lacks key '" + key +
                                            "'; build it with runtime::ComponentConfig");
    }
  }
  void* object = nullptr;
  pb_status* status = d->create(host_, &config, &object);
  throw_if_error(status, what + " could not be created");
  if (object == nullptr) {
    throw Error(ErrorKind::kPluginRefused,
                what +
                    ": create() reported success but returned no object; this is a bug in "
                    "the plugin");
  }
  return ComponentInstance(std::shared_ptr<const void>(plugin.library, plugin.library.get()), d,
                           object, plugin.file);
}

TokenizerHandle Registry::create_tokenizer(std::string_view name, const pb_config_view& config) {
  return TokenizerHandle(create(PB_KIND_TOKENIZER, name, config), host_);
}

}  // namespace patchbay::runtime
