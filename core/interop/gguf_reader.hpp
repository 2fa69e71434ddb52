// Reader of GGUF files (llama.cpp's single-file model format, versions 2 and 3, little-endian).
//
// Layout: "GGUF", u32 version, u64 tensor count, u64 metadata count; metadata entries (string
// key, u32 value type, value); tensor infos (string name, u32 n_dims <= 4, u64 ne[n_dims] with
// ne[0] the fastest-varying dim, u32 ggml type, u64 offset into the data section); padding to
// `general.alignment` (default 32, a power of two); the data section. Strings are u64 length +
// UTF-8 bytes (no terminator). Value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32,
// 7 bool, 8 string, 9 array (u32 element type, u64 count, elements; arrays may nest), 10 u64,
// 11 i64, 12 f64.
//
// Everything is bounds-checked against the file size before it is used or allocated for: a
// string or array longer than the bytes left, a tensor whose data runs past the end, offsets
// off the alignment, dims whose product overflows, a row length that is not a whole number
// of blocks — each an Error(kInvalidArgument) naming the file, what was expected and what was
// found. A file is mapped read-only; tensors are dequantised to f32 on request.
// A tensor's shape in row-major (PyTorch) order is ne reversed: ne = [in, out] is [out, in].
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace patchbay::interop {

enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

struct GgufValue {
  GgufValueType type = GgufValueType::kU8;
  int64_t integer = 0;  // every integer type (u64 above 2^63 is refused) and bool
  double real = 0;      // f32, f64 (and integers, converted)
  std::string text;     // string
  GgufValueType element_type = GgufValueType::kU8;  // array
  std::vector<GgufValue> items;                     // array

  bool is_integer() const;  // an integer type or bool
  bool is_number() const;   // an integer or float type
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;             // ggml order: ne[0] fastest
  uint32_t type = 0;                   // ggml type id
  uint64_t offset = 0;                 // from the start of the data section
  uint64_t bytes = 0;                  // checked size of its data
  std::vector<int64_t> shape() const;  // row-major: ne reversed
  int64_t numel() const;
};

class GgufFile {
 public:
  // Maps and parses `path`. Throws Error(kNotFound) when it cannot be opened,
  // Error(kInvalidArgument) for anything malformed or a type Patchbay cannot dequantise
  // (named), before allocating for it.
  explicit GgufFile(const std::filesystem::path& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::filesystem::path& path() const { return path_; }

  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const GgufValue* find(const std::string& key) const;
  // Typed reads; Error naming the key when present with another type. `fallback` when absent.
  std::optional<int64_t> get_int(const std::string& key) const;
  std::optional<double> get_real(const std::string& key) const;
  std::optional<std::string> get_string(const std::string& key) const;
  // A string array (tokens, merges); Error when the key holds something else.
  std::vector<std::string> get_strings(const std::string& key) const;
  std::vector<int64_t> get_ints(const std::string& key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* tensor(const std::string& name) const;
  // The tensor's values as f32, row-major (shape()).
  std::vector<float> read_f32(const GgufTensorInfo& info) const;

 private:
  void parse();

  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;  // the mapped file
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace patchbay::interop
