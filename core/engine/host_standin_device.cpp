// The host stand-in device (host_standin_device.hpp): a Backend over host memory with the
// stream-aware caching allocator, transfer counters, and the CPU kernels aliased to it.
#include "engine/host_standin_device.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/error.hpp"
#include "common/host_memory.hpp"
#include "engine/kernel_registry.hpp"
#include "engine/stream_allocator.hpp"

namespace patchbay::engine {
namespace {

constexpr DeviceType kStandinType = DeviceType::kCuda;

// Host memory; the stand-in's stream runs synchronously, so every event is complete when
// recorded (the event-guarded paths of the allocator are tested with a scripted fake in
// tests/device/test_stream_allocator.cpp).
class HostRawMemory final : public RawDeviceMemory {
 public:
  void* allocate(size_t bytes) override { return host_allocate(bytes); }
  void release(void* ptr) override { host_free(ptr); }
  EventId record_event(StreamId) override { return &events_; }
  bool event_complete(EventId) override { return true; }
  void event_synchronize(EventId) override {}
  void destroy_event(EventId) override {}

 private:
  int events_ = 0;  // a stable address to hand out as the event
};

class StandinStream final : public Stream {
 public:
  explicit StandinStream(Device device) : device_(device) {}
  Device device() const override { return device_; }
  void synchronize() override {}

 private:
  Device device_;
};

struct Counters {
  std::atomic<size_t> h2d{0}, h2d_bytes{0}, d2h{0}, d2h_bytes{0}, d2d{0};
};
Counters& counters() {
  static auto* c = new Counters();  // leaked: tensors in static storage may outlive it
  return *c;
}

class StandinBackend final : public Backend {
 public:
  explicit StandinBackend(int index)
      : device_{kStandinType, index}, allocator_(raw_), stream_(device_) {}
  Device device() const override { return device_; }
  void* allocate(size_t bytes) override {
    void* p = allocator_.allocate(bytes, &stream_);
    std::memset(p, 0xFF, bytes);  // reused blocks are poisoned too
    return p;
  }
  void free(void* ptr, size_t bytes) override { allocator_.free(ptr, bytes, &stream_); }
  void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
            Stream&) override {
    check_side(dst_device, "destination");
    check_side(src_device, "source");
    Counters& c = counters();
    if (src_device.type == DeviceType::kCpu && dst_device.type != DeviceType::kCpu) {
      ++c.h2d;
      c.h2d_bytes += bytes;
    } else if (src_device.type != DeviceType::kCpu && dst_device.type == DeviceType::kCpu) {
      ++c.d2h;
      c.d2h_bytes += bytes;
    } else if (src_device.type != DeviceType::kCpu) {
      ++c.d2d;
    }
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void fill(void* dst, const void* pattern, size_t pattern_bytes, size_t count, Stream&) override {
    auto* d = static_cast<char*>(dst);
    for (size_t i = 0; i < count; ++i) std::memcpy(d + i * pattern_bytes, pattern, pattern_bytes);
  }
  Stream& default_stream() override { return stream_; }
  MemoryStats memory_stats() const override { return allocator_.stats(); }
  void reset_peak() override { allocator_.reset_peak(); }
  void empty_cache() override { allocator_.empty_cache(); }

 private:
  void check_side(Device side, const char* which) const {
    if (side.type != DeviceType::kCpu && side != device_)
      throw Error(ErrorKind::kInvalidArgument, "stand-in device " + device_.str() + ": copy " +
                                                   which + " is on " + side.str() +
                                                   ", expected cpu or " + device_.str());
  }

  Device device_;
  HostRawMemory raw_;
  StreamCachingAllocator allocator_;
  StandinStream stream_;
};

std::unique_ptr<Backend> make_standin_backend(int index) {
  if (index != 0)
    throw Error(ErrorKind::kInvalidArgument,
                "the host stand-in device has index 0 only, found " + std::to_string(index));
  return std::make_unique<StandinBackend>(index);
}

}  // namespace

Device install_host_standin_device(const HostStandinOptions& options) {
  register_backend(kStandinType, &make_standin_backend);
  alias_kernels(DeviceType::kCpu, kStandinType, options.ops_without_kernel);
  register_standin_checked_kernels(options.ops_without_kernel);
  return Device{kStandinType, 0};
}

TransferCounts standin_transfer_counts() {
  const Counters& c = counters();
  return TransferCounts{c.h2d.load(), c.h2d_bytes.load(), c.d2h.load(), c.d2h_bytes.load(),
                        c.d2d.load()};
}

}  // namespace patchbay::engine
