// Private to patchbay_onednn: the process-wide oneDNN engine, the per-thread stream, the
// primitive cache and the error translation every op file uses. Not for other targets.
//
// Cache design: a key is a flat vector of int64 (op tag first, then every shape, stride,
// dtype and attribute the primitive depends on; floats enter as their bit pattern). The
// cache maps a key to a shared CachedPrimitive and keeps an LRU order. Lookups hold a
// mutex only for the map operation; a miss builds the primitive outside the lock (oneDNN
// primitive creation can take milliseconds with JIT) and inserts it afterwards. If two
// threads miss on the same key at once both build, one insert wins: correct, rare.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/error.hpp"
#include "onednn/onednn_ops.hpp"

namespace patchbay::onednn::detail {

// Op tags: the first element of every cache key.
enum class OpTag : std::int64_t {
  kMatmul = 1,
  kSoftmaxForward,
  kSoftmaxBackward,
  kLayerNormForward,
  kLayerNormBackward,
  kEltwiseForward,
  kEltwiseBackward
};

using CacheKey = std::vector<std::int64_t>;

// A built primitive plus the memory descriptors its op file needs at execution time,
// in an order the op file defines, and its scratchpad size.
struct CachedPrimitive {
  dnnl::primitive primitive;
  std::vector<dnnl::memory::desc> descs;
  dnnl::memory::desc scratchpad;  // from the primitive descriptor (user scratchpad mode)
  // When an op packs its weights operand into a layout (descs.back()) before every execution
  // (see matmul.cpp for when), one of these does it: packed_weights.hpp's direct copy for a
  // 2-D [k, n] B in f32 BA16a64b or bf16 BA16a64b2a, otherwise a oneDNN reorder. Both are
  // empty when weights are used in place.
  enum class DirectPack { kNone, kF32BA16a64b, kBf16BA16a64b2a };
  DirectPack direct_pack = DirectPack::kNone;
  std::shared_ptr<const CachedPrimitive> weights_reorder;
};

// Per-thread, 64-byte-aligned buffers that grow to the largest request seen on the
// thread; valid until the next request for the same slot on the same thread.
enum class ThreadBuffer { kScratchpad = 0, kPackedWeights = 1 };
void* thread_buffer(ThreadBuffer slot, std::size_t bytes);

// Attributes every primitive starts from: scratchpad_mode::user. oneDNN's default
// "library" scratchpad may be shared between primitives unless the library was built with
// ONEDNN_ENABLE_CONCURRENT_EXEC; with a user scratchpad each calling thread passes its own
// buffer (execute() below), so concurrent calls never share scratch memory.
dnnl::primitive_attr base_attr();

dnnl::engine& cpu_engine();
// The calling thread's stream over cpu_engine() (in-order, CPU: execution is synchronous
// once wait() returns).
dnnl::stream& thread_stream();

// Returns the cached primitive for `key`, building it with `build` on a miss.
std::shared_ptr<const CachedPrimitive> find_or_build(
    const CacheKey& key, const std::function<CachedPrimitive()>& build);

dnnl::memory::data_type to_dnnl(DType dtype);
std::int64_t float_bits(float value);

// Wraps a memory descriptor around a caller's buffer (no copy, no ownership).
inline dnnl::memory wrap(const dnnl::memory::desc& desc, const void* data) {
  return dnnl::memory(desc, cpu_engine(), const_cast<void*>(data));
}

// Executes on the calling thread's stream with the thread's scratchpad, and waits.
void execute(const CachedPrimitive& cached, std::unordered_map<int, dnnl::memory> args);

[[noreturn]] void throw_invalid(const std::string& op, const std::string& what);
// Rethrows a dnnl::error (or std::exception) caught while running `op` as patchbay::Error.
[[noreturn]] void rethrow_as_patchbay_error(const std::string& op, const std::string& shapes);

// Runs `body`, translating oneDNN failures; patchbay::Error passes through unchanged.
template <typename Body>
void run_guarded(const char* op, const std::function<std::string()>& describe_shapes,
                 Body&& body) {
  try {
    body();
  } catch (const patchbay::Error&) {
    throw;
  } catch (...) {
    rethrow_as_patchbay_error(op, describe_shapes());
  }
}

}  // namespace patchbay::onednn::detail
