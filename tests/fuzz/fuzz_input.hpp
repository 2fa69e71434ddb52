// Shared by the libFuzzer targets of tests/fuzz: the input as text or bytes, and as a file for
// readers that take a path (one scratch file per process, rewritten for each input).
//
// Each target calls the reader on the input and catches only the errors the reader documents
// (patchbay::Error, patchbay::PluginError, the grammar parser's GrammarSyntaxError). Anything
// else escaping — std::out_of_range, nlohmann::json::exception, a stray std::invalid_argument —
// aborts the run like a crash: inputs must never reach the CLI as "internal: ...".
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace patchbay_fuzz {

inline std::string_view text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Writes the input to <tmp>/patchbay_fuzz_<tag>_<pid> and returns the path.
inline std::filesystem::path as_file(const uint8_t* data, size_t size, const char* tag) {
  static const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::filesystem::path path =
      dir / ("patchbay_fuzz_" + std::string(tag) + "_" + std::to_string(::getpid()));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace patchbay_fuzz
