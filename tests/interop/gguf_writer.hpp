// A small GGUF writer used only by the tests (version 2 or 3, little-endian): metadata of
// every value type, tensors with their raw bytes, alignment padding as the format defines
// it. Tests build tiny files with it, including malformed ones (raw entries, bad offsets).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace gguf_test {

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3, uint64_t alignment = 32)
      : version_(version), alignment_(alignment) {}

  // Metadata (value type ids of the format: 4 u32, 5 i32, 6 f32, 7 bool, 8 string, 9 array,
  // 10 u64, 12 f64).
  void u32(const std::string& key, uint32_t v) { scalar(key, 4, v); }
  void i32(const std::string& key, int32_t v) { scalar(key, 5, v); }
  void f32(const std::string& key, float v) { scalar(key, 6, v); }
  void u64(const std::string& key, uint64_t v) { scalar(key, 10, v); }
  void f64(const std::string& key, double v) { scalar(key, 12, v); }
  void boolean(const std::string& key, bool v) { scalar(key, 7, static_cast<uint8_t>(v)); }
  void string(const std::string& key, const std::string& v) {
    begin(key, 8);
    put_string(kv_, v);
  }
  void strings(const std::string& key, const std::vector<std::string>& v) {
    begin(key, 9);
    put(kv_, uint32_t{8});
    put(kv_, static_cast<uint64_t>(v.size()));
    for (const std::string& s : v) put_string(kv_, s);
  }
  void i32s(const std::string& key, const std::vector<int32_t>& v) {
    begin(key, 9);
    put(kv_, uint32_t{5});
    put(kv_, static_cast<uint64_t>(v.size()));
    for (int32_t x : v) put(kv_, x);
  }
  // An entry of any type with hand-made value bytes (malformed files).
  void raw(const std::string& key, uint32_t type, const std::string& value_bytes) {
    begin(key, type);
    kv_ += value_bytes;
  }

  // ne in ggml order (ne[0] fastest); `data` the tensor's bytes in its type's layout.
  void tensor(const std::string& name, const std::vector<uint64_t>& ne, uint32_t type,
              const std::string& data) {
    tensors_.push_back({name, ne, type, data, 0, false});
  }
  // Same, with an explicit data offset (misaligned / out-of-range tests).
  void tensor_at(const std::string& name, const std::vector<uint64_t>& ne, uint32_t type,
                 const std::string& data, uint64_t offset) {
    tensors_.push_back({name, ne, type, data, offset, true});
  }
  void f32_tensor(const std::string& name, const std::vector<uint64_t>& ne,
                  const std::vector<float>& values) {
    std::string data(values.size() * 4, '\0');
    std::memcpy(data.data(), values.data(), data.size());
    tensor(name, ne, 0, data);
  }

  std::string bytes() const {
    std::string out = "GGUF";
    put(out, version_);
    put(out, static_cast<uint64_t>(tensors_.size()));
    put(out, kv_count_);
    out += kv_;
    std::string data;
    for (const Tensor& t : tensors_) {
      const uint64_t offset = t.fixed ? t.offset : data.size();
      put_string(out, t.name);
      put(out, static_cast<uint32_t>(t.ne.size()));
      for (uint64_t n : t.ne) put(out, n);
      put(out, t.type);
      put(out, offset);
      if (!t.fixed) {
        data += t.data;
        data.resize((data.size() + alignment_ - 1) / alignment_ * alignment_, '\0');
      }
    }
    out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, '\0');
    return out + data;
  }
  void write(const std::string& path) const {
    std::ofstream file(path, std::ios::binary);
    const std::string b = bytes();
    file.write(b.data(), static_cast<std::streamsize>(b.size()));
  }

  template <typename T>
  static void put(std::string& out, T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.append(b, sizeof(T));
  }
  static void put_string(std::string& out, const std::string& s) {
    put(out, static_cast<uint64_t>(s.size()));
    out += s;
  }

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    std::string data;
    uint64_t offset;
    bool fixed;
  };
  void begin(const std::string& key, uint32_t type) {
    put_string(kv_, key);
    put(kv_, type);
    ++kv_count_;
  }
  template <typename T>
  void scalar(const std::string& key, uint32_t type, T v) {
    begin(key, type);
    put(kv_, v);
  }

  uint32_t version_;
  uint64_t alignment_;
  uint64_t kv_count_ = 0;
  std::string kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace gguf_test
