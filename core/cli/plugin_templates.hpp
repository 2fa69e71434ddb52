// The plugin scaffolds `patchbay plugin new` writes: the files of core/cli/plugin_templates/,
// embedded at configure time (core/cli/CMakeLists.txt generates the table). Paths are
// "common/CMakeLists.txt.in" or "<kind>/component.cpp.in"; texts hold @NAME@, @KIND@, @USE@.
#pragma once

#include <string_view>
#include <vector>

namespace patchbay::cli {

struct PluginTemplateFile {
  std::string_view path;
  std::string_view text;
};

const std::vector<PluginTemplateFile>& plugin_template_files();

}  // namespace patchbay::cli
