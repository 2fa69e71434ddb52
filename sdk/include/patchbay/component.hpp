// Patchbay SDK, header-only C++ layer: what every component needs, whatever its kind.
//
//   patchbay::PluginError  the exception plugin code throws; the adapters turn it (and any
//                          other exception) into a pb_status at the boundary.
//   patchbay::Status       makes pb_status values through the host api.
//   patchbay::Host         a component's handle on pb_host_api: logging, status, allocation.
//   patchbay::ConfigView   typed, checked reads of the pb_config_view handed to create().
//   patchbay::Field        constexpr builder for pb_config_field schema entries.
//
// Nothing declared here crosses the boundary: these types live inside the plugin. The C
// contract (component.h) stays the only thing the host sees.
#pragma once

#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "patchbay/component.h"

namespace patchbay {

// "tokenizer", "attention", ... for a PB_KIND_* value; nullptr for a value this SDK does not
// know (a newer kind).
constexpr const char* component_kind_name(pb_component_kind kind) {
  switch (kind) {
    case PB_KIND_TOKENIZER:
      return "tokenizer";
    case PB_KIND_ATTENTION:
      return "attention";
    case PB_KIND_FEEDFORWARD:
      return "feedforward";
    case PB_KIND_OPTIMIZER:
      return "optimizer";
    case PB_KIND_PARALLELISM:
      return "parallelism";
    case PB_KIND_SAMPLER:
      return "sampler";
  }
  return nullptr;
}

// Thrown by plugin code to fail with a specific code; message says what was expected, what
// was found and what to do. Any other std::exception becomes PB_STATUS_INTERNAL (with its
// what()), std::bad_alloc becomes PB_STATUS_OUT_OF_MEMORY.
class PluginError : public std::exception {
 public:
  PluginError(pb_status_code code, std::string message)
      : code_(code), message_(std::move(message)) {}
  pb_status_code code() const noexcept { return code_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  pb_status_code code_;
  std::string message_;
};

struct Status {
  // NULL: the ABI's "success".
  static pb_status* ok() noexcept { return nullptr; }

  // A status owned by the caller of the plugin function. Never throws; `host` is the api
  // the plugin was handed. Falls back to a fixed text when the message cannot be copied.
  static pb_status* error(const pb_host_api* host, pb_status_code code,
                          std::string_view message) noexcept {
    try {
      const std::string text(message);
      return host->status_create(code, text.c_str());
    } catch (...) {
      return host->status_create(PB_STATUS_OUT_OF_MEMORY, "out of memory building a status");
    }
  }

  // Converts the exception being handled (call only inside a catch block) into a status.
  // `context` names the operation, e.g. "tokenizer encode"; it prefixes the message.
  static pb_status* from_current_exception(const pb_host_api* host, const char* context) noexcept {
    try {
      throw;
    } catch (const PluginError& e) {
      return error(host, e.code(), with_context(context, e.what()));
    } catch (const std::bad_alloc&) {
      return host->status_create(PB_STATUS_OUT_OF_MEMORY, "out of memory");
    } catch (const std::exception& e) {
      return error(host, PB_STATUS_INTERNAL, with_context(context, e.what()));
    } catch (...) {
      return error(host, PB_STATUS_INTERNAL,
                   with_context(context, "unknown exception (not derived from std::exception)"));
    }
  }

 private:
  static std::string with_context(const char* context, const char* message) noexcept {
    try {
      return std::string(context) + ": " + message;
    } catch (...) {
      return {};
    }
  }
};

// Runs `body` (returning void) and reports its outcome as a status: NULL when it returns,
// the converted exception when it throws. Every adapter callback goes through this, so no
// exception ever leaves a plugin.
template <class Body>
pb_status* guarded(const pb_host_api* host, const char* context, Body&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (...) {
    return Status::from_current_exception(host, context);
  }
}

// A component's view of the host. Cheap to copy; valid while the object it was handed to
// is alive (the host keeps pb_host_api alive at least that long).
class Host {
 public:
  explicit Host(const pb_host_api* api) : api_(api) {}
  const pb_host_api* api() const { return api_; }

  // `component` may be null; it is shown beside the message in the host's log.
  void log(pb_log_level level, const char* component, std::string_view message) const {
    const std::string text(message);
    api_->log(level, component, text.c_str());
  }
  pb_status* status(pb_status_code code, std::string_view message) const noexcept {
    return Status::error(api_, code, message);
  }
  // Host memory (released only with free_bytes); throws std::bad_alloc when it fails.
  void* alloc_bytes(size_t bytes, size_t alignment = 64) const {
    void* p = api_->alloc(bytes, alignment);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void free_bytes(void* p) const { api_->free(p); }

 private:
  const pb_host_api* api_;
};

// Typed reads of the config handed to create(). The host has already validated the
// values against the schema, so a failure here means the code asks for a key it did not
// declare, or with another type: both are bugs in the component and say so.
class ConfigView {
 public:
  explicit ConfigView(const pb_config_view* view) : view_(view) {}

  size_t size() const { return view_ == nullptr ? 0 : view_->count; }
  const pb_config_value& at(size_t index) const {
    return *PB_ARRAY_AT(pb_config_value, view_->values, index);
  }
  bool has(std::string_view key) const { return lookup(key) != nullptr; }

  int64_t get_int(std::string_view key) const { return require(key, PB_TYPE_INT, "int").int_value; }
  // An INT value is accepted and converted (TOML `1` for a float key).
  double get_float(std::string_view key) const {
    const pb_config_value& v = require_present(key);
    if (v.type == PB_TYPE_INT) return static_cast<double>(v.int_value);
    check_type(v, PB_TYPE_FLOAT, "float");
    return v.float_value;
  }
  bool get_bool(std::string_view key) const {
    return require(key, PB_TYPE_BOOL, "bool").bool_value != 0;
  }
  std::string get_string(std::string_view key) const {
    const pb_config_value& v = require(key, PB_TYPE_STRING, "string");
    return v.string_value == nullptr ? std::string() : std::string(v.string_value);
  }
  std::vector<std::string> get_strings(std::string_view key) const {
    const pb_config_value& v = require(key, PB_TYPE_STRING_ARRAY, "array of strings");
    std::vector<std::string> items;
    items.reserve(v.string_count);
    for (size_t i = 0; i < v.string_count; ++i) items.emplace_back(v.string_items[i]);
    return items;
  }

  static const char* type_name(pb_value_type type) {
    switch (type) {
      case PB_TYPE_BOOL:
        return "bool";
      case PB_TYPE_INT:
        return "int";
      case PB_TYPE_FLOAT:
        return "float";
      case PB_TYPE_STRING:
        return "string";
      case PB_TYPE_STRING_ARRAY:
        return "array of strings";
    }
    return "unknown type";
  }

 private:
  const pb_config_value* lookup(std::string_view key) const {
    for (size_t i = 0; i < size(); ++i) {
      const pb_config_value& v = at(i);
      if (v.key != nullptr && key == v.key) return &v;
    }
    return nullptr;
  }
  const pb_config_value& require_present(std::string_view key) const {
    if (const pb_config_value* v = lookup(key)) return *v;
    std::string known;
    for (size_t i = 0; i < size(); ++i) {
      known += (i == 0 ? "" : ", ");
      known += at(i).key;
    }
    throw PluginError(PB_STATUS_NOT_FOUND, "config key '" + std::string(key) +
                                               "' is absent (keys present: " +
                                               (known.empty() ? std::string("none") : known) +
                                               "); declare it in the component's config schema");
  }
  static void check_type(const pb_config_value& v, pb_value_type expected,
                         const char* expected_name) {
    if (v.type != expected) {
      throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                        "config key '" + std::string(v.key) + "' holds a " + type_name(v.type) +
                            " but was read as " + expected_name +
                            "; read it with the accessor matching its schema type");
    }
  }
  const pb_config_value& require(std::string_view key, pb_value_type expected,
                                 const char* expected_name) const {
    const pb_config_value& v = require_present(key);
    check_type(v, expected, expected_name);
    return v;
  }

  const pb_config_view* view_;
};

// constexpr builder of schema entries; converts to pb_config_field. Defaults are TOML
// literals ("0.1", "true", "\"gelu\"", "[\"a\", \"b\"]").
//   constexpr pb_config_field kFields[] = {
//       patchbay::Field::integer("vocab_size", "512", "target vocabulary size").range(256, 1 <<
//       20), patchbay::Field::string("mode", "\"bytes\"", "what a token
//       is").choices("bytes|chars"),
//   };
class Field {
 public:
  static constexpr Field boolean(const char* key, const char* default_literal, const char* doc) {
    return Field(key, PB_TYPE_BOOL, default_literal, doc);
  }
  static constexpr Field integer(const char* key, const char* default_literal, const char* doc) {
    return Field(key, PB_TYPE_INT, default_literal, doc);
  }
  static constexpr Field real(const char* key, const char* default_literal, const char* doc) {
    return Field(key, PB_TYPE_FLOAT, default_literal, doc);
  }
  static constexpr Field string(const char* key, const char* default_literal, const char* doc) {
    return Field(key, PB_TYPE_STRING, default_literal, doc);
  }
  static constexpr Field strings(const char* key, const char* default_literal, const char* doc) {
    return Field(key, PB_TYPE_STRING_ARRAY, default_literal, doc);
  }
  // The user must set the key; there is no default.
  constexpr Field required() const {
    Field f = *this;
    f.field_.required = 1;
    f.field_.default_value = nullptr;
    return f;
  }
  // INT/FLOAT: inclusive bounds.
  constexpr Field range(double min_value, double max_value) const {
    Field f = *this;
    f.field_.has_range = 1;
    f.field_.min_value = min_value;
    f.field_.max_value = max_value;
    return f;
  }
  // STRING: '|'-separated allowed values.
  constexpr Field choices(const char* allowed) const {
    Field f = *this;
    f.field_.choices = allowed;
    return f;
  }
  constexpr operator pb_config_field() const { return field_; }  // NOLINT: implicit by design

 private:
  constexpr Field(const char* key, pb_value_type type, const char* default_literal, const char* doc)
      : field_{sizeof(pb_config_field), key, type, 0, default_literal, 0, 0.0, 0.0, nullptr, doc} {}
  pb_config_field field_;
};

}  // namespace patchbay
