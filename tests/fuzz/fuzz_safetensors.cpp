// safetensors reader (core/run/safetensors.cpp): header JSON, field types, byte ranges tiling
// the data section, checksum, and the finite-value scan checkpoints run on every tensor.
#include <vector>

#include "common/error.hpp"
#include "fuzz_input.hpp"
#include "run/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                               reinterpret_cast<const std::byte*>(data) + size);
  try {
    patchbay::run::SafetensorsFile file(std::move(bytes), "fuzz.safetensors");
    for (const std::string& name : file.names())
      (void)patchbay::run::first_non_finite(file.tensor(name));
  } catch (const patchbay::Error&) {
  }
  return 0;
}
