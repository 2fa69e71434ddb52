// Config loading: parse, compose includes depth-first with cycle detection, deep-merge,
// apply --set overrides. Sources are tracked per key path (config_document.hpp).
#include "config/config_loader.hpp"

#include <cctype>
#include <optional>
#include <utility>
#include <vector>

#include "config/type_names.hpp"

namespace patchbay::config {
namespace {

namespace fs = std::filesystem;

// One parsed file with its includes already merged in.
struct ComposedFile {
  toml::table table;
  ResolvedConfig::SourceMap sources;
};

[[noreturn]] void fail(ConfigIssue issue) { throw ConfigError({std::move(issue)}); }

// Deep merge: tables merge key by key; every other value replaces what was there.
void merge_into(toml::table& target, ResolvedConfig::SourceMap& target_sources, toml::table&& source,
                const ResolvedConfig::SourceMap& source_sources, const std::string& path) {
  for (auto&& [key, node] : source) {
    const std::string key_path = join_key_path(path, key.str());
    toml::node* existing = target.get(key);
    if (existing != nullptr && existing->is_table() && node.is_table()) {
      if (auto it = source_sources.find(key_path); it != source_sources.end()) {
        target_sources[key_path] = it->second;  // the table's latest mention
      }
      merge_into(*existing->as_table(), target_sources, std::move(*node.as_table()), source_sources,
                 key_path);
    } else {
      target.insert_or_assign(key, std::move(node));
      erase_sources_under(target_sources, key_path);
      copy_sources_under(source_sources, key_path, target_sources);
    }
  }
}

// A config (or an included file) larger than this is refused before parsing.
constexpr std::uintmax_t kMaxConfigFileBytes = std::uintmax_t{16} << 20;

class Composer {
 public:
  // `display` is the path as the user would write it (for messages); `included_from` is
  // where the include naming this file was written (nullopt for the root file).
  ComposedFile load_file(const fs::path& display, const std::optional<SourceLocation>& included_from) {
    std::error_code error;
    if (!fs::is_regular_file(display, error)) {
      ConfigIssue issue;
      issue.where = included_from.value_or(SourceLocation{display.string(), 0});
      issue.key_path = included_from ? "include" : "";
      issue.problem = included_from ? "included config file not found" : "config file not found";
      issue.expected = "a readable TOML file";
      issue.found = "'" + display.string() + "' does not exist or is not a file";
      issue.fix = included_from ? "include paths are relative to the including file; fix the path"
                                : "check the path (relative to the current directory)";
      fail(std::move(issue));
    }
    if (const std::uintmax_t bytes = fs::file_size(display, error);
        !error && bytes > kMaxConfigFileBytes) {
      ConfigIssue issue;
      issue.where = included_from.value_or(SourceLocation{display.string(), 0});
      issue.key_path = included_from ? "include" : "";
      issue.problem = "config file too large";
      issue.expected =
          "a TOML file of at most " + std::to_string(kMaxConfigFileBytes >> 20) + " MiB";
      issue.found = "'" + display.string() + "' of " + std::to_string(bytes) + " bytes";
      issue.fix = "check the path: a config is a small text file";
      fail(std::move(issue));
    }
    const fs::path canonical = fs::weakly_canonical(display, error);
    for (size_t i = 0; i < stack_.size(); ++i) {
      if (stack_[i].canonical != canonical) continue;
      std::string chain;
      for (size_t j = i; j < stack_.size(); ++j) chain += stack_[j].display + " -> ";
      chain += display.string();
      ConfigIssue issue;
      issue.where = included_from.value_or(SourceLocation{display.string(), 0});
      issue.key_path = "include";
      issue.problem = "include cycle";
      issue.expected = "includes that form a tree (no file includes itself, even indirectly)";
      issue.found = chain;
      issue.fix = "remove one of the includes in this chain";
      fail(std::move(issue));
    }
    toml::table parsed;
    try {
      parsed = toml::parse_file(display.string());
    } catch (const toml::parse_error& e) {
      fail_syntax(display.string(), e);
    }
    stack_.push_back({canonical, display.string()});
    ComposedFile result = compose(std::move(parsed), display.string(), display.parent_path());
    stack_.pop_back();
    return result;
  }

  ComposedFile compose_text(std::string_view text, const std::string& name, const fs::path& base_dir) {
    toml::table parsed;
    try {
      parsed = toml::parse(text, name);
    } catch (const toml::parse_error& e) {
      fail_syntax(name, e);
    }
    stack_.push_back({fs::weakly_canonical(base_dir / name), name});
    ComposedFile result = compose(std::move(parsed), name, base_dir);
    stack_.pop_back();
    return result;
  }

 private:
  struct OpenFile {
    fs::path canonical;
    std::string display;
  };

  [[noreturn]] static void fail_syntax(const std::string& file, const toml::parse_error& e) {
    ConfigIssue issue;
    issue.where = SourceLocation{file, static_cast<int64_t>(e.source().begin.line)};
    issue.problem = "TOML syntax error at column " + std::to_string(e.source().begin.column) + ": " +
                    std::string(e.description());
    issue.fix = "fix the TOML syntax (https://toml.io)";
    fail(std::move(issue));
  }

  // Merges the includes of `parsed` (in order), then `parsed` itself.
  ComposedFile compose(toml::table parsed, const std::string& file, const fs::path& base_dir) {
    ResolvedConfig::SourceMap own_sources;
    record_sources(parsed, "", file, own_sources);
    std::vector<std::pair<std::string, SourceLocation>> includes = take_includes(parsed, own_sources, file);

    ComposedFile result;
    for (const auto& [relative, where] : includes) {
      const fs::path included = (base_dir / relative).lexically_normal();
      ComposedFile child = load_file(included, where);
      merge_into(result.table, result.sources, std::move(child.table), child.sources, "");
    }
    merge_into(result.table, result.sources, std::move(parsed), own_sources, "");
    return result;
  }

  // Removes `include` from `parsed` and returns its paths with their locations.
  static std::vector<std::pair<std::string, SourceLocation>> take_includes(
      toml::table& parsed, ResolvedConfig::SourceMap& sources, const std::string& file) {
    std::vector<std::pair<std::string, SourceLocation>> includes;
    const toml::node* node = parsed.get("include");
    if (node == nullptr) return includes;
    const SourceLocation where = sources.count("include") ? sources.at("include") : SourceLocation{file, 0};
    const toml::array* array = node->as_array();
    bool all_strings = array != nullptr;
    if (array != nullptr) {
      for (const toml::node& item : *array) all_strings = all_strings && item.is_string();
    }
    if (!all_strings) {
      ConfigIssue issue;
      issue.where = where;
      issue.key_path = "include";
      issue.problem = "wrong type";
      issue.expected = "an array of file paths, e.g. include = [\"base/small.toml\"]";
      issue.found = describe_value(*node);
      issue.fix = "write the included files as an array of strings";
      fail(std::move(issue));
    }
    for (size_t i = 0; i < array->size(); ++i) {
      const std::string item_path = array_item_path("include", i);
      includes.emplace_back(array->get(i)->as_string()->get(),
                            sources.count(item_path) ? sources.at(item_path) : where);
    }
    parsed.erase("include");
    erase_sources_under(sources, "include");
    return includes;
  }

  std::vector<OpenFile> stack_;
};

std::string trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return "";
  const size_t end = text.find_last_not_of(" \t");
  return std::string(text.substr(begin, end - begin + 1));
}

// Splits "a.\"b.c\".d" into keys; nullopt when malformed (empty key, open quote).
std::optional<std::vector<std::string>> parse_key_path(std::string_view text) {
  std::vector<std::string> keys;
  std::string current;
  bool quoted = false;
  bool was_quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '\\' && i + 1 < text.size()) {
        current += text[++i];
      } else if (c == '"') {
        quoted = false;
      } else {
        current += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
      was_quoted = true;
    } else if (c == '.') {
      std::string key = was_quoted ? current : trim(current);
      if (!was_quoted && (key.empty() || key.find_first_of(" \t") != std::string::npos)) return std::nullopt;
      keys.push_back(std::move(key));
      current.clear();
      was_quoted = false;
    } else if (c == ' ' || c == '\t') {
      if (was_quoted) continue;
      current += c;
    } else {
      if (was_quoted) return std::nullopt;  // text after a closing quote
      const bool bare = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                        c == '_' || c == '-';
      if (!bare) return std::nullopt;
      current += c;
    }
  }
  if (quoted) return std::nullopt;
  std::string key = was_quoted ? current : trim(current);
  if (!was_quoted && (key.empty() || key.find_first_of(" \t") != std::string::npos)) return std::nullopt;
  keys.push_back(std::move(key));
  return keys;
}

// A one-entry table {value = <parsed>} for an override's value text.
// Digits with an optional sign (and TOML's '_' separators): what TOML reads as an integer
// unless it overflows 64 bits.
bool looks_like_integer(const std::string& text) {
  const size_t start = !text.empty() && (text[0] == '+' || text[0] == '-') ? 1 : 0;
  if (start == text.size()) return false;
  for (size_t i = start; i < text.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(text[i])) && text[i] != '_') return false;
  return true;
}

toml::table parse_override_value(const std::string& text) {
  try {
    toml::table parsed = toml::parse("value = " + text);
    if (parsed.size() == 1 && parsed.contains("value")) return parsed;
  } catch (const toml::parse_error&) {
    // Not a TOML value: taken as a bare string below.
  }
  toml::table bare;
  bare.insert("value", text);
  return bare;
}

}  // namespace

ResolvedConfig load_config(const std::filesystem::path& file, std::span<const std::string> set_overrides) {
  Composer composer;
  ComposedFile composed = composer.load_file(file, std::nullopt);
  ResolvedConfig config(std::move(composed.table), std::move(composed.sources), file.string());
  for (const std::string& assignment : set_overrides) apply_set_override(config, assignment);
  return config;
}

ResolvedConfig load_config_text(std::string_view toml_text, const std::string& source_name,
                                const std::filesystem::path& base_dir) {
  Composer composer;
  ComposedFile composed = composer.compose_text(toml_text, source_name, base_dir);
  return ResolvedConfig(std::move(composed.table), std::move(composed.sources), source_name);
}

void apply_set_override(ResolvedConfig& config, std::string_view assignment) {
  const SourceLocation where{"<command line --set " + std::string(assignment) + ">", 0};
  const size_t equals = assignment.find('=');
  std::optional<std::vector<std::string>> keys;
  if (equals != std::string_view::npos) keys = parse_key_path(assignment.substr(0, equals));
  if (!keys) {
    ConfigIssue issue;
    issue.where = where;
    issue.problem = "malformed --set override";
    issue.expected = "path=value with a dotted key path, e.g. --set tokenizer.vocab_size=512";
    issue.found = "'" + std::string(assignment) + "'";
    issue.fix = "write the key path, '=', then the value (quote keys that hold dots)";
    fail(std::move(issue));
  }
  toml::table* table = &config.table();
  std::string path;
  for (size_t i = 0; i + 1 < keys->size(); ++i) {
    path = join_key_path(path, (*keys)[i]);
    toml::node* node = table->get((*keys)[i]);
    if (node == nullptr) {
      table->insert((*keys)[i], toml::table{});
      config.sources()[path] = where;
      node = table->get((*keys)[i]);
    } else if (!node->is_table()) {
      ConfigIssue issue;
      issue.where = where;
      issue.key_path = path;
      issue.problem = "--set cannot descend into a value that is not a table";
      issue.expected = "a table at '" + path + "'";
      issue.found = describe_value(*node) + " set at " + config.locate(path).to_string();
      issue.fix = "set '" + path + "' itself, or change the file so it holds a table";
      fail(std::move(issue));
    }
    table = node->as_table();
  }
  path = join_key_path(path, keys->back());
  const std::string text = trim(assignment.substr(equals + 1));
  toml::table value = parse_override_value(text);
  if (value.get("value")->is_string() && looks_like_integer(text)) {
    ConfigIssue issue;  // TOML refused it as a number: taken as a string it would mislead
    issue.where = where;
    issue.key_path = path;
    issue.problem = "integer out of range";
    issue.expected = "an integer in [-9223372036854775808, 9223372036854775807] (64-bit)";
    issue.found = text.size() > 40 ? text.substr(0, 40) + "..." : text;
    issue.fix = "write a smaller number";
    fail(std::move(issue));
  }
  table->insert_or_assign(keys->back(), std::move(*value.get("value")));
  config.erase_sources_under(path);
  record_sources_at(*table->get(keys->back()), path, where, config.sources());
}

}  // namespace patchbay::config
