// Typed readers of transformers config.json fields and of Patchbay component tables, shared by
// the GPT-2/LLaMA mapping (hf_architecture.cpp) and the T5 mapping (t5_architecture.cpp).
// config.json readers: absent (or null) gives the fallback; present with another JSON type
// (n_head = 2.5, n_embd = "32") is Error(kInvalidArgument) naming the field, never a silent
// default.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "interop/hf_architecture.hpp"

namespace patchbay::interop::hf_fields {

int64_t get_int(const nlohmann::json& config, const char* key, int64_t fallback);
double get_real(const nlohmann::json& config, const char* key, double fallback);
bool get_bool(const nlohmann::json& config, const char* key, bool fallback);
std::string get_string(const nlohmann::json& config, const char* key, const std::string& fallback);
// A size the model cannot be built without: present, and a positive integer below 2^31.
int64_t get_size(const nlohmann::json& config, const char* key, const char* what);

// A real as TOML writes it (17 digits, always with a '.' or exponent).
std::string toml_real(double value);

// The plugin that provided component `name` of `kind` in a run ("" when not recorded).
std::string plugin_of(const std::vector<UsedComponent>& components, const std::string& kind,
                      const std::string& name);

// A component option (resolved table), or the fallback when absent or of another type.
template <typename T>
T option_or(const toml::table& options, const char* key, T fallback) {
  const toml::node* node = options.get(key);
  if (node == nullptr) return fallback;
  if constexpr (std::is_same_v<T, double>) {
    if (const auto v = node->value<double>()) return *v;
    return fallback;
  } else {
    return node->value<T>().value_or(fallback);
  }
}

}  // namespace patchbay::interop::hf_fields
