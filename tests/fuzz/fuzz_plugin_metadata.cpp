// Plugin files read without loading them (core/runtime): the ELF reader (header, sections,
// .dynsym), Boost.DLL's format check, and the metadata text parser, on the input as a file;
// the metadata parser also on the input as text.
#include "common/error.hpp"
#include "fuzz_input.hpp"
#include "runtime/plugin_metadata.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)patchbay::runtime::read_plugin_metadata(patchbay_fuzz::as_file(data, size, "plugin.so"));
  } catch (const patchbay::Error&) {
  }
  try {
    (void)patchbay::runtime::parse_plugin_metadata(std::string(patchbay_fuzz::text(data, size)));
  } catch (const patchbay::Error&) {
  }
  return 0;
}
