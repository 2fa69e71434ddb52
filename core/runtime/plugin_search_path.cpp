// The plugin search path (order and rules in plugin_search_path.hpp).
#include "runtime/plugin_search_path.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <cstdlib>
#include <set>

namespace patchbay::runtime {
namespace fs = std::filesystem;

namespace {

void split_colon_list(const std::string& list, std::vector<std::string>& out) {
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(':', start), list.size());
    if (end > start) out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
}

}  // namespace

fs::path build_plugin_folder() { return fs::path(PATCHBAY_BUILD_PLUGIN_DIR); }

fs::path install_plugin_folder() {
  try {
    const fs::path exe = boost::dll::program_location().string();
    return exe.parent_path().parent_path() / "lib" / "patchbay" / "plugins";
  } catch (const std::exception&) {
    return {};  // no /proc: only the other entries are searched
  }
}

std::vector<fs::path> plugin_search_path(const SearchPathOptions& options) {
  std::vector<std::string> entries = options.cli_paths;
  if (options.use_environment) {
    if (const char* env = std::getenv("PATCHBAY_PLUGIN_PATH")) split_colon_list(env, entries);
  }
  entries.insert(entries.end(), options.config_paths.begin(), options.config_paths.end());
  // The entries a user named (not the default folders, which may well be absent): a typo
  // there would otherwise look like a plugin that does not exist.
  for (const std::string& entry : entries) {
    std::error_code ec;
    if (!entry.empty() && !fs::exists(entry, ec))
      spdlog::warn("plugin path entry '{}' does not exist{}; it is skipped", entry,
                   ec ? " (" + ec.message() + ")" : std::string());
  }
  if (options.use_default_folders) {
    // An installed host (its <prefix>/lib/patchbay/plugins exists) uses the plugins installed
    // with it: searching the build folder too would find every built-in plugin twice and
    // refuse the second copies with a warning each.
    const fs::path installed = install_plugin_folder();
    std::error_code ec;
    if (installed.empty() || !fs::is_directory(installed, ec)) entries.push_back(build_plugin_folder().string());
    entries.push_back(installed.string());
  }

  std::vector<fs::path> path;
  std::set<fs::path> seen;
  for (const std::string& entry : entries) {
    if (entry.empty()) continue;
    std::error_code ec;
    if (!fs::exists(entry, ec)) continue;
    const fs::path canonical = fs::weakly_canonical(entry, ec);
    if (ec || !seen.insert(canonical).second) continue;
    path.push_back(canonical);
  }
  return path;
}

std::vector<fs::path> plugin_files(const std::vector<fs::path>& search_path) {
  std::vector<fs::path> files;
  std::set<fs::path> seen;
  auto add = [&](const fs::path& file) {
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(file, ec);
    if (!ec && seen.insert(canonical).second) files.push_back(canonical);
  };
  for (const fs::path& entry : search_path) {
    std::error_code ec;
    if (fs::is_directory(entry, ec)) {
      std::vector<fs::path> in_folder;
      for (const fs::directory_entry& e : fs::directory_iterator(entry, ec)) {
        std::error_code type_ec;
        if (e.path().extension() == ".so" && e.is_regular_file(type_ec)) {
          in_folder.push_back(e.path());
        }
      }
      if (ec)  // e.g. a folder without read permission: its plugins cannot be listed
        spdlog::warn("cannot read plugin folder '{}' ({}); its plugins are skipped", entry.string(),
                     ec.message());
      std::sort(in_folder.begin(), in_folder.end());
      for (const fs::path& f : in_folder) add(f);
    } else if (fs::exists(entry, ec)) {
      add(entry);
    }
  }
  return files;
}

}  // namespace patchbay::runtime
