// A plugin file's metadata: the text PATCHBAY_PLUGIN writes into the ELF section
// PB_PLUGIN_METADATA_SECTION (format in patchbay/plugin.hpp), read without loading the file.
//
// read_plugin_metadata() checks, with Boost.DLL's library_info, that the file is a shared
// library exporting PB_PLUGIN_ENTRY_SYMBOL, then reads the section's bytes with the ELF64
// reader (elf_sections.hpp) and parses them. Every failure is an Error(kPluginRefused)
// whose message is the problem and what to do (the caller prefixes the file).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "patchbay/component.h"

namespace patchbay::runtime {

struct ComponentMetadata {
  std::string kind;  // "tokenizer"
  std::string name;
  std::string version;
  uint32_t interface_major = 0;
  uint32_t interface_minor = 0;
};

struct PluginMetadata {
  std::string name;
  std::string version;
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
  uint32_t min_host_major = 0;
  uint32_t min_host_minor = 0;
  uint32_t min_host_patch = 0;
  std::vector<ComponentMetadata> components;
};

// Parses the metadata text; throws Error(kPluginRefused) naming the bad line.
PluginMetadata parse_plugin_metadata(std::string_view text);

// Checks the file and reads its metadata (no plugin code runs).
PluginMetadata read_plugin_metadata(const std::filesystem::path& file);

// [a-z0-9_-]+, the rule for plugin and component names.
bool valid_plugin_name(std::string_view name);

}  // namespace patchbay::runtime
