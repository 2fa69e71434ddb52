// Patchbay SDK, header-only helpers for components that save and load state: whole-file
// reads and atomic writes (a temporary file beside the target, then rename, so a crash
// never leaves a half-written file under the real name). Failures throw
// patchbay::PluginError(PB_STATUS_IO_ERROR) naming the path and the system's reason.
#pragma once

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
  const std::string temporary = path + ".tmp";
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

}  // namespace patchbay
