// GGUF parsing with every size and offset checked against the file before use; see
// gguf_reader.hpp for the layout.
#include "interop/gguf_reader.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <limits>

#include "common/error.hpp"
#include "interop/gguf_types.hpp"

namespace patchbay::interop {

namespace {

constexpr uint32_t kMaxDims = 4;   // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 4;  // nested arrays beyond this are refused
constexpr uint64_t kMaxKeyBytes = 1 << 16;

// Bytes one element of a scalar value type takes (0 for string and array).
uint64_t scalar_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16:
      return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32:
      return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

// Sequential little-endian reads over [0, size) that throw instead of running past the end.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& file)
      : data_(data), size_(size), file_(file) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorKind::kInvalidArgument, "GGUF file " + file_ + ": " + what + " (at byte " +
                                                 std::to_string(pos_) + " of " +
                                                 std::to_string(size_) + ")");
  }
  uint64_t remaining() const { return size_ - pos_; }
  uint64_t position() const { return pos_; }
  void need(uint64_t bytes, const std::string& what) const {
    if (bytes > remaining())
      fail(what + " needs " + std::to_string(bytes) + " bytes but only " +
           std::to_string(remaining()) + " remain (the file is truncated or corrupt)");
  }
  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));  // the format is little-endian, as x86/ARM
    pos_ += sizeof(T);
    return value;
  }
  std::string read_string(const std::string& what, uint64_t limit) {
    const auto length = read<uint64_t>(what + " length");
    if (length > limit)
      fail(what + " is " + std::to_string(length) + " bytes long, over the limit of " +
           std::to_string(limit));
    need(length, what);
    std::string text(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(length));
    pos_ += length;
    return text;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  std::string file_;
};

GgufValue read_value(Cursor& in, GgufValueType type, const std::string& key, int depth) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufValueType::kU8:
      v.integer = in.read<uint8_t>(key);
      break;
    case GgufValueType::kI8:
      v.integer = in.read<int8_t>(key);
      break;
    case GgufValueType::kU16:
      v.integer = in.read<uint16_t>(key);
      break;
    case GgufValueType::kI16:
      v.integer = in.read<int16_t>(key);
      break;
    case GgufValueType::kU32:
      v.integer = in.read<uint32_t>(key);
      break;
    case GgufValueType::kI32:
      v.integer = in.read<int32_t>(key);
      break;
    case GgufValueType::kBool: {
      const auto b = in.read<uint8_t>(key);
      if (b > 1) in.fail("metadata '" + key + "' is a bool holding " + std::to_string(b));
      v.integer = b;
      break;
    }
    case GgufValueType::kU64: {
      const auto u = in.read<uint64_t>(key);
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        in.fail("metadata '" + key + "' holds the u64 " + std::to_string(u) + ", over 2^63 - 1");
      v.integer = static_cast<int64_t>(u);
      break;
    }
    case GgufValueType::kI64:
      v.integer = in.read<int64_t>(key);
      break;
    case GgufValueType::kF32:
      v.real = in.read<float>(key);
      break;
    case GgufValueType::kF64:
      v.real = in.read<double>(key);
      break;
    case GgufValueType::kString:
      v.text = in.read_string("metadata '" + key + "' string", in.remaining());
      break;
    case GgufValueType::kArray: {
      if (depth >= kMaxArrayDepth)
        in.fail("metadata '" + key + "' nests arrays deeper than " +
                std::to_string(kMaxArrayDepth));
      const auto element = in.read<uint32_t>(key + " array type");
      if (element > static_cast<uint32_t>(GgufValueType::kF64))
        in.fail("metadata '" + key + "' is an array of unknown value type " +
                std::to_string(element));
      v.element_type = static_cast<GgufValueType>(element);
      const auto count = in.read<uint64_t>(key + " array length");
      // Each element takes at least its scalar size, 8 bytes (string length) or 12 (array
      // header): a count the remaining bytes cannot hold is refused before reserving.
      const uint64_t smallest = v.element_type == GgufValueType::kString ? 8
                                : v.element_type == GgufValueType::kArray
                                    ? 12
                                    : scalar_size(v.element_type);
      if (count > in.remaining() / smallest)
        in.fail("metadata '" + key + "' claims " + std::to_string(count) +
                " array elements, more than the remaining bytes can hold");
      v.items.reserve(static_cast<size_t>(count));
      for (uint64_t i = 0; i < count; ++i)
        v.items.push_back(read_value(in, v.element_type, key, depth + 1));
      break;
    }
  }
  if (v.is_integer()) v.real = static_cast<double>(v.integer);
  return v;
}

const char* value_type_name(GgufValueType type) {
  static const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  return names[static_cast<uint32_t>(type)];
}

}  // namespace

bool GgufValue::is_integer() const {
  return type != GgufValueType::kF32 && type != GgufValueType::kF64 &&
         type != GgufValueType::kString && type != GgufValueType::kArray;
}
bool GgufValue::is_number() const {
  return is_integer() || type == GgufValueType::kF32 || type == GgufValueType::kF64;
}

std::vector<int64_t> GgufTensorInfo::shape() const { return {ne.rbegin(), ne.rend()}; }

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

GgufFile::GgufFile(const std::filesystem::path& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error(ErrorKind::kNotFound,
                "cannot open GGUF file " + path.string() + ": " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    throw Error(ErrorKind::kInvalidArgument, path.string() + " is not a regular file");
  }
  size_ = static_cast<size_t>(info.st_size);
  if (size_ > 0) {
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      ::close(fd);
      throw Error(ErrorKind::kInvalidArgument,
                  "cannot map GGUF file " + path.string() + ": " + std::strerror(errno));
    }
    data_ = static_cast<const uint8_t*>(mapped);
  }
  ::close(fd);
  try {
    parse();
  } catch (...) {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
    throw;
  }
}

GgufFile::~GgufFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void GgufFile::parse() {
  Cursor in(data_, size_, path_.string());
  in.need(4, "the magic \"GGUF\"");
  if (std::memcmp(data_, "GGUF", 4) != 0)
    in.fail("does not start with the magic \"GGUF\"; not a GGUF file");
  in.read<uint32_t>("magic");
  version_ = in.read<uint32_t>("version");
  if (version_ == 1)
    in.fail(
        "is GGUF version 1 (32-bit counts); only versions 2 and 3 are read. Convert it "
        "with a current llama.cpp");
  if (version_ != 2 && version_ != 3) {
    const bool swapped = (version_ & 0xFFFFu) == 0 && (version_ >> 24) <= 3;
    in.fail("has version " + std::to_string(version_) +
            (swapped ? " (a big-endian file; only little-endian GGUF is read)"
                     : "; versions 2 and 3 are read"));
  }
  const auto tensor_count = in.read<uint64_t>("tensor count");
  const auto metadata_count = in.read<uint64_t>("metadata count");
  // A metadata entry takes >= 8 (key length) + 4 (type) + 1 bytes; a tensor info >= 8 + 4 + 8
  // + 4 + 8. Counts the file cannot hold are refused before anything is reserved.
  if (metadata_count > in.remaining() / 13)
    in.fail("claims " + std::to_string(metadata_count) + " metadata entries, more than it holds");
  if (tensor_count > in.remaining() / 32)
    in.fail("claims " + std::to_string(tensor_count) + " tensors, more than it holds");
  for (uint64_t i = 0; i < metadata_count; ++i) {
    const std::string key = in.read_string("metadata key", kMaxKeyBytes);
    const auto type = in.read<uint32_t>("type of metadata '" + key + "'");
    if (type > static_cast<uint32_t>(GgufValueType::kF64))
      in.fail("metadata '" + key + "' has unknown value type " + std::to_string(type));
    GgufValue value = read_value(in, static_cast<GgufValueType>(type), key, 0);
    if (!metadata_.emplace(key, std::move(value)).second)
      in.fail("metadata key '" + key + "' appears twice");
  }
  if (const GgufValue* a = find("general.alignment")) {
    if (!a->is_integer() || a->integer <= 0 || (a->integer & (a->integer - 1)) != 0)
      in.fail("general.alignment must be a positive power of two, found " +
              (a->is_integer() ? std::to_string(a->integer) : std::string("a non-integer")));
    alignment_ = static_cast<uint64_t>(a->integer);
  }
  tensors_.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo t;
    t.name = in.read_string("tensor name", kMaxKeyBytes);
    const auto dims = in.read<uint32_t>("dims of tensor '" + t.name + "'");
    if (dims == 0 || dims > kMaxDims)
      in.fail("tensor '" + t.name + "' has " + std::to_string(dims) + " dims; 1 to 4 expected");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < dims; ++d) {
      const auto n = in.read<uint64_t>("shape of tensor '" + t.name + "'");
      if (n == 0 || n > (uint64_t{1} << 40) || numel > (uint64_t{1} << 50) / n)
        in.fail("tensor '" + t.name + "' has dim " + std::to_string(n) +
                " (zero, or a total size beyond 2^50 elements)");
      numel *= n;
      t.ne.push_back(static_cast<int64_t>(n));
    }
    t.type = in.read<uint32_t>("type of tensor '" + t.name + "'");
    t.offset = in.read<uint64_t>("offset of tensor '" + t.name + "'");
    const std::optional<GgmlBlock> block = ggml_block_of(t.type);
    if (!block)
      in.fail("tensor '" + t.name + "' is quantised as " + ggml_type_name(t.type) +
              ", which Patchbay does not dequantise (supported: F32, F16, BF16, Q8_0, Q4_0, "
              "Q4_1); requantise the model to one of those with llama.cpp's llama-quantize");
    if (t.ne[0] % block->elements != 0)
      in.fail("tensor '" + t.name + "' has rows of " + std::to_string(t.ne[0]) +
              " elements, not a " + "whole number of " + ggml_type_name(t.type) + " blocks of " +
              std::to_string(block->elements));
    t.bytes = numel / static_cast<uint64_t>(block->elements) * static_cast<uint64_t>(block->bytes);
    if (t.offset % alignment_ != 0)
      in.fail("tensor '" + t.name + "' starts at data offset " + std::to_string(t.offset) +
              ", not a multiple of the alignment " + std::to_string(alignment_));
    if (!tensor_index_.emplace(t.name, tensors_.size()).second)
      in.fail("tensor '" + t.name + "' appears twice");
    tensors_.push_back(std::move(t));
  }
  data_offset_ = (in.position() + alignment_ - 1) / alignment_ * alignment_;
  if (data_offset_ > size_)
    in.fail("the data section would start at byte " + std::to_string(data_offset_) +
            ", past the end (the file is truncated)");
  const uint64_t data_bytes = size_ - data_offset_;
  for (const GgufTensorInfo& t : tensors_)
    if (t.offset > data_bytes || t.bytes > data_bytes - t.offset)
      in.fail("tensor '" + t.name + "' (" + ggml_type_name(t.type) + ", " +
              std::to_string(t.bytes) + " bytes at data offset " + std::to_string(t.offset) +
              ") runs past the end of the " + std::to_string(data_bytes) +
              "-byte data section (the file is truncated)");
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

namespace {
[[noreturn]] void wrong_type(const std::filesystem::path& path, const std::string& key,
                             const GgufValue& v, const char* expected) {
  throw Error(ErrorKind::kInvalidArgument, "GGUF file " + path.string() + ": metadata '" + key +
                                               "' is " + value_type_name(v.type) + ", " + expected +
                                               " expected");
}
}  // namespace

std::optional<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_integer()) wrong_type(path_, key, *v, "an integer");
  return v->integer;
}

std::optional<double> GgufFile::get_real(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) wrong_type(path_, key, *v, "a number");
  return v->real;
}

std::optional<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufValueType::kString) wrong_type(path_, key, *v, "a string");
  return v->text;
}

std::vector<std::string> GgufFile::get_strings(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return {};
  if (v->type != GgufValueType::kArray || v->element_type != GgufValueType::kString)
    wrong_type(path_, key, *v, "an array of strings");
  std::vector<std::string> out;
  out.reserve(v->items.size());
  for (const GgufValue& item : v->items) out.push_back(item.text);
  return out;
}

std::vector<int64_t> GgufFile::get_ints(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return {};
  bool integers = v->type == GgufValueType::kArray;
  for (size_t i = 0; integers && i < v->items.size(); ++i) integers = v->items[i].is_integer();
  if (!integers) wrong_type(path_, key, *v, "an array of integers");
  std::vector<int64_t> out;
  out.reserve(v->items.size());
  for (const GgufValue& item : v->items) out.push_back(item.integer);
  return out;
}

const GgufTensorInfo* GgufFile::tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<float> GgufFile::read_f32(const GgufTensorInfo& info) const {
  std::vector<float> out(static_cast<size_t>(info.numel()));
  dequantize(info.type, data_ + data_offset_ + info.offset, info.numel(), out.data());
  return out;
}

}  // namespace patchbay::interop
