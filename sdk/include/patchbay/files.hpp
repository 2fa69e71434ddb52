// Patchbay SDK, header-only helpers for components that save and load state: whole-file
// reads and atomic writes (a temporary file beside the target, then rename, so a crash
// never leaves a half-written file under the real name), and a hex codec for keeping
// arbitrary bytes in text formats. File failures throw patchbay::PluginError(PB_STATUS_IO_ERROR)
// naming the path and the system's reason.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "patchbay/component.hpp"

namespace patchbay {

inline std::string read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    throw PluginError(PB_STATUS_IO_ERROR,
                      "cannot open '" + path + "' for reading: " + std::strerror(errno));
  }
  std::string bytes;
  char chunk[1 << 16];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) bytes.append(chunk, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) throw PluginError(PB_STATUS_IO_ERROR, "error while reading '" + path + "'");
  return bytes;
}

inline void write_file_atomically(const std::string& path, std::string_view bytes) {
  // A temporary unique to this process and call, so concurrent writers of one path never
  // share a temporary (the last rename wins, and every rename moves a complete file).
  static std::atomic<unsigned long> calls{0};
  const std::string temporary =
      path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(calls.fetch_add(1));
  std::FILE* f = std::fopen(temporary.c_str(), "wb");
  if (f == nullptr) {
    throw PluginError(PB_STATUS_IO_ERROR,
                      "cannot open '" + temporary + "' for writing: " + std::strerror(errno));
  }
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed) {
    std::remove(temporary.c_str());
    throw PluginError(PB_STATUS_IO_ERROR, "cannot write '" + temporary + "' (disk full?)");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    throw PluginError(PB_STATUS_IO_ERROR,
                      "cannot rename '" + temporary + "' to '" + path + "': " + reason);
  }
}

// "héllo" -> lower-case hex of its bytes, two digits per byte.
inline std::string hex_encode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    hex.push_back(kDigits[c >> 4]);
    hex.push_back(kDigits[c & 15]);
  }
  return hex;
}

// The inverse of hex_encode (either case). Odd length or a non-hex digit throws
// PluginError(PB_STATUS_INVALID_ARGUMENT) quoting the text.
inline std::string hex_decode(std::string_view hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, "odd-length hex string '" + std::string(hex) + "'");
  }
  std::string bytes;
  bytes.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]);
    const int lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) {
      throw PluginError(PB_STATUS_INVALID_ARGUMENT, "bad hex digit in '" + std::string(hex) + "'");
    }
    bytes.push_back(static_cast<char>(hi * 16 + lo));
  }
  return bytes;
}

}  // namespace patchbay
