// Where the host looks for plugins, in priority order (an earlier folder wins when two
// files provide a plugin of the same name):
//   1. --plugin-path entries (command line), in the order given;
//   2. PATCHBAY_PLUGIN_PATH, colon-separated, in order;
//   3. paths from the config file ([plugins] paths);
//   4. this build's plugin folder (${PATCHBAY_PLUGIN_OUTPUT_DIR}, compiled in), unless 5
//      exists (an installed host uses its installed plugins only);
//   5. the install-relative folder <prefix>/lib/patchbay/plugins, <prefix> being the parent
//      of the running executable's folder.
// An entry may be a folder (its *.so files, not recursive, sorted by name) or one file.
// Missing folders are skipped; the same folder reached twice is searched once.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace patchbay::runtime {

struct SearchPathOptions {
  std::vector<std::string> cli_paths;     // 1
  bool use_environment = true;            // 2
  std::vector<std::string> config_paths;  // 3
  bool use_default_folders = true;        // 4 and 5
};

// The ordered, de-duplicated search path (entries that exist).
std::vector<std::filesystem::path> plugin_search_path(const SearchPathOptions& options);

// Candidate plugin files on `search_path`, in search order: each file entry itself, each
// folder's regular files ending in ".so" (sorted). Each file appears once.
std::vector<std::filesystem::path> plugin_files(
    const std::vector<std::filesystem::path>& search_path);

// The folders compiled in (4) and derived from the executable (5), for `--help` texts.
std::filesystem::path build_plugin_folder();
std::filesystem::path install_plugin_folder();

}  // namespace patchbay::runtime
