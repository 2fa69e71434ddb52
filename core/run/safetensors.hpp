// Reading and writing tensors in the safetensors layout (the Hugging Face convention):
//   [u64 little-endian N][N bytes of JSON header, space-padded to a multiple of 8][data]
// header: {"__metadata__": {string: string}, "<name>": {"dtype": "F32", "shape": [..],
//          "data_offsets": [begin, end]}}  with offsets relative to the data section.
// Writes are atomic (run/atomic_file.hpp) and store the XXH64 of the data section in the
// metadata (kDataChecksumKey). Reads validate the header's every field and type, that the
// tensors' byte ranges tile the data section exactly (no overlap, no gap, no tail: the
// safetensors rule), and the checksum when the file has one; a truncated, corrupted or foreign
// file is an Error(kIo) naming the file and what is wrong (exit code 5), never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace patchbay::run {

// Metadata key of the data section's checksum: 16 lowercase hex digits of its XXH64.
inline constexpr const char* kDataChecksumKey = "data.xxh64";

enum class StoredDType { kF32, kF16, kBF16, kI32, kI64, kU8 };

const char* stored_dtype_name(StoredDType dtype);  // "F32", "BF16", ...
std::size_t stored_dtype_bytes(StoredDType dtype);

// One tensor to write; `data` is borrowed for the call and holds product(shape) elements.
struct TensorToWrite {
  std::string name;
  StoredDType dtype;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;
};

// Writes `tensors` (names unique) and `metadata` to `path` atomically, in the given order.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata);

struct StoredTensor {
  StoredDType dtype;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;  // points into the SafetensorsFile; valid while it lives
};

// Whether a file's data section was checked against a stored checksum.
enum class ChecksumCheck { kVerified, kAbsent };

// A whole safetensors file read into memory and indexed.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);  // throws patchbay::Error
  // Parses bytes already in memory; `label` names them in errors (the fuzz targets use this).
  SafetensorsFile(std::vector<std::byte> bytes, const std::filesystem::path& label);

  // kAbsent: a file written before checksums (or by another tool); its ranges were still checked.
  ChecksumCheck checksum_check() const { return checksum_check_; }

  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::vector<std::string> names() const;  // in file order
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // Throws patchbay::Error (kNotFound) listing the available names when absent.
  const StoredTensor& tensor(const std::string& name) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  void parse();

  std::filesystem::path path_;
  std::vector<std::byte> bytes_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, StoredTensor> tensors_;
  std::vector<std::string> order_;
  ChecksumCheck checksum_check_ = ChecksumCheck::kAbsent;
};

// The index of the first NaN or infinite element of a floating-point tensor (F32, F16, BF16),
// or -1 when every element is finite (and always for integer tensors).
int64_t first_non_finite(const StoredTensor& tensor);

}  // namespace patchbay::run
