// Device index-error records (device_index_errors.hpp): one per device, made on first use and
// kept for the process (never freed: kernels of any later step write into it), with a host
// flag saying whether a check was queued since the last look.
#include "engine/device_index_errors.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "common/error.hpp"

namespace patchbay::engine {
namespace {

using kernels::cuda::math::IndexErrorOp;
using kernels::cuda::math::IndexErrorRecord;

struct DeviceRecord {
  IndexErrorRecord* record = nullptr;  // device memory
  std::atomic<bool> checked{false};    // a check was queued since the last look
};

struct Records {
  std::mutex mutex;
  std::map<std::pair<int, int>, DeviceRecord> by_device;
};
Records& records() {
  static auto* r = new Records();  // leaked: reads at exit may come after static destruction
  return *r;
}

std::pair<int, int> key_of(Device device) { return {static_cast<int>(device.type), device.index}; }

void zero_record(Backend& backend, IndexErrorRecord* record) {
  const int64_t zero = 0;
  backend.fill(record, &zero, sizeof zero, sizeof(IndexErrorRecord) / sizeof zero,
               backend.default_stream());
}

std::string at_position(const IndexErrorRecord& r) {
  return " at flat position " + std::to_string(r.position) + " (row-major) of its " +
         std::to_string(r.count) + " entries";
}

}  // namespace

IndexErrorRecord* index_error_record_for(Device device) {
  if (device.type == DeviceType::kCpu)
    throw Error(ErrorKind::kInternal, "index_error_record_for: the CPU checks indices at once");
  Records& all = records();
  std::lock_guard<std::mutex> lock(all.mutex);
  DeviceRecord& entry = all.by_device[key_of(device)];
  if (entry.record == nullptr) {
    Backend& backend = backend_for(device);
    entry.record = static_cast<IndexErrorRecord*>(backend.allocate(sizeof(IndexErrorRecord)));
    zero_record(backend, entry.record);
  }
  entry.checked.store(true);
  return entry.record;
}

void raise_index_errors(Device device) {
  if (device.type == DeviceType::kCpu) return;
  IndexErrorRecord* record = nullptr;
  {
    Records& all = records();
    std::lock_guard<std::mutex> lock(all.mutex);
    auto found = all.by_device.find(key_of(device));
    if (found == all.by_device.end() || !found->second.checked.exchange(false)) return;
    record = found->second.record;
  }
  Backend& backend = backend_for(device);
  IndexErrorRecord host;
  backend.copy(&host, cpu(), record, device, sizeof host, backend.default_stream());
  if (host.op == 0) return;
  zero_record(backend, record);
  throw Error(ErrorKind::kInvalidArgument, index_error_message(host, device));
}

std::string index_error_message(const IndexErrorRecord& r, Device device) {
  const std::string value = std::to_string(r.value), bound = std::to_string(r.bound);
  std::string what, advice;
  switch (static_cast<IndexErrorOp>(r.op)) {
    case IndexErrorOp::kCrossEntropyTarget:
      what = "cross_entropy: target value " + value + at_position(r) +
             " is out of range; expected 0 <= target < " + bound +
             " (V, the last dim of the logits) or ignore_index " + std::to_string(r.detail);
      advice = "Check that the data's token ids fit the model's vocabulary";
      break;
    case IndexErrorOp::kEmbeddingId:
      what = "embedding: id value " + value + at_position(r) +
             " is out of range; expected 0 <= id < " + bound + " (the " + bound +
             " rows of the weights)";
      advice = "Check that the tokenizer's vocabulary size matches the model's";
      break;
    case IndexErrorOp::kGatherIndex:
    case IndexErrorOp::kScatterAddIndex:
      what = std::string(r.op == static_cast<int64_t>(IndexErrorOp::kGatherIndex) ? "gather"
                                                                                  : "scatter_add") +
             ": index value " + value + at_position(r) +
             " is out of range; expected 0 <= index < " + bound + " (the size of dim " +
             std::to_string(r.detail) + ")";
      advice = "Check the index the caller computed";
      break;
    default:
      return "device " + device.str() + " recorded an index error of unknown kind " +
             std::to_string(r.op) + " (value " + value + "): the record was overwritten; rerun";
  }
  return what + ". " + advice + ". Found on " + device.str() +
         ", whose kernels record a bad index instead of stopping: it is raised at the next read "
         "from the device, so the work queued since the op is void; fix the input and rerun (on "
         "--device cpu the op stops at once)";
}

}  // namespace patchbay::engine
