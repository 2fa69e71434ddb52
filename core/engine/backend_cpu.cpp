// The CPU backend (synchronous stream, 64-byte aligned caching allocator, memcpy/fill) and
// the process-wide backend and kernel registries.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string_view>
#include <unordered_map>

#include "common/error.hpp"
#include "common/host_memory.hpp"
#include "engine/allocator.hpp"
#include "engine/device.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_registry.hpp"

namespace patchbay::engine {
namespace {

class CpuStream final : public Stream {
 public:
  Device device() const override { return cpu(); }
  void synchronize() override {}
};

// Huge-page-backed from 2 MiB up (common/host_memory.hpp).
void* cpu_raw_alloc(size_t bytes) { return host_allocate(bytes); }
void cpu_raw_free(void* p) { host_free(p); }

class CpuBackend final : public Backend {
 public:
  CpuBackend() : allocator_(cpu_raw_alloc, cpu_raw_free) {}
  Device device() const override { return cpu(); }
  void* allocate(size_t bytes) override { return allocator_.allocate(bytes); }
  void free(void* ptr, size_t bytes) override { allocator_.free(ptr, bytes); }
  void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
            Stream&) override {
    if (dst_device.type != DeviceType::kCpu || src_device.type != DeviceType::kCpu)
      throw Error(ErrorKind::kInvalidArgument, "cpu backend copy: both sides must be cpu (got " +
                                                   src_device.str() + " -> " + dst_device.str() +
                                                   ")");
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void fill(void* dst, const void* pattern, size_t pattern_bytes, size_t count, Stream&) override {
    auto* d = static_cast<char*>(dst);
    bool zero = true;
    for (size_t i = 0; i < pattern_bytes; ++i)
      zero = zero && static_cast<const char*>(pattern)[i] == 0;
    if (zero) {
      std::memset(dst, 0, pattern_bytes * count);
      return;
    }
#pragma omp parallel for if (count > (1 << 16))
    for (int64_t i = 0; i < static_cast<int64_t>(count); ++i)
      std::memcpy(d + i * pattern_bytes, pattern, pattern_bytes);
  }
  Stream& default_stream() override { return stream_; }
  MemoryStats memory_stats() const override { return allocator_.stats(); }
  void reset_peak() override { allocator_.reset_peak(); }
  void empty_cache() override { allocator_.empty_cache(); }

 private:
  CachingAllocator allocator_;
  CpuStream stream_;
};

std::unique_ptr<Backend> make_cpu_backend(int) { return std::make_unique<CpuBackend>(); }

struct BackendRegistry {
  std::mutex mutex;
  std::map<DeviceType, BackendFactory> factories{{DeviceType::kCpu, &make_cpu_backend}};
  std::map<std::pair<int, int>, std::unique_ptr<Backend>> backends;
};
BackendRegistry& backend_registry() {
  // Leaked on purpose: tensors in static storage may be destroyed after it would be.
  static auto* registry = new BackendRegistry();
  return *registry;
}

// Kernels by op name, one slot per device type. Lookups take a shared lock and do not
// allocate (heterogeneous string_view lookup); registration happens during static init.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
struct KernelRegistry {
  std::shared_mutex mutex;
  std::unordered_map<std::string, std::array<ErasedKernel, 2>, StringHash, std::equal_to<>> kernels;
};
KernelRegistry& kernel_registry() {
  static auto* registry = new KernelRegistry();
  return *registry;
}
size_t device_slot(DeviceType device) { return device == DeviceType::kCpu ? 0 : 1; }

}  // namespace

Backend& backend_for(Device device) {
  // Fast path for the CPU (every allocation and free asks): created once, never replaced.
  if (device.type == DeviceType::kCpu && device.index == 0) {
    static Backend* const cpu_backend = [] {
      static std::unique_ptr<Backend>* holder = new std::unique_ptr<Backend>(make_cpu_backend(0));
      return holder->get();
    }();
    return *cpu_backend;
  }
  BackendRegistry& r = backend_registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto key = std::make_pair(static_cast<int>(device.type), device.index);
  auto it = r.backends.find(key);
  if (it != r.backends.end()) return *it->second;
  auto f = r.factories.find(device.type);
  if (f == r.factories.end())
    throw Error(ErrorKind::kInvalidArgument,
                "no backend for device " + device.str() +
                    " is registered: the CUDA backend registers itself when CUDA initialises "
                    "(a build with CUDA, a usable GPU, run.device = \"cuda\"); use cpu");
  if (device.type == DeviceType::kCpu && device.index != 0)
    throw Error(ErrorKind::kInvalidArgument,
                "cpu device index must be 0, found " + std::to_string(device.index));
  auto& slot = r.backends[key];
  slot = f->second(device.index);
  return *slot;
}

void register_backend(DeviceType type, BackendFactory factory) {
  BackendRegistry& r = backend_registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.factories[type] = factory;
}

MemoryStats memory_stats(Device device) { return backend_for(device).memory_stats(); }
void reset_peak(Device device) { backend_for(device).reset_peak(); }

void register_kernel_erased(std::string_view op, DeviceType device, ErasedKernel kernel) {
  KernelRegistry& r = kernel_registry();
  std::unique_lock<std::shared_mutex> lock(r.mutex);
  auto it = r.kernels.find(op);
  if (it == r.kernels.end())
    it = r.kernels.emplace(std::string(op), std::array<ErasedKernel, 2>{}).first;
  it->second[device_slot(device)] = kernel;
}

ErasedKernel find_kernel_erased(std::string_view op, DeviceType device) {
  KernelRegistry& r = kernel_registry();
  {
    std::shared_lock<std::shared_mutex> lock(r.mutex);
    auto it = r.kernels.find(op);
    if (it != r.kernels.end() && it->second[device_slot(device)])
      return it->second[device_slot(device)];
  }
  throw Error(ErrorKind::kInvalidArgument,
              "op '" + std::string(op) + "' has no kernel for device type " +
                  device_type_name(device) + " in this build; move its tensors with .to(cpu()) " +
                  "or run on the cpu (--device cpu)");
}

const char* device_type_name(DeviceType type) { return type == DeviceType::kCpu ? "cpu" : "cuda"; }

bool has_kernel(std::string_view op, DeviceType device) {
  KernelRegistry& r = kernel_registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  auto it = r.kernels.find(op);
  return it != r.kernels.end() && it->second[device_slot(device)] != nullptr;
}

std::vector<std::string> kernel_names(DeviceType device) {
  KernelRegistry& r = kernel_registry();
  std::vector<std::string> names;
  {
    std::shared_lock<std::shared_mutex> lock(r.mutex);
    for (const auto& [name, slots] : r.kernels)
      if (slots[device_slot(device)] != nullptr) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> kernels_missing_for(DeviceType device) {
  std::vector<std::string> missing;
  for (const std::string& op : kernel_names(DeviceType::kCpu))
    if (!has_kernel(op, device)) missing.push_back(op);
  return missing;
}

void alias_kernels(DeviceType from, DeviceType to, const std::vector<std::string>& except) {
  KernelRegistry& r = kernel_registry();
  std::unique_lock<std::shared_mutex> lock(r.mutex);
  for (auto& [name, slots] : r.kernels) {
    const bool excluded = std::find(except.begin(), except.end(), name) != except.end();
    slots[device_slot(to)] = excluded ? nullptr : slots[device_slot(from)];
  }
}

void unregister_kernel(std::string_view op, DeviceType device) {
  KernelRegistry& r = kernel_registry();
  std::unique_lock<std::shared_mutex> lock(r.mutex);
  auto it = r.kernels.find(op);
  if (it != r.kernels.end()) it->second[device_slot(device)] = nullptr;
}

}  // namespace patchbay::engine
