// Listing the sources' files in a fixed order; see source_files.hpp.
#include "data/source_files.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <fstream>

#include "common/error.hpp"
#include "data/input_stream.hpp"

namespace patchbay::data {
namespace fs = std::filesystem;

namespace {

bool is_binary(const fs::path& file) {
  if (compression_of(file) != Compression::kNone) return false;
  std::ifstream in(file, std::ios::binary);
  char head[8192];
  in.read(head, sizeof head);
  return std::find(head, head + in.gcount(), '\0') != head + in.gcount();
}

bool is_hidden(const fs::path& relative) {
  for (const fs::path& part : relative)
    if (!part.empty() && part.string()[0] == '.') return true;
  return false;
}

bool kept(const SourceSpec& source, const std::string& relative) {
  bool included = source.include.empty();
  for (const std::string& glob : source.include)
    included = included || glob_matches(glob, relative);
  if (!included) return false;
  for (const std::string& glob : source.exclude)
    if (glob_matches(glob, relative)) return false;
  return true;
}

std::string globs_text(const SourceSpec& source) {
  std::string text;
  for (const std::string& g : source.include) text += " --include '" + g + "'";
  for (const std::string& g : source.exclude) text += " --exclude '" + g + "'";
  return text.empty() ? " (no globs)" : text;
}

}  // namespace

bool glob_matches(const std::string& glob, const std::string& relative_path) {
  if (::fnmatch(glob.c_str(), relative_path.c_str(), 0) == 0) return true;
  const std::string name = fs::path(relative_path).filename().string();
  return ::fnmatch(glob.c_str(), name.c_str(), 0) == 0;
}

SourceFormat format_of(const fs::path& file) {
  const std::string ext = without_compression(file).extension().string();
  return ext == ".jsonl" || ext == ".ndjson" ? SourceFormat::kJsonLines : SourceFormat::kText;
}

std::vector<SourceFile> list_source_files(const std::vector<SourceSpec>& sources) {
  std::vector<SourceFile> files;
  for (size_t s = 0; s < sources.size(); ++s) {
    const SourceSpec& source = sources[s];
    std::error_code ec;
    const fs::file_status status = fs::status(source.path, ec);
    if (ec || !fs::exists(status))
      throw Error(ErrorKind::kNotFound, "source '" + source.path.string() +
                                            "' does not exist (a text file, a JSON Lines file "
                                            "or a folder was expected)");
    fs::path root = source.path;
    while (!root.empty() && root.filename().empty()) root = root.parent_path();  // "dir/"
    const std::string label = root.filename().string();
    const size_t first = files.size();
    if (fs::is_regular_file(status)) {
      files.push_back({source.path, label, format_of(source.path), s, fs::file_size(source.path)});
      continue;
    }
    std::vector<SourceFile> found;
    for (fs::recursive_directory_iterator
             it(source.path, fs::directory_options::skip_permission_denied, ec),
         end;
         it != end; it.increment(ec)) {
      if (ec)
        throw Error(ErrorKind::kIo,
                    "listing '" + source.path.string() + "' failed: " + ec.message());
      const fs::path relative = it->path().lexically_relative(source.path);
      if (is_hidden(relative)) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (!it->is_regular_file()) continue;
      const std::string rel = relative.generic_string();
      if (!kept(source, rel) || is_binary(it->path())) continue;
      found.push_back({it->path(), label + "/" + rel, format_of(it->path()), s, it->file_size()});
    }
    std::sort(found.begin(), found.end(),
              [](const SourceFile& a, const SourceFile& b) { return a.name < b.name; });
    files.insert(files.end(), found.begin(), found.end());
    if (files.size() == first)
      throw Error(ErrorKind::kInvalidArgument,
                  "source folder '" + source.path.string() +
                      "' has no text or JSON Lines file that the globs keep" + globs_text(source));
  }
  return files;
}

}  // namespace patchbay::data
