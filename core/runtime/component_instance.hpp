// RAII handles on objects created by plugin components.
//
// ComponentInstance owns one object made by a component's create(): destroy() runs when the
// handle dies, and the handle keeps the plugin library loaded until then (a library is never
// unloaded while an object it created is alive). Move-only.
//
// TokenizerHandle wraps a PB_KIND_TOKENIZER instance and its pb_tokenizer_vtable in plain C++:
// every failure becomes patchbay::Error carrying the plugin's status message, prefixed by
// "tokenizer '<name>' (<file>): <operation>". The buffer protocol of encode/decode is handled
// here (one retry with the size the plugin reports).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "patchbay/component.h"
#include "patchbay/tokenizer.h"

namespace patchbay::runtime {

class ComponentInstance {
 public:
  ComponentInstance() = default;
  // Takes ownership of `object`, made by `component->create`. `keep_alive` is the library
  // that holds the component's code.
  ComponentInstance(std::shared_ptr<const void> keep_alive,
                    const pb_component_descriptor* component, void* object,
                    std::filesystem::path file);
  ~ComponentInstance();
  ComponentInstance(ComponentInstance&& other) noexcept;
  ComponentInstance& operator=(ComponentInstance&& other) noexcept;
  ComponentInstance(const ComponentInstance&) = delete;
  ComponentInstance& operator=(const ComponentInstance&) = delete;

  void* get() const { return object_; }
  const pb_component_descriptor* component() const { return component_; }
  const std::filesystem::path& file() const { return file_; }
  std::string name() const;  // the component's name
  explicit operator bool() const { return object_ != nullptr; }

 private:
  void reset() noexcept;

  std::shared_ptr<const void> keep_alive_;
  const pb_component_descriptor* component_ = nullptr;
  void* object_ = nullptr;
  std::filesystem::path file_;
};

struct SpecialTokenInfo {
  std::string text;
  int32_t id;
};

class TokenizerHandle {
 public:
  // `instance` must be a PB_KIND_TOKENIZER object; `host` the api it was created with.
  TokenizerHandle(ComponentInstance instance, const pb_host_api* host);

  std::vector<int32_t> encode(std::string_view text, bool allow_special = false) const;
  std::string decode(std::span<const int32_t> ids) const;
  void train(std::string_view text);
  void save(const std::string& path) const;
  void load(const std::string& path);
  int64_t vocab_size() const;
  std::vector<SpecialTokenInfo> special_tokens() const;

  uint64_t capabilities() const { return vtable_->capabilities; }
  bool can_train() const { return (capabilities() & PB_TOKENIZER_CAP_TRAIN) != 0; }
  bool byte_level() const { return (capabilities() & PB_TOKENIZER_CAP_BYTE_LEVEL) != 0; }
  const ComponentInstance& instance() const { return instance_; }

 private:
  std::string context(const char* operation) const;

  ComponentInstance instance_;
  const pb_tokenizer_vtable* vtable_;
  const pb_host_api* host_;
};

}  // namespace patchbay::runtime
