// ComponentInstance and TokenizerHandle (see component_instance.hpp).
#include "runtime/component_instance.hpp"

#include <utility>

#include "common/error.hpp"
#include "runtime/host_api.hpp"

namespace patchbay::runtime {

ComponentInstance::ComponentInstance(std::shared_ptr<const void> keep_alive,
                                     const pb_component_descriptor* component, void* object,
                                     std::filesystem::path file)
    : keep_alive_(std::move(keep_alive)),
      component_(component),
      object_(object),
      file_(std::move(file)) {}

ComponentInstance::~ComponentInstance() { reset(); }

ComponentInstance::ComponentInstance(ComponentInstance&& other) noexcept
    : keep_alive_(std::move(other.keep_alive_)),
      component_(std::exchange(other.component_, nullptr)),
      object_(std::exchange(other.object_, nullptr)),
      file_(std::move(other.file_)) {}

ComponentInstance& ComponentInstance::operator=(ComponentInstance&& other) noexcept {
  if (this != &other) {
    reset();
    keep_alive_ = std::move(other.keep_alive_);
    component_ = std::exchange(other.component_, nullptr);
    object_ = std::exchange(other.object_, nullptr);
    file_ = std::move(other.file_);
  }
  return *this;
}

void ComponentInstance::reset() noexcept {
  // Destroy the object first, then release the library that holds destroy's code.
  if (object_ != nullptr) component_->destroy(object_);
  object_ = nullptr;
  component_ = nullptr;
  keep_alive_.reset();
}

std::string ComponentInstance::name() const {
  return component_ != nullptr && component_->name != nullptr ? component_->name : "";
}

TokenizerHandle::TokenizerHandle(ComponentInstance instance, const pb_host_api* host)
    : instance_(std::move(instance)), vtable_(nullptr), host_(host) {
  if (!instance_ || instance_.component()->kind != PB_KIND_TOKENIZER) {
    throw Error(ErrorKind::kInternal, "TokenizerHandle needs a tokenizer instance");
  }
  vtable_ = static_cast<const pb_tokenizer_vtable*>(instance_.component()->vtable);
}

std::string TokenizerHandle::context(const char* operation) const {
  return "tokenizer '" + instance_.name() + "' (" + instance_.file().string() + "): " + operation;
}

std::vector<int32_t> TokenizerHandle::encode(std::string_view text, bool allow_special) const {
  // Byte-level tokenizers never need more ids than bytes; others may ask for a retry.
  std::vector<int32_t> ids(text.size() + 1);
  size_t count = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    pb_status* status = vtable_->encode(instance_.get(), text.data(), text.size(),
                                        allow_special ? 1 : 0, ids.data(), ids.size(), &count);
    if (status_code(status) == PB_STATUS_BUFFER_TOO_SMALL && attempt == 0 && count > ids.size()) {
      StatusPtr ignored(status);
      ids.resize(count);
      continue;
    }
    throw_if_error(status, context("encode failed"));
    if (count > ids.size()) {
      throw Error(ErrorKind::kInternal, context("encode reported more ids than its buffer"));
    }
    ids.resize(count);
    return ids;
  }
  throw Error(ErrorKind::kInternal, context("encode asked for a larger buffer twice"));
}

std::string TokenizerHandle::decode(std::span<const int32_t> ids) const {
  std::string bytes(ids.size() * 4 + 16, '\0');
  size_t length = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    pb_status* status = vtable_->decode(instance_.get(), ids.data(), ids.size(), bytes.data(),
                                        bytes.size(), &length);
    if (status_code(status) == PB_STATUS_BUFFER_TOO_SMALL && attempt == 0 &&
        length > bytes.size()) {
      StatusPtr ignored(status);
      bytes.resize(length);
      continue;
    }
    throw_if_error(status, context("decode failed"));
    if (length > bytes.size()) {
      throw Error(ErrorKind::kInternal, context("decode reported more bytes than its buffer"));
    }
    bytes.resize(length);
    return bytes;
  }
  throw Error(ErrorKind::kInternal, context("decode asked for a larger buffer twice"));
}

void TokenizerHandle::train(std::string_view text) {
  throw_if_error(vtable_->train(instance_.get(), text.data(), text.size()),
                 context("train failed"));
}

void TokenizerHandle::save(const std::string& path) const {
  throw_if_error(vtable_->save(instance_.get(), path.c_str()), context("save failed"));
}

void TokenizerHandle::load(const std::string& path) {
  throw_if_error(vtable_->load(instance_.get(), path.c_str()), context("load failed"));
}

int64_t TokenizerHandle::vocab_size() const { return vtable_->vocab_size(instance_.get()); }

std::vector<SpecialTokenInfo> TokenizerHandle::special_tokens() const {
  std::vector<SpecialTokenInfo> out;
  const size_t count = vtable_->special_token_count(instance_.get());
  for (size_t i = 0; i < count; ++i) {
    const char* text = nullptr;
    int32_t id = 0;
    throw_if_error(vtable_->special_token(instance_.get(), i, &text, &id),
                   context("special_token failed"));
    out.push_back(SpecialTokenInfo{text != nullptr ? text : "", id});
  }
  return out;
}

}  // namespace patchbay::runtime
