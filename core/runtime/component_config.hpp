// ComponentConfig: owning storage for the values handed to a component's create(), built from
// the component's schema (pb_config_field) and exposed as a pb_config_view that stays valid
// while this object lives and is not modified.
//
// Starts from the schema's defaults (TOML literals: true/false, integers, floats, "strings",
// ["string", "arrays"]); setters replace a value after checking the key exists, the type
// matches (an int is accepted for a float key) and the value lies in the declared range or
// choices. The config loader validates TOML tables through these setters; tests and the CLI
// use them directly. Errors are patchbay::Error(kInvalidArgument) naming the component, the
// key and the valid keys.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "patchbay/component.h"

namespace patchbay::runtime {

class ComponentConfig {
 public:
  // `component` must stay loaded while this object is used (its schema strings are read
  // at construction and copied).
  explicit ComponentConfig(const pb_component_descriptor& component);

  void set_bool(std::string_view key, bool value);
  void set_int(std::string_view key, int64_t value);
  void set_float(std::string_view key, double value);
  void set_string(std::string_view key, std::string value);
  void set_strings(std::string_view key, std::vector<std::string> values);

  // Throws Error naming every required key that is still unset.
  void check_complete() const;

  // The view handed to create(); valid until the next setter call or destruction.
  const pb_config_view& view();

  // Schema order. Type names: bool, int, float, string, array of strings.
  std::vector<std::string> keys() const;

 private:
  struct Entry {
    std::string key;
    pb_value_type type;
    bool required = false;
    bool set = false;
    bool has_range = false;
    double min_value = 0, max_value = 0;
    std::vector<std::string> choices;
    bool bool_value = false;
    int64_t int_value = 0;
    double float_value = 0;
    std::string string_value;
    std::vector<std::string> strings;
  };
  Entry& entry(std::string_view key, pb_value_type wanted);
  void set_default(Entry& e, const char* literal);

  std::string component_;  // "tokenizer 'char'" for messages
  std::vector<Entry> entries_;
  // Backing storage of view(): rebuilt on each call.
  std::vector<pb_config_value> values_;
  std::vector<std::vector<const char*>> item_pointers_;
  pb_config_view view_{};
};

}  // namespace patchbay::runtime
