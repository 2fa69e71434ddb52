// The process-wide engine, per-thread streams, the bounded LRU primitive cache and error
// translation shared by every op in patchbay_onednn (see primitive_cache.hpp).
#include "onednn/primitive_cache.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/error.hpp"
#include "common/host_memory.hpp"

namespace patchbay::onednn {
namespace detail {
namespace {

struct CacheKeyHash {
  std::size_t operator()(const CacheKey& key) const {
    // FNV-1a over the 64-bit words; keys are short (< 32 words).
    std::uint64_t hash = 1469598103934665603ULL;
    for (std::int64_t word : key) {
      hash ^= static_cast<std::uint64_t>(word);
      hash *= 1099511628211ULL;
    }
    return static_cast<std::size_t>(hash);
  }
};

class PrimitiveCache {
 public:
  std::shared_ptr<const CachedPrimitive> find(const CacheKey& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = index_.find(key);
    if (found == index_.end()) {
      ++misses_;
      return nullptr;
    }
    ++hits_;
    lru_.splice(lru_.begin(), lru_, found->second);  // most recently used first
    return found->second->second;
  }

  std::shared_ptr<const CachedPrimitive> insert(const CacheKey& key,
                                                std::shared_ptr<const CachedPrimitive> value) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = index_.find(key);
    if (found != index_.end()) return found->second->second;  // another thread won the race
    lru_.emplace_front(key, std::move(value));
    index_.emplace(key, lru_.begin());
    evict_to(capacity_);
    return lru_.front().second;
  }

  PrimitiveCacheStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return PrimitiveCacheStats{hits_, misses_, index_.size(), capacity_};
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    index_.clear();
    lru_.clear();
    hits_ = 0;
    misses_ = 0;
  }

  void set_capacity(std::size_t capacity) {
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = capacity;
    evict_to(capacity_);
  }

 private:
  using Entry = std::pair<CacheKey, std::shared_ptr<const CachedPrimitive>>;

  void evict_to(std::size_t capacity) {
    while (lru_.size() > capacity) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }

  std::mutex mutex_;
  std::list<Entry> lru_;
  std::unordered_map<CacheKey, std::list<Entry>::iterator, CacheKeyHash> index_;
  std::size_t capacity_ = 1024;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
};

PrimitiveCache& cache() {
  static PrimitiveCache instance;
  return instance;
}

}  // namespace

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

std::shared_ptr<const CachedPrimitive> find_or_build(
    const CacheKey& key, const std::function<CachedPrimitive()>& build) {
  if (auto hit = cache().find(key)) return hit;
  auto built = std::make_shared<const CachedPrimitive>(build());
  return cache().insert(key, std::move(built));
}

dnnl::memory::data_type to_dnnl(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return dnnl::memory::data_type::f32;
    case DType::kBF16:
      return dnnl::memory::data_type::bf16;
  }
  throw Error(ErrorKind::kInvalidArgument, "onednn: unknown dtype");
}

std::int64_t float_bits(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return static_cast<std::int64_t>(bits);
}

dnnl::primitive_attr base_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void* thread_buffer(ThreadBuffer slot, std::size_t bytes) {
  // Grown, never shrunk; huge-page-backed from 2 MiB up (packed GEMM weights are megabytes).
  struct Buffer {
    void* data = nullptr;
    std::size_t bytes = 0;
    ~Buffer() { host_free(data); }
  };
  thread_local Buffer buffers[2];
  Buffer& buffer = buffers[static_cast<int>(slot)];
  if (buffer.bytes < bytes || buffer.data == nullptr) {
    void* grown = host_allocate(bytes);
    if (grown == nullptr)
      throw Error(ErrorKind::kInternal, "onednn: out of memory for a " + std::to_string(bytes) +
                                            "-byte scratch buffer");
    host_free(buffer.data);
    buffer.data = grown;
    buffer.bytes = bytes;
  }
  return buffer.data;
}

void execute(const CachedPrimitive& cached, std::unordered_map<int, dnnl::memory> args) {
  const std::size_t bytes = cached.scratchpad.get_size();
  if (bytes > 0) {
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 dnnl::memory(cached.scratchpad, cpu_engine(),
                              thread_buffer(ThreadBuffer::kScratchpad, bytes)));
  }
  dnnl::stream& stream = thread_stream();
  cached.primitive.execute(stream, args);
  stream.wait();
}

void throw_invalid(const std::string& op, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, "onednn " + op + ": " + what);
}

void rethrow_as_patchbay_error(const std::string& op, const std::string& shapes) {
  try {
    throw;
  } catch (const dnnl::error& failure) {
    throw Error(ErrorKind::kInternal, "onednn " + op + " " + shapes + ": oneDNN failed (status " +
                                          std::to_string(static_cast<int>(failure.status)) +
                                          "): " + failure.what());
  } catch (const std::exception& failure) {
    throw Error(ErrorKind::kInternal, "onednn " + op + " " + shapes + ": " + failure.what());
  }
}

}  // namespace detail

std::size_t dtype_size(DType dtype) { return dtype == DType::kBF16 ? 2 : 4; }

PrimitiveCacheStats primitive_cache_stats() { return detail::cache().stats(); }

void primitive_cache_clear() { detail::cache().clear(); }

void primitive_cache_set_capacity(std::size_t capacity) {
  if (capacity == 0) {
    throw Error(ErrorKind::kInvalidArgument, "onednn primitive cache: capacity must be >= 1");
  }
  detail::cache().set_capacity(capacity);
}

std::string onednn_build_description() {
  const dnnl_version_t* version = dnnl::version();
  std::string runtime = version->cpu_runtime == DNNL_RUNTIME_OMP    ? "OpenMP"
                        : version->cpu_runtime == DNNL_RUNTIME_TBB  ? "TBB"
                        : version->cpu_runtime == DNNL_RUNTIME_SEQ  ? "sequential"
                                                                    : "other runtime";
  std::string isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx:
      isa = "avx512_core_amx";
      break;
    case dnnl::cpu_isa::avx512_core_bf16:
      isa = "avx512_core_bf16";
      break;
    case dnnl::cpu_isa::avx512_core_vnni:
      isa = "avx512_core_vnni";
      break;
    case dnnl::cpu_isa::avx512_core:
      isa = "avx512_core";
      break;
    case dnnl::cpu_isa::avx2:
      isa = "avx2";
      break;
    default:
      isa = "isa code " + std::to_string(static_cast<int>(dnnl::get_effective_cpu_isa()));
  }
  return "oneDNN " + std::to_string(version->major) + "." + std::to_string(version->minor) + "." +
         std::to_string(version->patch) + " (" + runtime + "), ISA " + isa;
}

}  // namespace patchbay::onednn
