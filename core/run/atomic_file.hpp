// Crash-safe file replacement: write everything to a temporary file beside the target,
// flush it to disk, then rename over the target. A crash or a full disk at any point leaves
// either the old file or the new one, never a torn file.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string_view>

namespace patchbay::run {

// Sink handed to the writer callback; each call appends bytes. Throws patchbay::Error
// (kIo) naming the file when the write fails (e.g. ENOSPC), after removing the temporary.
class AtomicWriter {
 public:
  virtual ~AtomicWriter() = default;
  virtual void write(const void* data, std::size_t bytes) = 0;
  void write(std::string_view text) { write(text.data(), text.size()); }
};

// Creates parent folders, calls `fill` with a writer on "<path>.tmp-<pid>", fsyncs, renames
// onto `path` and fsyncs the folder. On any failure the temporary is removed, `path` keeps
// its previous contents, and a patchbay::Error (kIo) says what failed and what to do.
void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(AtomicWriter&)>& fill);

// Convenience for small text files.
void write_text_atomically(const std::filesystem::path& path, std::string_view text);

}  // namespace patchbay::run
