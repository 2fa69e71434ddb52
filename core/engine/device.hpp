// Devices, streams and the per-device Backend interface. A Backend owns memory
// (allocate/free through its caching allocator), copies and fills; op kernels are not
// virtual methods but entries in the dispatch table (dispatch.hpp) keyed by op name and
// device type, so a CUDA backend adds kernels without touching Tensor or the ops API.
// Thread safety: backends are created once per device and are safe to call concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace patchbay::engine {

enum class DeviceType : uint8_t { kCpu = 0, kCuda = 1 };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;
  bool operator==(const Device&) const = default;
  std::string str() const {
    return std::string(type == DeviceType::kCpu ? "cpu" : "cuda") + ":" + std::to_string(index);
  }
};
inline Device cpu() { return Device{}; }

// Work queue of a device. CPU streams run everything synchronously on the calling thread
// (kernels parallelise internally with OpenMP), so synchronize() is a no-op there.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual Device device() const = 0;
  virtual void synchronize() = 0;
};

struct MemoryStats {
  size_t current_bytes = 0;  // bytes handed out to live tensors (rounded to size classes)
  size_t peak_bytes = 0;     // max of current_bytes since start or reset_peak()
  size_t cached_bytes = 0;   // bytes held in free lists, ready for reuse
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  // Returns 64-byte aligned memory of at least `bytes` (never null; throws on failure).
  virtual void* allocate(size_t bytes) = 0;
  virtual void free(void* ptr, size_t bytes) = 0;
  // Copies `bytes` from src (on src_device) to dst (on this device or from it).
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                    Stream& stream) = 0;
  // Writes `count` copies of the `pattern_bytes`-long pattern to dst.
  virtual void fill(void* dst, const void* pattern, size_t pattern_bytes, size_t count,
                    Stream& stream) = 0;
  virtual Stream& default_stream() = 0;
  virtual MemoryStats memory_stats() const = 0;
  virtual void reset_peak() = 0;
  // Returns cached free blocks to the system.
  virtual void empty_cache() = 0;
};

// The backend of `device`, created on first use. Throws patchbay::Error when no backend
// for that device type is registered (e.g. CUDA in a CPU-only build).
Backend& backend_for(Device device);

using BackendFactory = std::unique_ptr<Backend> (*)(int index);
// Registers the factory for a device type (the CPU one registers itself).
void register_backend(DeviceType type, BackendFactory factory);

MemoryStats memory_stats(Device device);
void reset_peak(Device device);

}  // namespace patchbay::engine
