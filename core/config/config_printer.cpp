// TOML output of a resolved config; see config_printer.hpp.
#include "config/config_printer.hpp"

#include "config/schema_registry.hpp"
#include "config/type_names.hpp"

namespace patchbay::config {
namespace {

void write_source(std::string& out, const ResolvedConfig& config, const std::string& path, const PrintOptions& options) {
  if (!options.with_sources) return;
  out += "  # " + config.locate(path).to_string();
}

// An ignored per-kind table: its header marked, its values (nested tables inline), with the
// sources it had before it was set aside.
void write_ignored(std::string& out, const ResolvedConfig::IgnoredTable& ignored, const PrintOptions& options) {
  const std::string path = join_key_path(ignored.section_path, ignored.name);
  const auto source = [&](const std::string& key_path) {
    if (!options.with_sources) return std::string();
    const auto it = ignored.sources.find(key_path);
    return it == ignored.sources.end() ? std::string() : "  # " + it->second.to_string();
  };
  out += "\n[" + path + "]  # ignored: " + ignored.reason + source(path) + "\n";
  for (const auto& [key, node] : ignored.table) {
    const std::string key_path = join_key_path(path, key.str());
    out += format_toml_key(key.str()) + " = " + format_toml_value(node) + source(key_path) + "\n";
  }
}

void write_table(std::string& out, const ResolvedConfig& config, const toml::table& table, const std::string& path,
                 const PrintOptions& options) {
  bool has_plain_values = false;
  for (const auto& [key, node] : table) has_plain_values = has_plain_values || !node.is_table();
  if (!path.empty() && (has_plain_values || table.empty())) {
    if (!out.empty()) out += "\n";
    out += "[" + path + "]";
    write_source(out, config, path, options);
    out += "\n";
  }
  // The component selector (`kind`) first, then the other plain values in key order.
  const auto write_value = [&](std::string_view key, const toml::node& node) {
    out += format_toml_key(key) + " = " + format_toml_value(node);
    write_source(out, config, join_key_path(path, key), options);
    out += "\n";
  };
  if (const toml::node* selector = table.get(kComponentSelectorKey); selector && !selector->is_table()) {
    write_value(kComponentSelectorKey, *selector);
  }
  for (const auto& [key, node] : table) {
    if (node.is_table() || key.str() == kComponentSelectorKey) continue;
    write_value(key.str(), node);
  }
  for (const auto& [key, node] : table) {
    if (const toml::table* child = node.as_table()) {
      write_table(out, config, *child, join_key_path(path, key.str()), options);
    }
  }
  if (!options.show_ignored) return;
  for (const ResolvedConfig::IgnoredTable& ignored : config.ignored()) {
    if (ignored.section_path != path) continue;
    write_ignored(out, ignored, options);
  }
}

}  // namespace

std::string to_toml(const ResolvedConfig& config, const PrintOptions& options) {
  std::string out;
  write_table(out, config, config.table(), "", options);
  return out;
}

}  // namespace patchbay::config
