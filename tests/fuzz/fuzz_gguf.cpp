// GGUF reader (core/interop/gguf_reader.cpp): header, metadata values (nested arrays, strings),
// tensor infos (dims, types, offsets, alignment) bounds-checked against the file, and the
// dequantisation of every tensor the file describes (f32, f16, bf16, Q8_0, Q4_0/1, ...).
#include "common/error.hpp"
#include "fuzz_input.hpp"
#include "interop/gguf_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path path = patchbay_fuzz::as_file(data, size, "gguf");
  try {
    patchbay::interop::GgufFile file(path);
    for (const auto& [key, value] : file.metadata()) {
      if (value.type == patchbay::interop::GgufValueType::kArray &&
          value.element_type == patchbay::interop::GgufValueType::kString)
        (void)file.get_strings(key);
    }
    for (const patchbay::interop::GgufTensorInfo& info : file.tensors()) (void)file.read_f32(info);
  } catch (const patchbay::Error&) {
  }
  return 0;
}
