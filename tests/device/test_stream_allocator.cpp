// The stream-aware caching allocator's bookkeeping (core/engine/stream_allocator.hpp) over a
// scripted fake device: host memory with stream-ordered events whose completion the test
// decides. Checks: size classes and same-stream reuse, no hand-over to another stream before
// the owner's event completes (and one event per block, not per request), hand-over after,
// statistics, and the out-of-memory path (waits for pending events, gives the cache back,
// retries, then fails with a clear message).
#include <doctest/doctest.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/stream_allocator.hpp"

namespace {

using patchbay::engine::EventId;
using patchbay::engine::RawDeviceMemory;
using patchbay::engine::StreamCachingAllocator;
using patchbay::engine::StreamId;

class ScriptedDevice final : public RawDeviceMemory {
 public:
  struct Event {
    StreamId stream;
    bool complete = false;
    bool destroyed = false;
  };
  size_t capacity = 1 << 20;  // bytes the device can hold at once
  size_t in_use = 0;
  std::vector<Event> events;  // index + 1 is the EventId
  std::set<void*> live;
  size_t synchronizations = 0;

  void* allocate(size_t bytes) override {
    if (in_use + bytes > capacity) return nullptr;
    void* p = std::malloc(bytes + sizeof(size_t));
    *static_cast<size_t*>(p) = bytes;
    in_use += bytes;
    live.insert(p);
    return static_cast<char*>(p) + sizeof(size_t);
  }
  void release(void* ptr) override {
    void* base = static_cast<char*>(ptr) - sizeof(size_t);
    REQUIRE(live.erase(base) == 1);
    in_use -= *static_cast<size_t*>(base);
    std::free(base);
  }
  EventId record_event(StreamId stream) override {
    events.push_back(Event{stream});
    return reinterpret_cast<EventId>(events.size());
  }
  Event& event(EventId id) { return events.at(reinterpret_cast<size_t>(id) - 1); }
  bool event_complete(EventId id) override { return event(id).complete; }
  void event_synchronize(EventId id) override {
    ++synchronizations;
    event(id).complete = true;
  }
  void destroy_event(EventId id) override {
    REQUIRE_FALSE(event(id).destroyed);
    event(id).destroyed = true;
  }
  void complete_all() {
    for (Event& e : events) e.complete = true;
  }
};

int stream_a_tag = 0, stream_b_tag = 0;
const StreamId kStreamA = &stream_a_tag;
const StreamId kStreamB = &stream_b_tag;

}  // namespace

TEST_CASE("a block freed on a stream is reused on that stream at once, by size class") {
  ScriptedDevice device;
  StreamCachingAllocator alloc(device);
  void* p = alloc.allocate(1000, kStreamA);  // class 1024
  alloc.free(p, 1000, kStreamA);
  CHECK(alloc.stats().cached_bytes == 1024);
  CHECK(alloc.allocate(1010, kStreamA) == p);  // same class
  CHECK(alloc.counters().same_stream_reuses == 1);
  CHECK(alloc.counters().device_allocations == 1);
  void* q = alloc.allocate(2000, kStreamA);  // another class: fresh
  CHECK(q != p);
  CHECK(alloc.counters().device_allocations == 2);
  CHECK(alloc.stats().current_bytes == 1024 + 2048);
  CHECK(alloc.stats().cached_bytes == 0);
  alloc.free(p, 1000, kStreamA);
  alloc.free(q, 2000, kStreamA);
  CHECK(device.events.empty());  // same-stream traffic records nothing
}

TEST_CASE("another stream gets a freed block only after the owner's event completes") {
  ScriptedDevice device;
  StreamCachingAllocator alloc(device);
  void* p = alloc.allocate(4096, kStreamA);
  alloc.free(p, 4096, kStreamA);

  void* first = alloc.allocate(4096, kStreamB);  // work on A may still read p: not p
  CHECK(first != p);
  REQUIRE(device.events.size() == 1);
  CHECK(device.events[0].stream == kStreamA);     // the event marks A's queue
  void* second = alloc.allocate(4096, kStreamB);  // event pending: still not p, no new event
  CHECK(second != p);
  CHECK(device.events.size() == 1);

  device.complete_all();
  void* third = alloc.allocate(4096, kStreamB);
  CHECK(third == p);
  CHECK(device.events[0].destroyed);
  CHECK(alloc.counters().cross_stream_reuses == 1);
  CHECK(alloc.counters().events_recorded == 1);
  CHECK(device.synchronizations == 0);  // the allocation path never blocks the host

  // Freed on B now: B reuses it directly, A must wait for B's event.
  alloc.free(third, 4096, kStreamB);
  CHECK(alloc.allocate(4096, kStreamA) != p);
  alloc.free(first, 4096, kStreamB);
  alloc.free(second, 4096, kStreamB);
}

TEST_CASE("the owner reclaims a block another stream asked for, dropping its event") {
  ScriptedDevice device;
  StreamCachingAllocator alloc(device);
  void* p = alloc.allocate(512, kStreamA);
  alloc.free(p, 512, kStreamA);
  void* other = alloc.allocate(512, kStreamB);
  REQUIRE(device.events.size() == 1);
  CHECK(alloc.allocate(512, kStreamA) == p);
  CHECK(device.events[0].destroyed);
  alloc.free(other, 512, kStreamB);
}

TEST_CASE("statistics: current, peak and cached bytes in size classes") {
  ScriptedDevice device;
  StreamCachingAllocator alloc(device);
  void* a = alloc.allocate(100, kStreamA);   // 128
  void* b = alloc.allocate(5000, kStreamA);  // 5120 (8 steps per power of two)
  CHECK(alloc.stats().current_bytes == 128 + 5120);
  CHECK(alloc.stats().peak_bytes == 128 + 5120);
  alloc.free(b, 5000, kStreamA);
  CHECK(alloc.stats().current_bytes == 128);
  CHECK(alloc.stats().peak_bytes == 128 + 5120);
  CHECK(alloc.stats().cached_bytes == 5120);
  alloc.reset_peak();
  CHECK(alloc.stats().peak_bytes == 128);
  alloc.empty_cache();
  CHECK(alloc.stats().cached_bytes == 0);
  CHECK(device.in_use == 128);
  alloc.free(a, 100, kStreamA);
}

TEST_CASE(
    "out of memory: pending events are waited for, the cache is given back, then a clear error") {
  ScriptedDevice device;
  device.capacity = 8192;
  StreamCachingAllocator alloc(device);
  void* p = alloc.allocate(4096, kStreamA);
  alloc.free(p, 4096, kStreamA);
  void* q = alloc.allocate(4096, kStreamB);  // records an event on A for p; q is fresh
  REQUIRE(device.events.size() == 1);
  // 8192 more do not fit beside p's cached 4096 and q: the cache goes back (after p's
  // event), then the retry fits.
  alloc.free(q, 4096, kStreamB);
  void* big = alloc.allocate(8192, kStreamB);
  CHECK(big != nullptr);
  CHECK(device.synchronizations == 1);
  CHECK(alloc.stats().cached_bytes == 0);
  try {
    (void)alloc.allocate(4096, kStreamA);
    FAIL("expected an out-of-memory error");
  } catch (const patchbay::Error& e) {
    CHECK(std::string(e.what()).find("out of device memory") != std::string::npos);
    CHECK(std::string(e.what()).find("reduce batch size") != std::string::npos);
  }
  alloc.free(big, 8192, kStreamB);
}

TEST_CASE("destruction waits for pending events and releases every cached block") {
  ScriptedDevice device;
  {
    StreamCachingAllocator alloc(device);
    void* p = alloc.allocate(256, kStreamA);
    alloc.free(p, 256, kStreamA);
    void* q = alloc.allocate(256, kStreamB);
    alloc.free(q, 256, kStreamB);
  }
  CHECK(device.live.empty());
  CHECK(device.synchronizations == 1);
}
