// Patchbay SDK, header-only C++ layer for tokenizers: write a plain C++ class, get a
// pb_component_descriptor.
//
//   class CharTokenizer : public patchbay::Tokenizer {
//    public:
//     static constexpr uint64_t kCapabilities = PB_TOKENIZER_CAP_TRAIN;
//     CharTokenizer(const patchbay::Host& host, const patchbay::ConfigView& config);
//     int64_t vocab_size() const override;
//     std::vector<int32_t> encode(std::string_view text, bool allow_special) const override;
//     std::string decode(std::span<const int32_t> ids) const override;
//     void train(std::string_view text) override;                // optional (CAP_TRAIN)
//     std::vector<patchbay::SpecialToken> special_tokens() const override;  // optional
//     void save(const std::string& path) const override;
//     void load(const std::string& path) override;
//   };
//   inline constexpr pb_config_field kCharFields[] = {...};   // may be empty: omit it
//   inline constexpr pb_component_descriptor kCharTokenizer =
//       patchbay::make_tokenizer_component<CharTokenizer>("char", "1.0.0", "summary", kCharFields);
//
// The adapter (detail::TokenizerAdapter<T>) fills pb_tokenizer_vtable: it implements the
// buffer protocol of encode/decode, keeps the special-token strings alive between train/load
// calls, and catches every exception at the boundary (PluginError keeps its code; anything
// else becomes PB_STATUS_INTERNAL with what()). The descriptor is constexpr so that
// PATCHBAY_PLUGIN can write the metadata section at compile time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "patchbay/component.hpp"
#include "patchbay/tokenizer.h"

namespace patchbay {

struct SpecialToken {
  std::string text;  // e.g. "<|endoftext|>"
  int32_t id;
};

// Base class of C++ tokenizers. Methods may throw (PluginError for a chosen code).
// Concurrency as in tokenizer.h: const methods may run concurrently; train/load exclusive.
class Tokenizer {
 public:
  // PB_TOKENIZER_CAP_* bits; a derived class shadows this constant.
  static constexpr uint64_t kCapabilities = 0;

  virtual ~Tokenizer() = default;
  virtual int64_t vocab_size() const = 0;
  virtual std::vector<int32_t> encode(std::string_view text, bool allow_special) const = 0;
  // An id outside [0, vocab_size) must throw PluginError(PB_STATUS_OUT_OF_RANGE, ...).
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  virtual void train(std::string_view /*text*/) {
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "this tokenizer cannot be trained (no PB_TOKENIZER_CAP_TRAIN)");
  }
  virtual std::vector<SpecialToken> special_tokens() const { return {}; }
  virtual void save(const std::string& path) const = 0;
  virtual void load(const std::string& path) = 0;
};

namespace detail {

template <class T>
struct TokenizerObject {
  TokenizerObject(const pb_host_api* h, const pb_config_view* config)
      : host(h), impl(Host(h), ConfigView(config)) {
    refresh_specials();
  }
  void refresh_specials() { specials = impl.special_tokens(); }

  const pb_host_api* host;
  T impl;
  std::vector<SpecialToken> specials;  // owns the texts special_token() hands out
};

template <class T>
struct TokenizerAdapter {
  using Object = TokenizerObject<T>;
  static Object* self(void* p) { return static_cast<Object*>(p); }
  static const Object* self(const void* p) { return static_cast<const Object*>(p); }

  static pb_status* create(const pb_host_api* host, const pb_config_view* config,
                           void** out_instance) {
    *out_instance = nullptr;
    return guarded(host, "tokenizer create", [&] { *out_instance = new Object(host, config); });
  }
  static void destroy(void* instance) { delete self(instance); }

  static pb_status* train(void* p, const char* text, size_t text_len) {
    Object* o = self(p);
    return guarded(o->host, "tokenizer train", [&] {
      o->impl.train(std::string_view(text, text_len));
      o->refresh_specials();
    });
  }
  static int64_t vocab_size(const void* p) {
    try {
      return self(p)->impl.vocab_size();
    } catch (...) {
      return 0;  // the C signature has no error channel; 0 means "no vocabulary"
    }
  }
  static pb_status* encode(const void* p, const char* text, size_t text_len, int32_t allow_special,
                           int32_t* out_ids, size_t capacity, size_t* out_count) {
    const Object* o = self(p);
    *out_count = 0;
    pb_status* failure = nullptr;
    pb_status* st = guarded(o->host, "tokenizer encode", [&] {
      const std::vector<int32_t> ids =
          o->impl.encode(std::string_view(text, text_len), allow_special != 0);
      *out_count = ids.size();
      if (ids.size() > capacity) {
        failure = Status::error(o->host, PB_STATUS_BUFFER_TOO_SMALL,
                                "encode needs " + std::to_string(ids.size()) + " ids, capacity " +
                                    std::to_string(capacity));
        return;
      }
      if (!ids.empty()) std::memcpy(out_ids, ids.data(), ids.size() * sizeof(int32_t));
    });
    return st != nullptr ? st : failure;
  }
  static pb_status* decode(const void* p, const int32_t* ids, size_t id_count, char* out_bytes,
                           size_t capacity, size_t* out_len) {
    const Object* o = self(p);
    *out_len = 0;
    pb_status* failure = nullptr;
    pb_status* st = guarded(o->host, "tokenizer decode", [&] {
      const std::string bytes = o->impl.decode(std::span<const int32_t>(ids, id_count));
      *out_len = bytes.size();
      if (bytes.size() > capacity) {
        failure = Status::error(o->host, PB_STATUS_BUFFER_TOO_SMALL,
                                "decode needs " + std::to_string(bytes.size()) +
                                    " bytes, capacity " + std::to_string(capacity));
        return;
      }
      if (!bytes.empty()) std::memcpy(out_bytes, bytes.data(), bytes.size());
    });
    return st != nullptr ? st : failure;
  }
  static size_t special_token_count(const void* p) { return self(p)->specials.size(); }
  static pb_status* special_token(const void* p, size_t index, const char** out_text,
                                  int32_t* out_id) {
    const Object* o = self(p);
    if (index >= o->specials.size()) {
      return Status::error(o->host, PB_STATUS_OUT_OF_RANGE,
                           "special token index " + std::to_string(index) + " >= count " +
                               std::to_string(o->specials.size()));
    }
    *out_text = o->specials[index].text.c_str();
    *out_id = o->specials[index].id;
    return nullptr;
  }
  static pb_status* save(const void* p, const char* path) {
    const Object* o = self(p);
    return guarded(o->host, "tokenizer save", [&] { o->impl.save(std::string(path)); });
  }
  static pb_status* load(void* p, const char* path) {
    Object* o = self(p);
    return guarded(o->host, "tokenizer load", [&] {
      o->impl.load(std::string(path));
      o->refresh_specials();
    });
  }

  static constexpr pb_tokenizer_vtable kVtable = {
      sizeof(pb_tokenizer_vtable), T::kCapabilities, &train, &vocab_size, &encode, &decode,
      &special_token_count,        &special_token,   &save,  &load};
};

}  // namespace detail

// The component descriptor of tokenizer class T (derived from patchbay::Tokenizer and
// constructible from (const Host&, const ConfigView&)). `fields` must have static storage
// (a namespace-scope constexpr array); the strings must be literals.
template <class T>
constexpr pb_component_descriptor make_tokenizer_component(
    const char* name, const char* version, const char* summary,
    std::span<const pb_config_field> fields = {}) {
  static_assert(std::is_base_of_v<Tokenizer, T>, "T must derive from patchbay::Tokenizer");
  static_assert(std::is_constructible_v<T, const Host&, const ConfigView&>,
                "T needs a constructor T(const patchbay::Host&, const patchbay::ConfigView&)");
  return pb_component_descriptor{sizeof(pb_component_descriptor),
                                 PB_KIND_TOKENIZER,
                                 PB_TOKENIZER_INTERFACE_MAJOR,
                                 PB_TOKENIZER_INTERFACE_MINOR,
                                 name,
                                 version,
                                 summary,
                                 fields.empty() ? nullptr : fields.data(),
                                 fields.size(),
                                 &detail::TokenizerAdapter<T>::create,
                                 &detail::TokenizerAdapter<T>::destroy,
                                 &detail::TokenizerAdapter<T>::kVtable};
}

}  // namespace patchbay
