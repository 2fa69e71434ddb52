// `patchbay plugin new KIND NAME [DIR]`: writes a ready-to-build plugin folder of one kind —
// sources, CMakeLists.txt (Release by default through PatchbayPlugin.cmake), README.md and a
// conformance test that loads the built .so with the engine test host (patchbay::testing) —
// from the templates in core/cli/plugin_templates/. The scaffold builds against an installed
// Patchbay and passes its kind's kit unchanged (tests/sdk_install checks every kind).
#include <boost/program_options.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/plugin_templates.hpp"
#include "common/error.hpp"

namespace patchbay::cli {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;

// How a user selects a component of each kind, for the README.
const std::map<std::string, std::string>& kind_usage() {
  static const std::map<std::string, std::string> usage = {
      {"tokenizer", "Use it: `patchbay --plugin-path build/@NAME@.so train CONFIG --set tokenizer.kind=@NAME@`."},
      {"attention", "Use it: `patchbay --plugin-path build/@NAME@.so train CONFIG --set model.attention.kind=@NAME@`."},
      {"feedforward",
       "Use it: `patchbay --plugin-path build/@NAME@.so train CONFIG --set model.feedforward.kind=@NAME@`."},
      {"optimizer", "Use it: `patchbay --plugin-path build/@NAME@.so train CONFIG --set optimizer.kind=@NAME@`."},
      {"sampler",
       "Use it: a `[[generate.chain]]` entry with `name = \"@NAME@\"` in the file given to "
       "`patchbay --plugin-path build/@NAME@.so generate RUN --config CHAIN.toml`."},
      {"parallelism",
       "Use it: the host creates the parallelism component named in the config; run the kit under "
       "your launcher for more than one process."},
  };
  return usage;
}

std::string substitute(std::string text, const std::string& name, const std::string& kind) {
  const std::pair<std::string, std::string> keys[] = {
      {"@USE@", kind_usage().at(kind)}, {"@NAME@", name}, {"@KIND@", kind}};
  for (const auto& [key, value] : keys) {
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
      text.replace(at, key.size(), value);
  }
  return text;
}

// "component.cpp.in" -> "<name>.cpp"; "CMakeLists.txt.in" -> "CMakeLists.txt".
std::string output_name(std::string_view template_path, const std::string& name) {
  std::string file(template_path.substr(template_path.rfind('/') + 1));
  file.resize(file.size() - 3);  // ".in"
  if (file.rfind("component.", 0) == 0) file = name + file.substr(std::string("component").size());
  return file;
}

int run_plugin_new(const std::vector<std::string>& args, const GlobalOptions&) {
  std::string kind, name, dir;
  bool help = false;
  po::options_description options("Options");
  options.add_options()("help,h", po::bool_switch(&help), "this help");
  po::options_description hidden;
  hidden.add_options()("kind", po::value(&kind))("name", po::value(&name))("dir", po::value(&dir));
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("kind", 1).add("name", 1).add("dir", 1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(all).positional(positional).run(), values);
  po::notify(values);
  const char* usage =
      "Usage: patchbay plugin new KIND NAME [DIR]\n\n"
      "Writes a ready-to-build plugin of KIND (tokenizer, attention, feedforward, optimizer,\n"
      "sampler, parallelism) whose component and plugin are called NAME into DIR (default ./NAME):\n"
      "NAME.hpp/.cpp, plugin.cpp, CMakeLists.txt (Release by default), README.md and\n"
      "conformance_test.cpp (the SDK's kit for KIND on the built NAME.so). Then:\n"
      "  cmake -S DIR -B DIR/build -DCMAKE_PREFIX_PATH=<patchbay install prefix>\n"
      "  cmake --build DIR/build && ctest --test-dir DIR/build --output-on-failure\n";
  if (help) {
    std::cout << usage << "\n" << options;
    return kExitOk;
  }
  if (kind.empty() || name.empty()) {
    std::cerr << "patchbay plugin new: give KIND and NAME\n" << usage;
    return kExitUsage;
  }
  if (kind_usage().count(kind) == 0)
    throw Error(ErrorKind::kInvalidArgument,
                "unknown plugin kind '" + kind +
                    "'; kinds: tokenizer, attention, feedforward, optimizer, sampler, parallelism");
  if (!std::regex_match(name, std::regex("[a-z][a-z0-9_]{0,47}")))
    throw Error(ErrorKind::kInvalidArgument,
                "plugin name '" + name +
                    "' must start with a lower-case letter and hold only a-z, 0-9 and _ (at most 48 "
                    "characters): it names the component, the plugin, the CMake target and a C++ "
                    "namespace");
  const fs::path folder = dir.empty() ? fs::path(name) : fs::path(dir);
  std::error_code ec;
  if (fs::exists(folder, ec) && !fs::is_empty(folder, ec))
    throw Error(ErrorKind::kInvalidArgument,
                "'" + folder.string() + "' exists and is not empty; give another DIR or remove it");
  fs::create_directories(folder);
  std::vector<std::string> written;
  for (const PluginTemplateFile& t : plugin_template_files()) {
    if (t.path.rfind("common/", 0) != 0 && t.path.rfind(kind + "/", 0) != 0) continue;
    const fs::path file = folder / output_name(t.path, name);
    std::ofstream out(file, std::ios::binary);
    out << substitute(std::string(t.text), name, kind);
    if (!out) throw Error(ErrorKind::kIo, "cannot write '" + file.string() + "'");
    written.push_back(file.filename().string());
  }
  std::cout << "wrote " << kind << " plugin '" << name << "' to " << folder.string() << "/:";
  for (const std::string& f : written) std::cout << " " << f;
  std::cout << "\nnext:\n"
            << "  cmake -S " << folder.string() << " -B " << (folder / "build").string()
            << " -DCMAKE_PREFIX_PATH=<patchbay install prefix>\n"
            << "  cmake --build " << (folder / "build").string() << "\n"
            << "  ctest --test-dir " << (folder / "build").string() << " --output-on-failure\n";
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"plugin new",
                           "Write a ready-to-build plugin folder of one kind, with its conformance test",
                           run_plugin_new});

}  // namespace patchbay::cli
