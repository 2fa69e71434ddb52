// ComponentConfig: a component's options set through typed setters, for code that builds them
// without a config file (tokenizer loading by kind, tests, plugin validation), exposed as the
// pb_config_view handed to create().
//
// Starts from the schema's defaults; setters replace a value after checking the key exists,
// the type matches (an int is accepted for a float key) and the value lies in the declared
// range or choices. The checks, the default parsing and the view are the config library's
// (config/field_schema.hpp, config/component_view.hpp): the host builds every pb_config_view
// through that one path, from a config file or from here. Errors are
// patchbay::Error(kInvalidArgument) naming the component, the key and what was expected;
// a schema whose declarations are broken (bad default, duplicate key) is
// Error(kPluginRefused) at construction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "patchbay/component.h"

namespace patchbay::runtime {

class ComponentConfig {
 public:
  // `component` must stay loaded while this object is used (its schema strings are
  // borrowed).
  explicit ComponentConfig(const pb_component_descriptor& component);
  ~ComponentConfig();
  ComponentConfig(ComponentConfig&&) noexcept;
  ComponentConfig& operator=(ComponentConfig&&) noexcept;
  ComponentConfig(const ComponentConfig&) = delete;
  ComponentConfig& operator=(const ComponentConfig&) = delete;

  void set_bool(std::string_view key, bool value);
  void set_int(std::string_view key, int64_t value);
  void set_float(std::string_view key, double value);
  void set_string(std::string_view key, std::string value);
  void set_strings(std::string_view key, std::vector<std::string> values);

  // Throws Error naming every required key that is still unset.
  void check_complete() const;

  // The view handed to create(); valid until the next setter call or destruction.
  const pb_config_view& view();

  // Schema order.
  std::vector<std::string> keys() const;

 private:
  struct State;
  // Checks a value of type `given` for `key` (through `check`, which sees the field) and
  // stores it; `store` inserts it into the values table.
  template <class Store>
  void set(std::string_view key, pb_value_type given, const Store& store);
  std::unique_ptr<State> state_;
};

}  // namespace patchbay::runtime
