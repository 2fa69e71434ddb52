// Reading and parsing a plugin's metadata without loading it (see plugin_metadata.hpp).
#include "runtime/plugin_metadata.hpp"

#include <algorithm>
#include <boost/dll/library_info.hpp>
#include <charconv>
#include <sstream>

#include "common/error.hpp"
#include "patchbay/plugin.h"
#include "runtime/elf_sections.hpp"

namespace patchbay::runtime {
namespace {

constexpr std::string_view kFormatLine = "patchbay-plugin-metadata ";
constexpr uint32_t kFormatVersion = 1;

[[noreturn]] void refuse(const std::string& message) {
  throw Error(ErrorKind::kPluginRefused, message);
}

uint32_t parse_number(std::string_view text, std::string_view line) {
  uint32_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    refuse("metadata line '" + std::string(line) + "': '" + std::string(text) +
           "' is not a number");
  }
  return value;
}

// "1.0" -> {1, 0}; "0.1.0" -> {0, 1, 0}
std::vector<uint32_t> parse_dotted(std::string_view text, size_t parts, std::string_view line) {
  std::vector<uint32_t> out;
  size_t start = 0;
  for (size_t i = 0; i < parts; ++i) {
    const size_t dot = i + 1 < parts ? text.find('.', start) : text.size();
    if (dot == std::string_view::npos) {
      refuse("metadata line '" + std::string(line) + "': expected " + std::to_string(parts) +
             " dot-separated numbers");
    }
    out.push_back(parse_number(text.substr(start, dot - start), line));
    start = dot + 1;
  }
  return out;
}

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (at < line.size()) {
    const size_t end = std::min(line.find(' ', at), line.size());
    if (end > at) out.push_back(line.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

}  // namespace

bool valid_plugin_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

PluginMetadata parse_plugin_metadata(std::string_view text) {
  text = text.substr(0, text.find('\0'));
  PluginMetadata meta;
  bool seen_format = false, seen_abi = false, seen_host = false;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (line.empty()) continue;
    if (!seen_format) {
      if (line.substr(0, kFormatLine.size()) != kFormatLine) {
        refuse("metadata does not start with '" + std::string(kFormatLine) + "N'");
      }
      const uint32_t format = parse_number(line.substr(kFormatLine.size()), line);
      if (format > kFormatVersion) {
        refuse("metadata format " + std::to_string(format) + " is newer than this host reads (" +
               std::to_string(kFormatVersion) + "); upgrade Patchbay");
      }
      seen_format = true;
      continue;
    }
    const std::vector<std::string_view> w = words(line);
    if (w.empty()) continue;  // a line of blanks
    const std::string_view key = w.front();
    auto expect = [&](size_t n) {
      if (w.size() != n) {
        refuse("metadata line '" + std::string(line) + "': expected " + std::to_string(n - 1) +
               " value(s) after '" + std::string(key) + "'");
      }
    };
    if (key == "plugin") {
      expect(2);
      meta.name = w[1];
    } else if (key == "version") {
      expect(2);
      meta.version = w[1];
    } else if (key == "abi") {
      expect(2);
      const auto v = parse_dotted(w[1], 2, line);
      meta.abi_major = v[0];
      meta.abi_minor = v[1];
      seen_abi = true;
    } else if (key == "min-host") {
      expect(2);
      const auto v = parse_dotted(w[1], 3, line);
      meta.min_host_major = v[0];
      meta.min_host_minor = v[1];
      meta.min_host_patch = v[2];
      seen_host = true;
    } else if (key == "component") {
      expect(5);
      const auto v = parse_dotted(w[4], 2, line);
      meta.components.push_back(
          ComponentMetadata{std::string(w[1]), std::string(w[2]), std::string(w[3]), v[0], v[1]});
    }
    // Other keys come from a newer SDK minor and are ignored.
  }
  if (!seen_format) refuse("metadata section is empty");
  if (meta.name.empty() || meta.version.empty() || !seen_abi || !seen_host) {
    refuse("metadata lacks one of the lines 'plugin', 'version', 'abi', 'min-host'");
  }
  return meta;
}

PluginMetadata read_plugin_metadata(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) refuse("not a regular file");
  std::optional<ElfFile> elf;
  try {
    elf.emplace(file);
  } catch (const Error& e) {
    refuse(std::string("not a shared library: ") + e.what() + "; remove it from the plugin folder");
  }
  if (!elf->is_shared_object()) {
    refuse("not a shared library (it is an ELF " + elf->type_name() +
           "); build plugins as MODULE libraries with patchbay_add_plugin()");
  }
  // Boost.DLL's own check that this is a library of the native format (the ELF reader above
  // has already validated the offsets library_info trusts).
  try {
    boost::dll::library_info info(file.string(), /*throw_if_not_native_format=*/true);
    (void)info.sections();
  } catch (const std::exception& e) {
    refuse(std::string("not a loadable library for this platform (Boost.DLL: ") + e.what() + ")");
  }
  const std::vector<std::string> exported = elf->exported_symbols();
  if (std::find(exported.begin(), exported.end(), PB_PLUGIN_ENTRY_SYMBOL) == exported.end()) {
    refuse("exports no '" PB_PLUGIN_ENTRY_SYMBOL
           "' entry symbol, so it is not a Patchbay plugin; register its components with "
           "PATCHBAY_PLUGIN(...) from <patchbay/plugin.hpp>");
  }
  const std::optional<std::string> text = elf->section(PB_PLUGIN_METADATA_SECTION);
  if (!text) {
    refuse("has no '" PB_PLUGIN_METADATA_SECTION
           "' metadata section; rebuild it with PATCHBAY_PLUGIN(...) from <patchbay/plugin.hpp>");
  }
  return parse_plugin_metadata(*text);
}

}  // namespace patchbay::runtime
