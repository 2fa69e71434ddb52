// The installed SDK is enough to build a plugin, and the host loads what it builds.
// Steps (each a shell command whose output goes to a log printed on failure):
//   1. cmake --install <this build> --component patchbay_sdk --prefix <scratch>/prefix
//   2. configure sdk/examples/hello_tokenizer in a fresh folder with CMAKE_PREFIX_PATH=prefix
//   3. build it; check the compile commands use the prefix's headers, not the source tree's
//   4. load hello_tokenizer.so with runtime::Registry and round-trip a string
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "runtime/registry.hpp"

namespace fs = std::filesystem;
namespace rt = patchbay::runtime;

namespace {

const fs::path kScratch = PATCHBAY_SCRATCH_DIR;

// Appends piecewise: GCC 12 reports a false -Wrestrict on "'" + string + "'".
std::string quoted(const fs::path& p) {
  std::string out(1, '\'');
  out.append(p.string());
  out.push_back('\'');
  return out;
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Runs `command`, output to <scratch>/<step>.log; on failure the log is in the message.
void run_step(const std::string& step, const std::string& command) {
  const fs::path log = kScratch / (step + ".log");
  const int status = std::system((command + " > " + quoted(log) + " 2>&1").c_str());
  INFO("step '", step, "' ran: ", command, "\n--- output ---\n", read_text(log));
  REQUIRE(status == 0);
}

}  // namespace

TEST_CASE("a plugin built against the installed SDK only loads and round-trips") {
  const fs::path prefix = kScratch / "prefix";
  const fs::path build = kScratch / "hello-build";
  fs::remove_all(kScratch);
  fs::create_directories(kScratch);
  const std::string cmake = quoted(PATCHBAY_CMAKE_COMMAND);

  run_step("install", cmake + " --install " + quoted(PATCHBAY_BUILD_DIR) +
                          " --component patchbay_sdk --prefix " + quoted(prefix));
  CHECK(fs::exists(prefix / "include/patchbay/plugin.hpp"));
  CHECK(fs::exists(prefix / "lib/cmake/Patchbay/PatchbayConfig.cmake"));
  CHECK(fs::exists(prefix / "lib/cmake/Patchbay/PatchbayConfigVersion.cmake"));
  CHECK(fs::exists(prefix / "lib/cmake/Patchbay/PatchbayPlugin.cmake"));

  run_step("configure",
           cmake + " -S " + quoted(fs::path(PATCHBAY_SOURCE_DIR) / "sdk/examples/hello_tokenizer") +
               " -B " + quoted(build) + " -G " + quoted(PATCHBAY_CMAKE_GENERATOR) +
               " -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON" +
               " -DCMAKE_CXX_COMPILER=" + quoted(PATCHBAY_CXX_COMPILER) +
               " -DCMAKE_PREFIX_PATH=" + quoted(prefix) + " -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF");
  run_step("build", cmake + " --build " + quoted(build));

  // The plugin saw the installed headers, never the source tree's.
  const std::string commands = read_text(build / "compile_commands.json");
  CHECK(commands.find((prefix / "include").string()) != std::string::npos);
  CHECK(commands.find(std::string(PATCHBAY_SOURCE_DIR) + "/sdk/include") == std::string::npos);

  const fs::path plugin = build / "hello_tokenizer.so";
  REQUIRE(fs::exists(plugin));
  rt::Registry registry;
  registry.scan_file(plugin);
  for (const rt::RefusedPlugin& r : registry.refused()) INFO(r.reason);
  REQUIRE(registry.refused().empty());
  rt::ComponentConfig config(*registry.find(PB_KIND_TOKENIZER, "identity-byte").descriptor);
  rt::TokenizerHandle tok = registry.create_tokenizer("identity-byte", config.view());
  const std::string text = "In the beginning \xff\x00 was the byte.";
  CHECK(tok.decode(tok.encode(text)) == text);
  CHECK(tok.vocab_size() == 257);
}
