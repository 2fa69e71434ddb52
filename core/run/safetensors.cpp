// safetensors writer and validating reader, JSON through nlohmann::json.
#include "run/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "run/atomic_file.hpp"

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

uint64_t element_count(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

[[noreturn]] void corrupt(const std::filesystem::path& path, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument,
              "'" + path.string() + "' is not a valid safetensors file: " + what +
                  ". It may be truncated or of another format; use an intact checkpoint.");
}

}  // namespace

const char* stored_dtype_name(StoredDType dtype) { return info(dtype).name; }
std::size_t stored_dtype_bytes(StoredDType dtype) { return info(dtype).bytes; }

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // nlohmann::ordered_json keeps the file order equal to the given order.
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
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
  const std::size_t data_begin = 8 + n;
  const std::size_t data_size = size - data_begin;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      for (auto m = it.value().begin(); m != it.value().end(); ++m)
        metadata_[m.key()] = m.value().is_string() ? m.value().get<std::string>() : m.value().dump();
      continue;
    }
    const auto& entry = it.value();
    if (!entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      corrupt(path, "tensor '" + it.key() + "' lacks dtype, shape or data_offsets");
    const std::string dname = entry["dtype"].get<std::string>();
    const auto* found = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                                     [&](const DTypeInfo& d) { return dname == d.name; });
    if (found == std::end(kDTypes)) corrupt(path, "tensor '" + it.key() + "' has unsupported dtype " + dname);
    StoredTensor t;
    t.dtype = found->dtype;
    t.shape = entry["shape"].get<std::vector<int64_t>>();
    const auto offsets = entry["data_offsets"].get<std::vector<uint64_t>>();
    if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size)
      corrupt(path, "tensor '" + it.key() + "' has data offsets outside the file");
    if (offsets[1] - offsets[0] != element_count(t.shape) * found->bytes)
      corrupt(path, "tensor '" + it.key() + "' byte range does not match its shape and dtype");
    t.data = std::span<const std::byte>(bytes_.data() + data_begin + offsets[0], offsets[1] - offsets[0]);
    order_.push_back(it.key());
    tensors_.emplace(it.key(), std::move(t));
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
