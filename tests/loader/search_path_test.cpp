// Discovery order: --plugin-path entries, then PATCHBAY_PLUGIN_PATH, then config paths, then
// the build and install folders; missing folders skipped, duplicates searched once; within a
// folder only *.so files, sorted.
#include <doctest/doctest.h>
#include <stdlib.h>

#include "loader_test_support.hpp"

using loader_test::ScratchFolder;
namespace rt = patchbay::runtime;

namespace {

// Sets an environment variable for one test, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("search path order: cli, environment, config, then built-in folders") {
  ScratchFolder cli1("cli1"), cli2("cli2"), env1("env1"), env2("env2"), cfg("cfg");
  ScopedEnv env("PATCHBAY_PLUGIN_PATH", env1.path().string() + "::" + cli1.path().string() + ":" +
                                            env2.path().string() +
                                            ":/nonexistent/patchbay/plugins");
  rt::SearchPathOptions options;
  options.cli_paths = {cli1.path().string(), cli2.path().string()};
  options.config_paths = {cfg.path().string()};
  options.use_default_folders = false;
  const std::vector<std::filesystem::path> expected = {cli1.path(), cli2.path(), env1.path(),
                                                       env2.path(), cfg.path()};
  CHECK(rt::plugin_search_path(options) == expected);  // cli1 once, missing folder skipped

  options.use_environment = false;
  CHECK(rt::plugin_search_path(options) ==
        std::vector<std::filesystem::path>{cli1.path(), cli2.path(), cfg.path()});
}

TEST_CASE("the build's plugin folder comes last when it exists") {
  rt::SearchPathOptions options;
  options.use_environment = false;
  const auto path = rt::plugin_search_path(options);
  if (std::filesystem::exists(rt::build_plugin_folder())) {
    REQUIRE_FALSE(path.empty());
    CHECK(path.front() == std::filesystem::weakly_canonical(rt::build_plugin_folder()));
  }
  CHECK(rt::build_plugin_folder().filename() == "plugins-out");
  CHECK(rt::install_plugin_folder().string().ends_with("lib/patchbay/plugins"));
}

TEST_CASE("plugin files: *.so only, sorted per folder, folders in path order, files once") {
  ScratchFolder a("a"), b("b");
  a.write("zeta.so", "");
  a.write("alpha.so", "");
  a.write("readme.md", "");
  std::filesystem::create_directory(a.path() / "nested.so");  // a folder, not a file
  b.write("mid.so", "");
  const auto files = rt::plugin_files({b.path(), a.path(), a.path() / "alpha.so"});
  const std::vector<std::filesystem::path> expected = {b.path() / "mid.so", a.path() / "alpha.so",
                                                       a.path() / "zeta.so"};
  CHECK(files == expected);
}
