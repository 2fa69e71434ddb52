// Patchbay SDK, header-only C++ layer: the one registration macro. Include this from the
// plugin's plugin.cpp (the file that only registers), after the headers that declare the
// component descriptors.
//
//   #include <patchbay/plugin.hpp>
//   #include "char_tokenizer.hpp"   // inline constexpr pb_component_descriptor kCharTokenizer
//   PATCHBAY_PLUGIN("tokenizer-char", "1.0.0", PATCHBAY_COMPONENT_LIST(&kCharTokenizer));
//
// PATCHBAY_PLUGIN, at namespace scope, once per shared library:
//  (a) defines the static pb_plugin_descriptor (ABI version of this SDK, minimum host
//      version, name, version, components) and the entry function returning it, exported
//      through Boost.DLL's alias mechanism under PB_PLUGIN_ENTRY_SYMBOL;
//  (b) writes the metadata text (below) into the ELF section PB_PLUGIN_METADATA_SECTION as an
//      exported, `used` constant named PB_PLUGIN_METADATA_SYMBOL, so that the host can list
//      the plugin without running any of its code. Both come from the same constexpr
//      descriptor, so they cannot disagree unless someone edits one by hand.
// PATCHBAY_PLUGIN_MIN_HOST(...) is the same with an explicit minimum host version (for a
// plugin that relies on host behaviour newer than the ABI minor's first release).
//
// Metadata text: ASCII lines "key value" ending in '\n', then a NUL:
//   patchbay-plugin-metadata 1
//   plugin tokenizer-char
//   version 1.0.0
//   abi 1.0
//   min-host 0.1.0
//   component tokenizer char 1.0.0 1.0        (kind name version interface-major.minor)
// The host ignores keys it does not know (a later SDK may add lines).
#pragma once

#include <array>
#include <cstddef>
#include <span>

// Boost.DLL with std::filesystem: otherwise <boost/dll/alias.hpp> drags Boost.System's error
// categories into every plugin as exported GNU-unique symbols, which would also make the
// library impossible to dlclose. Only the alias macro is used here.
#if !defined(BOOST_DLL_DETAIL_CONFIG_HPP) && !defined(BOOST_DLL_USE_STD_FS)
#define BOOST_DLL_USE_STD_FS
#endif
#include <boost/dll/alias.hpp>

#include "patchbay/component.hpp"
#include "patchbay/plugin.h"
#include "patchbay/tokenizer.hpp"

#define PB_PLUGIN_METADATA_SYMBOL "patchbay_plugin_metadata"

namespace patchbay::detail {

constexpr const char* kind_name(pb_component_kind kind) {
  const char* name = component_kind_name(kind);
  return name != nullptr ? name : "unknown";
}

// Writes the metadata text into a sink; run twice at compile time: once counting, once
// filling a buffer of exactly that size.
template <class Sink>
constexpr void write_metadata(Sink& sink, const pb_plugin_descriptor& d) {
  auto number = [&sink](uint64_t v) {
    char digits[24] = {};
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (n > 0) sink.put(digits[--n]);
  };
  auto text = [&sink](const char* s) {
    for (; s != nullptr && *s != '\0'; ++s) sink.put(*s);
  };
  text("patchbay-plugin-metadata 1\nplugin ");
  text(d.name);
  text("\nversion ");
  text(d.version);
  text("\nabi ");
  number(d.abi_major);
  sink.put('.');
  number(d.abi_minor);
  text("\nmin-host ");
  number(d.min_host_major);
  sink.put('.');
  number(d.min_host_minor);
  sink.put('.');
  number(d.min_host_patch);
  sink.put('\n');
  for (size_t i = 0; i < d.component_count; ++i) {
    const pb_component_descriptor& c = *d.components[i];
    text("component ");
    text(kind_name(c.kind));
    sink.put(' ');
    text(c.name);
    sink.put(' ');
    text(c.version);
    sink.put(' ');
    number(c.interface_major);
    sink.put('.');
    number(c.interface_minor);
    sink.put('\n');
  }
  sink.put('\0');
}

constexpr bool same_text(const char* a, const char* b) {
  for (; *a != '\0' && *a == *b; ++a, ++b) {
  }
  return *a == *b;
}

struct MetadataCounter {
  size_t size = 0;
  constexpr void put(char) { ++size; }
};

template <size_t N>
struct MetadataText {
  char text[N];
};

template <size_t N>
struct MetadataFiller {
  MetadataText<N> out{};
  size_t at = 0;
  constexpr void put(char c) { out.text[at++] = c; }
};

constexpr size_t metadata_size(const pb_plugin_descriptor& d) {
  MetadataCounter counter;
  write_metadata(counter, d);
  return counter.size;
}

template <size_t N>
constexpr MetadataText<N> metadata_text(const pb_plugin_descriptor& d) {
  MetadataFiller<N> filler;
  write_metadata(filler, d);
  return filler.out;
}

template <size_t N>
constexpr pb_plugin_descriptor make_plugin_descriptor(
    const char* name, const char* version, uint32_t host_major, uint32_t host_minor,
    uint32_t host_patch, const std::array<const pb_component_descriptor*, N>& components) {
  return pb_plugin_descriptor{sizeof(pb_plugin_descriptor),
                              PB_ABI_VERSION_MAJOR,
                              PB_ABI_VERSION_MINOR,
                              host_major,
                              host_minor,
                              host_patch,
                              name,
                              version,
                              N == 0 ? nullptr : components.data(),
                              N};
}

}  // namespace patchbay::detail

// The components a plugin provides: addresses of constexpr pb_component_descriptor objects.
#define PATCHBAY_COMPONENT_LIST(...) __VA_ARGS__

#define PATCHBAY_PLUGIN(NAME, VERSION, ...)                                                 \
  PATCHBAY_PLUGIN_MIN_HOST(NAME, VERSION, PB_ABI_SINCE_HOST_MAJOR, PB_ABI_SINCE_HOST_MINOR, \
                           PB_ABI_SINCE_HOST_PATCH, __VA_ARGS__)

#define PATCHBAY_PLUGIN_MIN_HOST(NAME, VERSION, HOST_MAJOR, HOST_MINOR, HOST_PATCH, ...)          \
  namespace patchbay_plugin_registration {                                                        \
  inline constexpr std::array kComponents =                                                       \
      std::to_array<const pb_component_descriptor*>({__VA_ARGS__});                               \
  inline constexpr pb_plugin_descriptor kDescriptor = ::patchbay::detail::make_plugin_descriptor( \
      NAME, VERSION, HOST_MAJOR, HOST_MINOR, HOST_PATCH, kComponents);                            \
  inline constexpr size_t kMetadataSize = ::patchbay::detail::metadata_size(kDescriptor);         \
  inline const pb_plugin_descriptor* entry() noexcept { return &kDescriptor; }                    \
  }                                                                                               \
  extern "C" __attribute__((used, visibility("default"), section(PB_PLUGIN_METADATA_SECTION)))    \
  const ::patchbay::detail::MetadataText<patchbay_plugin_registration::kMetadataSize>             \
      patchbay_plugin_metadata =                                                                  \
          ::patchbay::detail::metadata_text<patchbay_plugin_registration::kMetadataSize>(         \
              patchbay_plugin_registration::kDescriptor);                                         \
  BOOST_DLL_ALIAS(patchbay_plugin_registration::entry, patchbay_plugin_entry)                     \
  static_assert(::patchbay::detail::same_text(PB_PLUGIN_ENTRY_SYMBOL, "patchbay_plugin_entry"),   \
                "the alias name above must equal PB_PLUGIN_ENTRY_SYMBOL")
