// Host section registry; see schema_registry.hpp.
#include "config/schema_registry.hpp"

#include "common/error.hpp"
#include "config/field_schema.hpp"

namespace patchbay::config {

const char* component_kind_name(pb_component_kind kind) {
  switch (kind) {
    case PB_KIND_TOKENIZER: return "tokenizer";
    case PB_KIND_ATTENTION: return "attention";
    case PB_KIND_FEEDFORWARD: return "feed-forward";
    case PB_KIND_OPTIMIZER: return "optimizer";
    case PB_KIND_PARALLELISM: return "parallelism";
    case PB_KIND_SAMPLER: return "sampler";
  }
  return "component";
}

void SchemaRegistry::add_section(HostSection section) {
  if (section.path.empty() || find(section.path) != nullptr) {
    throw Error(ErrorKind::kInternal, "config schema: section '" + section.path +
                                          "' is empty or declared twice; give each section one declaration");
  }
  const size_t dot = section.path.rfind('.');
  if (dot != std::string::npos && find(section.path.substr(0, dot)) == nullptr) {
    throw Error(ErrorKind::kInternal, "config schema: section '" + section.path +
                                          "' declared before its parent; declare the parent first");
  }
  const std::vector<std::string> problems = check_field_declarations(section.fields);
  if (!problems.empty()) {
    throw Error(ErrorKind::kInternal, "config schema: section [" + section.path + "]: " + problems.front());
  }
  if (section.array_of_tables && (section.component_kind || section.always_present)) {
    throw Error(ErrorKind::kInternal, "config schema: [[" + section.path +
                                          "]] is an array of tables: it cannot select a component or be "
                                          "created by default");
  }
  if (section.component_kind) {
    bool has_selector = false;
    for (const pb_config_field& field : section.fields) {
      has_selector = has_selector || std::string_view(field.key) == kComponentSelectorKey;
    }
    if (!has_selector) {
      throw Error(ErrorKind::kInternal, "config schema: component section [" + section.path +
                                            "] must declare its '" + kComponentSelectorKey + "' key");
    }
  }
  sections_.push_back(std::move(section));
}

const HostSection* SchemaRegistry::find(std::string_view path) const {
  for (const HostSection& section : sections_) {
    if (section.path == path) return &section;
  }
  return nullptr;
}

std::vector<std::string> SchemaRegistry::child_section_names(std::string_view parent) const {
  std::vector<std::string> names;
  for (const HostSection& section : sections_) {
    const size_t dot = section.path.rfind('.');
    const std::string_view section_parent =
        dot == std::string::npos ? std::string_view() : std::string_view(section.path).substr(0, dot);
    if (section_parent == parent) {
      names.push_back(dot == std::string::npos ? section.path : section.path.substr(dot + 1));
    }
  }
  return names;
}

}  // namespace patchbay::config
