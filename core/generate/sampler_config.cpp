// Sampler chains from config entries (see sampler_config.hpp).
#include "generate/sampler_config.hpp"

#include <sstream>
#include <utility>

#include "common/error.hpp"
#include "config/component_options.hpp"
#include "config/component_view.hpp"
#include "runtime/registry.hpp"

namespace patchbay::generate {
namespace {

toml::table* find_entry(toml::array& entries, std::string_view name) {
  for (toml::node& node : entries) {
    toml::table* t = node.as_table();
    if (t == nullptr) continue;
    const toml::node* n = t->get("name");
    if (n != nullptr && n->is_string() && n->as_string()->get() == name) return t;
  }
  return nullptr;
}

// Inserts `entry` just before the last entry (the selector); at the front when `front`.
void insert_entry(toml::array& entries, toml::table entry, bool front) {
  const size_t at = front || entries.empty() ? 0 : entries.size() - 1;
  entries.insert(entries.begin() + static_cast<std::ptrdiff_t>(at), std::move(entry));
}

template <class T>
void set_or_insert(toml::array& entries, const char* name, const char* key, T value, bool front) {
  if (toml::table* t = find_entry(entries, name)) {
    t->insert_or_assign(key, value);
    return;
  }
  insert_entry(entries, toml::table{{"name", name}, {key, value}}, front);
}

std::string value_text(const toml::node& node) {
  std::ostringstream out;
  if (const auto* s = node.as_string()) {
    out << '"' << s->get() << '"';
  } else if (const auto* a = node.as_array()) {
    out << '[';
    for (size_t i = 0; i < a->size(); ++i) out << (i ? ", " : "") << value_text(*a->get(i));
    out << ']';
  } else if (const auto* b = node.as_boolean()) {
    out << (b->get() ? "true" : "false");
  } else if (const auto* i = node.as_integer()) {
    out << i->get();
  } else if (const auto* f = node.as_floating_point()) {
    out << f->get();
  } else {
    out << "<table>";
  }
  return out.str();
}

// An entry's host key is `name`; its other keys are options (component_options.hpp).
const std::vector<std::string>& entry_host_keys() {
  static const std::vector<std::string> keys{"name"};
  return keys;
}

std::span<const pb_config_field> schema_of(const runtime::ComponentEntry& component) {
  return {component.descriptor->config_fields, component.descriptor->config_field_count};
}

const runtime::ComponentEntry& find_sampler(runtime::Registry& registry, const std::string& name,
                                            const std::string& where) {
  try {
    return registry.find(PB_KIND_SAMPLER, name);
  } catch (const Error& e) {
    throw Error(e.kind(), where + ": " + e.what());
  }
}

void throw_problems(const std::string& where, const std::string& component,
                    const std::vector<std::string>& problems) {
  if (problems.empty()) return;
  std::string text;
  for (const std::string& p : problems) text += (text.empty() ? "" : "; ") + p;
  throw Error(ErrorKind::kInvalidArgument, where + ": sampler '" + component + "': " + text);
}

}  // namespace

toml::array default_chain_entries(uint64_t seed) {
  return toml::array{
      toml::table{{"name", "temperature"}, {"temperature", kDefaultTemperature}},
      toml::table{{"name", "top_k"}, {"k", kDefaultTopK}},
      toml::table{{"name", "sample"}, {"seed", static_cast<int64_t>(seed)}},
  };
}

void apply_overrides(toml::array& entries, const SamplerOverrides& o) {
  if (o.repetition_penalty)
    set_or_insert(entries, "repetition_penalty", "penalty", *o.repetition_penalty, true);
  if (o.temperature && *o.temperature <= 0) {
    // Greedy decoding: no temperature, the selector becomes argmax.
    for (size_t i = entries.size(); i-- > 0;) {
      const toml::table* t = entries.get(i)->as_table();
      const toml::node* n = t != nullptr ? t->get("name") : nullptr;
      if (n != nullptr && n->is_string() && n->as_string()->get() == "temperature") {
        entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    if (!entries.empty()) entries.erase(entries.end() - 1);
    entries.push_back(toml::table{{"name", "greedy"}});
  } else if (o.temperature) {
    set_or_insert(entries, "temperature", "temperature", *o.temperature, true);
  }
  if (o.top_k) set_or_insert(entries, "top_k", "k", *o.top_k, false);
  if (o.top_p) set_or_insert(entries, "top_p", "p", *o.top_p, false);
  if (o.min_p) set_or_insert(entries, "min_p", "min_p", *o.min_p, false);
  if (o.seed && !entries.empty()) {
    toml::table* selector = entries.back().as_table();
    const toml::node* n = selector != nullptr ? selector->get("name") : nullptr;
    // Greedy has no randomness, hence no seed.
    if (selector != nullptr &&
        !(n != nullptr && n->is_string() && n->as_string()->get() == "greedy")) {
      selector->insert_or_assign("seed", static_cast<int64_t>(*o.seed));
    }
  }
}

runtime::SamplerChain build_sampler_chain(const toml::array& entries, runtime::Registry& registry,
                                          const std::string& label) {
  std::vector<runtime::SamplerHandle> handles;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string where = label + "[" + std::to_string(i) + "]";
    const toml::table* entry = entries.get(i)->as_table();
    if (entry == nullptr) {
      throw Error(ErrorKind::kInvalidArgument,
                  where + ": expected a table ([[" + label + "]] with name = \"...\")");
    }
    const toml::node* name_node = entry->get("name");
    if (name_node == nullptr || !name_node->is_string()) {
      throw Error(ErrorKind::kInvalidArgument,
                  where +
                      ": missing name = \"<sampler>\" (the sampler component, e.g. \"top_k\"; "
                      "patchbay plugins list)");
    }
    const std::string name = name_node->as_string()->get();
    const std::string label_with_name = where + " (name = \"" + name + "\")";
    const runtime::ComponentEntry& component = find_sampler(registry, name, label_with_name);
    // Per-kind tables of other samplers are ignored but checked against their own schema.
    for (const auto& [key, value] : *entry) {
      if (!value.is_table() || key.str() == name) continue;
      const std::string table_where = where + "." + std::string(key.str());
      const runtime::ComponentEntry& other = find_sampler(registry, std::string(key.str()), table_where);
      throw_problems(table_where + " (options of another sampler, ignored)", other.name,
                     config::option_problems(*value.as_table(), schema_of(other), false));
    }
    const toml::table options = config::component_options(*entry, name, entry_host_keys(), "name");
    throw_problems(label_with_name, name, config::option_problems(options, schema_of(component), true));
    std::string settings;
    for (const auto& [key, value] : options) {
      settings += (settings.empty() ? "" : ", ") + std::string(key.str()) + "=" + value_text(value);
    }
    const config::ComponentConfigView view(options, schema_of(component), where);
    handles.emplace_back(registry.create(PB_KIND_SAMPLER, name, *view.view()), registry.host(), where, settings);
  }
  return runtime::SamplerChain(std::move(handles));
}

std::optional<toml::array> chain_entries_from_toml(const toml::table& document) {
  const toml::node* node = document.at_path("generate.chain").node();
  if (node == nullptr) return std::nullopt;
  const toml::array* entries = node->as_array();
  if (entries == nullptr || !entries->is_array_of_tables()) {
    throw Error(ErrorKind::kInvalidArgument,
                "generate.chain must be an array of tables: write each sampler under its own "
                "[[generate.chain]] "
                "header with name = \"<sampler>\"");
  }
  return *entries;
}

}  // namespace patchbay::generate
