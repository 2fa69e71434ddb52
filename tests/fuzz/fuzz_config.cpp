// TOML config loader (core/config): parse, includes (resolved in an empty scratch folder),
// validation against the host sections, defaults, and printing the result back as TOML.
#include <filesystem>

#include "common/error.hpp"
#include "config/config_loader.hpp"
#include "config/config_printer.hpp"
#include "config/config_validator.hpp"
#include "config/host_schema.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path base = [] {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("patchbay_fuzz_config_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    return dir;
  }();
  try {
    patchbay::config::ResolvedConfig config =
        patchbay::config::load_config_text(patchbay_fuzz::text(data, size), "fuzz.toml", base);
    const patchbay::config::SchemaRegistry schema = patchbay::config::make_host_schema();
    (void)patchbay::config::validate_config(config, schema, {});
    (void)patchbay::config::to_toml(config);
  } catch (const patchbay::Error&) {
  }
  return 0;
}
