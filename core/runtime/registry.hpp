// The plugin registry: finds plugin files on the search path, reads their metadata without
// running any plugin code, loads and validates them, and creates component objects.
//
// Typical use (the CLI, the trainer, tests):
//
//   runtime::Registry registry;                       // uses runtime::host_api()
//   registry.scan(runtime::plugin_search_path({.cli_paths = global.plugin_paths}));
//   for (const auto& r : registry.refused()) spdlog::warn("{}", r.reason);
//   const runtime::ComponentEntry& c = registry.find(PB_KIND_TOKENIZER, "char");
//   runtime::ComponentConfig config(*c.descriptor);   // defaults; set_* to override
//   runtime::TokenizerHandle tok = registry.create_tokenizer("char", config.view());
//   std::vector<int32_t> ids = tok.encode("hello");
//
// Loading a file, in order; the first failure refuses the file (RefusedPlugin, message
// "<file>: <problem>; <what to do>") and the host goes on with the others:
//   1. library_info: the file is a shared library that exports PB_PLUGIN_ENTRY_SYMBOL;
//   2. the PB_PLUGIN_METADATA_SECTION text is present and well-formed; ABI major equal,
//      plugin's ABI minor <= host's, min host version <= this host, names valid, kinds
//      known; a plugin name or a (kind, component name) already taken by an earlier file
//      refuses the later file (earlier search-path entries win);
//   3. dlopen (boost::dll::shared_library), call the entry, validate the descriptor
//      (struct sizes, versions, names, required callbacks, vtable, interface version) and
//      check it agrees with the metadata.
// With LoadMode::kMetadataOnly step 3 is deferred to the first find()/create of one of the
// plugin's components (`patchbay plugins list` describes plugins without running them).
//
// Lifetime: a plugin library stays loaded while the Registry or any ComponentInstance made
// from it is alive (each holds a shared_ptr to the library). References to entries
// (PluginEntry, ComponentEntry) stay valid while the Registry lives, except those of a
// plugin whose deferred load fails: it moves to refused(). Not thread-safe: scan/find from
// one thread; created objects follow their own interface's rules.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "patchbay/plugin.h"
#include "runtime/component_config.hpp"
#include "runtime/component_instance.hpp"
#include "runtime/host_api.hpp"
#include "runtime/plugin_metadata.hpp"
#include "runtime/plugin_search_path.hpp"

namespace patchbay::runtime {

class PluginLibrary;  // the loaded shared library (private to the runtime)

struct ComponentEntry {
  pb_component_kind kind{};
  std::string name;
  std::string version;
  uint32_t interface_major = 0;
  uint32_t interface_minor = 0;
  std::string summary;                                  // "" until the plugin is loaded
  const pb_component_descriptor* descriptor = nullptr;  // null until the plugin is loaded
};

struct PluginEntry {
  std::filesystem::path file;
  PluginMetadata metadata;  // name, version, ABI, min host, components (from the file)
  std::vector<ComponentEntry> components;
  std::shared_ptr<PluginLibrary> library;  // null until loaded
  bool loaded() const { return library != nullptr; }
};

struct RefusedPlugin {
  std::filesystem::path file;
  std::string reason;  // names the file, the problem and what to do
};

enum class LoadMode {
  kLoad,         // load and validate every plugin during scan()
  kMetadataOnly  // read metadata only; load a plugin when one of its components is used
};

class Registry {
 public:
  // `host` is handed to every factory; it must outlive every object created (the default,
  // host_api(), lives for the whole process).
  explicit Registry(const pb_host_api* host = host_api());
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Examines every plugin file on `search_path` (see plugin_files()). Never throws for a bad
  // plugin: bad files land in refused(). May be called again with more folders.
  void scan(const std::vector<std::filesystem::path>& search_path, LoadMode mode = LoadMode::kLoad);
  // Examines one file (tests, `plugins describe FILE`).
  void scan_file(const std::filesystem::path& file, LoadMode mode = LoadMode::kLoad);

  const std::vector<std::unique_ptr<PluginEntry>>& plugins() const { return plugins_; }
  const std::vector<RefusedPlugin>& refused() const { return refused_; }
  // The search path of the scans so far, for messages.
  const std::vector<std::filesystem::path>& searched() const { return searched_; }

  // The loaded component of that kind and name. Loads its plugin if needed. Throws
  // Error(kNotFound) listing the available names of that kind, the closest ones first
  // ("did you mean"), and the number of refused files; Error(kPluginRefused) when its
  // plugin fails to load now.
  const ComponentEntry& find(pb_component_kind kind, std::string_view name);
  // Names available for `kind`, closest to `name` first (edit distance), at most `limit`.
  std::vector<std::string> suggestions(pb_component_kind kind, std::string_view name,
                                       size_t limit = 3) const;
  // The plugin providing a component (after find()).
  const PluginEntry& plugin_of(const ComponentEntry& component) const;

  // Creates an object. `config` must hold every key of the component's schema (build it
  // with ComponentConfig). A failing factory throws Error(kPluginRefused) carrying the
  // plugin's status message, the component and the file.
  ComponentInstance create(pb_component_kind kind, std::string_view name,
                           const pb_config_view& config);
  TokenizerHandle create_tokenizer(std::string_view name, const pb_config_view& config);

  const pb_host_api* host() const { return host_; }

 private:
  void examine(const std::filesystem::path& file, LoadMode mode);
  // Loads and validates an entry in plugins_; on failure moves it to refused_ and throws
  // Error(kPluginRefused) with the reason when `throw_on_failure`.
  bool load(size_t index, bool throw_on_failure);
  std::string refuse(const std::filesystem::path& file, const std::string& problem);

  const pb_host_api* host_;
  std::vector<std::unique_ptr<PluginEntry>> plugins_;
  std::vector<RefusedPlugin> refused_;
  std::vector<std::filesystem::path> searched_;
};

// "tokenizer", "attention", ... ; "kind 7" for an unknown value.
std::string kind_name(pb_component_kind kind);
// PB_KIND_* for a name, or 0 when unknown.
int kind_from_name(std::string_view name);

}  // namespace patchbay::runtime
