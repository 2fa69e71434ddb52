// safetensors writer and validating reader, JSON through nlohmann::json.
#include "run/safetensors.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "run/atomic_file.hpp"
#include "run/xxhash64.hpp"

namespace patchbay::run {
namespace {

struct DTypeInfo {
  StoredDType dtype;
  const char* name;
  std::size_t bytes;
};
constexpr DTypeInfo kDTypes[] = {{StoredDType::kF32, "F32", 4}, {StoredDType::kF16, "F16", 2},
                                 {StoredDType::kBF16, "BF16", 2}, {StoredDType::kI32, "I32", 4},
                                 {StoredDType::kI64, "I64", 8},  {StoredDType::kU8, "U8", 1}};

const DTypeInfo& info(StoredDType dtype) {
  for (const auto& d : kDTypes)
    if (d.dtype == dtype) return d;
  throw Error(ErrorKind::kInternal, "safetensors: unknown dtype enum value");
}

// Product of the dims; shapes come from writers here (validated by the caller for files read).
uint64_t element_count(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

[[noreturn]] void corrupt(const std::filesystem::path& path, const std::string& what) {
  throw Error(ErrorKind::kIo,
              "'" + path.string() + "' is not a valid safetensors file: " + what +
                  ". It may be truncated, corrupted or of another format; use an intact copy.");
}

uint64_t data_checksum(const std::vector<TensorToWrite>& tensors) {
  Xxhash64 hash;
  for (const auto& t : tensors) hash.update(t.data);
  return hash.digest();
}

// One tensor's header entry: {"dtype": "F32", "shape": [...], "data_offsets": [b, e]}, every
// field of the right JSON type, dims non-negative, the byte count free of overflow.
StoredTensor parse_entry(const std::filesystem::path& path, const std::string& name,
                         const nlohmann::ordered_json& entry,
                         std::pair<uint64_t, uint64_t>& range) {
  const std::string where = "tensor '" + name + "'";
  if (!entry.is_object())
    corrupt(path, where + " is described by " + std::string(entry.type_name()) + ", not an object");
  const auto dtype = entry.find("dtype");
  const auto shape = entry.find("shape");
  const auto offsets = entry.find("data_offsets");
  if (dtype == entry.end() || shape == entry.end() || offsets == entry.end())
    corrupt(path, where + " lacks dtype, shape or data_offsets");
  if (!dtype->is_string()) corrupt(path, where + " has a dtype that is not a string");
  const std::string dname = dtype->get<std::string>();
  const auto* found = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                                   [&](const DTypeInfo& d) { return dname == d.name; });
  if (found == std::end(kDTypes)) corrupt(path, where + " has unsupported dtype " + dname);
  StoredTensor t;
  t.dtype = found->dtype;
  if (!shape->is_array()) corrupt(path, where + " has a shape that is not an array");
  uint64_t bytes = found->bytes;
  for (const auto& dim : *shape) {
    if (!dim.is_number_unsigned() && !(dim.is_number_integer() && dim.get<int64_t>() >= 0))
      corrupt(path, where + " has shape " + shape->dump() + "; dims must be non-negative integers");
    const uint64_t d = dim.get<uint64_t>();
    if (d > static_cast<uint64_t>(INT64_MAX) || (d != 0 && bytes > UINT64_MAX / d))
      corrupt(path, where + " has shape " + shape->dump() + ", too large to address");
    bytes *= d;
    t.shape.push_back(static_cast<int64_t>(d));
  }
  if (!offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned())
    corrupt(path, where + " has data_offsets " + offsets->dump() +
                      "; expected [begin, end], non-negative integers");
  range = {(*offsets)[0].get<uint64_t>(), (*offsets)[1].get<uint64_t>()};
  if (range.first > range.second)
    corrupt(path, where + " has data_offsets that end before they begin");
  if (range.second - range.first != bytes)
    corrupt(path, where + " byte range (" + std::to_string(range.second - range.first) +
                      " bytes) does not match its shape and dtype (" + std::to_string(bytes) +
                      " bytes)");
  return t;
}

// The ranges, in file order, must tile [0, data_size): each byte belongs to exactly one tensor.
void check_ranges_tile(const std::filesystem::path& path, const std::vector<std::string>& names,
                       const std::vector<std::pair<uint64_t, uint64_t>>& ranges,
                       uint64_t data_size) {
  std::vector<std::size_t> order(ranges.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return ranges[a] < ranges[b]; });
  uint64_t covered = 0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const auto& [begin, end] = ranges[order[k]];
    if (end > data_size)
      corrupt(path, "tensor '" + names[order[k]] + "' has data offsets outside the file (bytes " +
                        std::to_string(begin) + ".." + std::to_string(end) + " of a " +
                        std::to_string(data_size) + "-byte data section)");
    if (begin < covered)
      corrupt(path, "tensors '" + names[order[k - 1]] + "' and '" + names[order[k]] +
                        "' overlap (at byte " + std::to_string(begin) + " of the data section)");
    if (begin > covered)
      corrupt(path, "bytes " + std::to_string(covered) + ".." + std::to_string(begin) +
                        " of the data section belong to no tensor (a gap before '" +
                        names[order[k]] + "')");
    covered = end;
  }
  if (covered != data_size)
    corrupt(path, "bytes " + std::to_string(covered) + ".." + std::to_string(data_size) +
                      " of the data section belong to no tensor (trailing bytes)");
}

float bf16_to_float(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, 4);
  return f;
}

}  // namespace

const char* stored_dtype_name(StoredDType dtype) { return info(dtype).name; }
std::size_t stored_dtype_bytes(StoredDType dtype) { return info(dtype).bytes; }

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // nlohmann::ordered_json keeps the file order equal to the given order.
  nlohmann::ordered_json header;
  std::map<std::string, std::string> stored_metadata = metadata;
  stored_metadata[kDataChecksumKey] = hex64(data_checksum(tensors));
  header["__metadata__"] = stored_metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__" || header.contains(t.name))
      throw Error(ErrorKind::kInvalidArgument, "safetensors: duplicate or reserved tensor name '" +
                                                   t.name + "' while writing " + path.string());
    const uint64_t bytes = element_count(t.shape) * stored_dtype_bytes(t.dtype);
    if (bytes != t.data.size())
      throw Error(ErrorKind::kInternal, "safetensors: tensor '" + t.name + "' has " +
                                            std::to_string(t.data.size()) + " bytes, shape needs " +
                                            std::to_string(bytes));
    header[t.name] = {{"dtype", stored_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  write_file_atomically(path, [&](AtomicWriter& w) {
    uint64_t n = text.size();
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(n >> (8 * i));
    w.write(le, 8);
    w.write(text);
    for (const auto& t : tensors) w.write(t.data.data(), t.data.size());
  });
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    throw Error(ErrorKind::kNotFound, "cannot open safetensors file '" + path.string() +
                                          "': check the path (is the run directory right?)");
  const auto size = static_cast<std::size_t>(in.tellg());
  bytes_.resize(size);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes_.data()), static_cast<std::streamsize>(size));
  if (!in || static_cast<std::size_t>(in.gcount()) != size)
    throw Error(ErrorKind::kIo, "cannot read safetensors file '" + path.string() + "' (" +
                                    std::to_string(size) +
                                    " bytes expected); check that it is a regular, readable file");
  parse();
}

SafetensorsFile::SafetensorsFile(std::vector<std::byte> bytes, const std::filesystem::path& label)
    : path_(label), bytes_(std::move(bytes)) {
  parse();
}

void SafetensorsFile::parse() {
  const std::filesystem::path& path = path_;
  const std::size_t size = bytes_.size();
  if (size < 8) corrupt(path, "shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(std::to_integer<unsigned char>(bytes_[i])) << (8 * i);
  if (n > size - 8) corrupt(path, "header length " + std::to_string(n) + " exceeds the file size");
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(reinterpret_cast<const char*>(bytes_.data() + 8),
                                           reinterpret_cast<const char*>(bytes_.data() + 8 + n));
  } catch (const nlohmann::json::exception& e) {
    corrupt(path, std::string("header is not JSON (") + e.what() + ")");
  }
  if (!header.is_object())
    corrupt(path, "header is a JSON " + std::string(header.type_name()) + ", not an object");
  const std::size_t data_begin = 8 + n;
  const std::size_t data_size = size - data_begin;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) corrupt(path, "__metadata__ is not an object of strings");
      for (auto m = it.value().begin(); m != it.value().end(); ++m)
        metadata_[m.key()] = m.value().is_string() ? m.value().get<std::string>() : m.value().dump();
      continue;
    }
    std::pair<uint64_t, uint64_t> range;
    StoredTensor t = parse_entry(path, it.key(), it.value(), range);
    order_.push_back(it.key());
    ranges.push_back(range);
    tensors_.emplace(it.key(), std::move(t));
  }
  check_ranges_tile(path, order_, ranges, data_size);
  for (std::size_t i = 0; i < order_.size(); ++i)
    tensors_[order_[i]].data = std::span<const std::byte>(
        bytes_.data() + data_begin + ranges[i].first, ranges[i].second - ranges[i].first);
  const auto stored = metadata_.find(kDataChecksumKey);
  if (stored != metadata_.end()) {
    const std::string actual =
        hex64(xxhash64(std::span<const std::byte>(bytes_.data() + data_begin, data_size)));
    if (stored->second != actual)
      corrupt(path, "the data section's checksum is " + actual + ", the header records " +
                        stored->second + " (the tensors' bytes changed after it was written)");
    checksum_check_ = ChecksumCheck::kVerified;
  }
}

std::vector<std::string> SafetensorsFile::names() const { return order_; }

const StoredTensor& SafetensorsFile::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    std::string available;
    for (const auto& n : order_) available += (available.empty() ? "" : ", ") + n;
    throw Error(ErrorKind::kNotFound, "tensor '" + name + "' is not in '" + path_.string() +
                                          "'; it holds: " + available);
  }
  return it->second;
}

}  // namespace patchbay::run

namespace patchbay::run {

int64_t first_non_finite(const StoredTensor& tensor) {
  const auto* p = reinterpret_cast<const unsigned char*>(tensor.data.data());
  const std::size_t width = stored_dtype_bytes(tensor.dtype);
  const std::size_t n = tensor.data.size() / width;
  for (std::size_t i = 0; i < n; ++i) {
    float value = 0;
    if (tensor.dtype == StoredDType::kF32) {
      std::memcpy(&value, p + 4 * i, 4);
    } else if (tensor.dtype == StoredDType::kBF16 || tensor.dtype == StoredDType::kF16) {
      uint16_t bits;
      std::memcpy(&bits, p + 2 * i, 2);
      // An f16 with an all-ones exponent (bits 10-14) is Inf or NaN; bf16's exponent is float's.
      if (tensor.dtype == StoredDType::kF16) {
        if ((bits & 0x7c00u) == 0x7c00u) return static_cast<int64_t>(i);
        continue;
      }
      value = bf16_to_float(bits);
    } else {
      return -1;
    }
    if (!std::isfinite(value)) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace patchbay::run
