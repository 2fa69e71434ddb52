// The resolved config: one TOML table (all includes merged, --set overrides applied) plus,
// for every key, table and array item, the place it was last written.
//
// Key paths are dotted, TOML style: `tokenizer.vocab_size`; a key that is not a bare key
// is quoted (`a."b.c"`); an array item is `run.plugin_paths[2]`. The source map holds an
// entry for each such path that exists in the table; when a key is overwritten (a later
// include, --set) the entries of the old value and everything under it are replaced.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "config/config_error.hpp"

namespace patchbay::config {

// `parent.key`, quoting `key` unless it is a bare TOML key ([A-Za-z0-9_-]+).
std::string join_key_path(std::string_view parent, std::string_view key);
// `parent[index]`.
std::string array_item_path(std::string_view parent, size_t index);
// Writes `key` as TOML: bare when possible, else a basic string with escapes.
std::string format_toml_key(std::string_view key);

class ResolvedConfig {
 public:
  using SourceMap = std::map<std::string, SourceLocation, std::less<>>;

  // A per-kind options table of a component section that the chosen components do not use
  // ([optimizer.sgd] when kind = "adamw"), set aside by apply_defaults: it is not part of
  // table() (so the config a run stores holds only what was used), but `config show` prints
  // it marked as ignored. See component_options.hpp.
  struct IgnoredTable {
    std::string section_path;  // "optimizer"
    std::string name;          // "sgd": the component the table is named after
    std::string reason;        // "not used: optimizer kind = \"adamw\""
    toml::table table;
    SourceMap sources;  // full key paths ("optimizer.sgd.momentum")
  };

  ResolvedConfig() = default;
  ResolvedConfig(toml::table table, SourceMap sources, std::string root_file);

  toml::table& table() { return table_; }
  const toml::table& table() const { return table_; }
  SourceMap& sources() { return sources_; }
  const SourceMap& sources() const { return sources_; }
  // The file the user named (relative paths kept as given, for readable messages).
  const std::string& root_file() const { return root_file_; }

  // Where `key_path` was written; for a path with no entry (a missing key), the nearest
  // ancestor that has one; else the root file with no line.
  SourceLocation locate(std::string_view key_path) const;

  // The node at a dotted key path (as produced by join_key_path), or nullptr.
  const toml::node* find(std::string_view key_path) const;

  // Drops the entries of `key_path` and everything under it.
  void erase_sources_under(std::string_view key_path);

  // Per-kind options tables set aside as unused, in section order.
  std::vector<IgnoredTable>& ignored() { return ignored_; }
  const std::vector<IgnoredTable>& ignored() const { return ignored_; }

 private:
  toml::table table_;
  SourceMap sources_;
  std::string root_file_;
  std::vector<IgnoredTable> ignored_;
};

// True when `path` is `prefix` itself or lies under it (`prefix.x`, `prefix[3]`).
bool key_path_is_under(std::string_view path, std::string_view prefix);

// Records the source of every key/table/array item under `node` (path `path`), using the
// line TOML++ kept while parsing and `file` as the file name.
void record_sources(const toml::node& node, const std::string& path, const std::string& file,
                    ResolvedConfig::SourceMap& sources);
// Records `where` for `path` and everything under `node` (values from the command line).
void record_sources_at(const toml::node& node, const std::string& path, const SourceLocation& where,
                       ResolvedConfig::SourceMap& sources);
// Drops the entries of `path` and everything under it.
void erase_sources_under(ResolvedConfig::SourceMap& sources, std::string_view path);
// Copies the entries of `path` and everything under it from `from` into `to`.
void copy_sources_under(const ResolvedConfig::SourceMap& from, std::string_view path,
                        ResolvedConfig::SourceMap& to);

}  // namespace patchbay::config
