// Key paths and the source map of a resolved config; see config_document.hpp.
#include "config/config_document.hpp"

#include <cstdio>
#include <utility>

namespace patchbay::config {
namespace {

bool is_bare_key(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// Splits a key path produced by join_key_path back into keys (array items not supported:
// find() only descends through tables).
std::vector<std::string> split_key_path(std::string_view path) {
  std::vector<std::string> keys;
  std::string current;
  bool quoted = false;
  for (size_t i = 0; i < path.size(); ++i) {
    const char c = path[i];
    if (quoted) {
      if (c == '\\' && i + 1 < path.size()) {
        current += path[++i];
      } else if (c == '"') {
        quoted = false;
      } else {
        current += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == '.') {
      keys.push_back(std::move(current));
      current.clear();
    } else {
      current += c;
    }
  }
  keys.push_back(std::move(current));
  return keys;
}

}  // namespace

bool key_path_is_under(std::string_view path, std::string_view prefix) {
  if (prefix.empty()) return true;
  if (path.substr(0, prefix.size()) != prefix) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '.' || path[prefix.size()] == '[';
}

std::string format_toml_key(std::string_view key) {
  if (is_bare_key(key)) return std::string(key);
  std::string quoted = "\"";
  for (char c : key) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(c));
      quoted += escape;
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

std::string join_key_path(std::string_view parent, std::string_view key) {
  if (parent.empty()) return format_toml_key(key);
  return std::string(parent) + "." + format_toml_key(key);
}

std::string array_item_path(std::string_view parent, size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

ResolvedConfig::ResolvedConfig(toml::table table, SourceMap sources, std::string root_file)
    : table_(std::move(table)), sources_(std::move(sources)), root_file_(std::move(root_file)) {}

SourceLocation ResolvedConfig::locate(std::string_view key_path) const {
  std::string_view path = key_path;
  while (!path.empty()) {
    if (auto it = sources_.find(path); it != sources_.end()) return it->second;
    const size_t cut = path.find_last_of(".[");
    if (cut == std::string_view::npos) break;
    path = path.substr(0, cut);
  }
  return SourceLocation{root_file_, 0};
}

const toml::node* ResolvedConfig::find(std::string_view key_path) const {
  const toml::node* node = &table_;
  for (const std::string& key : split_key_path(key_path)) {
    const toml::table* table = node->as_table();
    if (table == nullptr) return nullptr;
    node = table->get(key);
    if (node == nullptr) return nullptr;
  }
  return node;
}

void ResolvedConfig::erase_sources_under(std::string_view key_path) {
  config::erase_sources_under(sources_, key_path);
}

void erase_sources_under(ResolvedConfig::SourceMap& sources, std::string_view path) {
  // Paths under `path` start with it, so they sit in one run of the sorted map (mixed
  // with siblings such as `pathx`, which are skipped).
  auto it = sources.lower_bound(path);
  while (it != sources.end() && it->first.compare(0, path.size(), path) == 0) {
    if (key_path_is_under(it->first, path)) {
      it = sources.erase(it);
    } else {
      ++it;
    }
  }
}

void record_sources(const toml::node& node, const std::string& path, const std::string& file,
                    ResolvedConfig::SourceMap& sources) {
  if (!path.empty()) {
    sources[path] = SourceLocation{file, static_cast<int64_t>(node.source().begin.line)};
  }
  if (const toml::table* table = node.as_table()) {
    for (const auto& [key, child] : *table) {
      record_sources(child, join_key_path(path, key.str()), file, sources);
    }
  } else if (const toml::array* array = node.as_array()) {
    for (size_t i = 0; i < array->size(); ++i) {
      record_sources(*array->get(i), array_item_path(path, i), file, sources);
    }
  }
}

void record_sources_at(const toml::node& node, const std::string& path, const SourceLocation& where,
                       ResolvedConfig::SourceMap& sources) {
  sources[path] = where;
  if (const toml::table* table = node.as_table()) {
    for (const auto& [key, child] : *table) {
      record_sources_at(child, join_key_path(path, key.str()), where, sources);
    }
  } else if (const toml::array* array = node.as_array()) {
    for (size_t i = 0; i < array->size(); ++i) {
      record_sources_at(*array->get(i), array_item_path(path, i), where, sources);
    }
  }
}

void copy_sources_under(const ResolvedConfig::SourceMap& from, std::string_view path,
                        ResolvedConfig::SourceMap& to) {
  for (auto it = from.lower_bound(path); it != from.end(); ++it) {
    if (it->first.compare(0, path.size(), path) != 0) break;
    if (key_path_is_under(it->first, path)) to[it->first] = it->second;
  }
}

}  // namespace patchbay::config
