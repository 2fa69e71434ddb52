// A CPU-memory stand-in for a second device, so that CI (no GPU) checks everything device
// code must get right on the host side: no host-pointer assumptions, transfers in both
// directions, refusals of ops a device lacks, device-independent checkpoints, no per-step
// host synchronisation. Test builds only (library patchbay_engine_standin; never linked
// into the CLI or a plugin).
//
// install_host_standin_device() registers it as the backend of DeviceType::kCuda (so code
// sees "cuda:0"): its memory is host memory but its own, handed out by the stream-aware
// caching allocator (stream_allocator.hpp) and poisoned with 0xFF bytes (NaN as f32) on
// every allocation so that a kernel reading memory it never wrote shows up. The CPU kernels
// are aliased to it through the dispatch table (kernel_registry.hpp), minus the ops named as
// missing, whose calls then fail naming the op and the device as they would on a GPU
// lacking them; the ops that check indices get kernels that take the device's path instead
// (host_standin_checked_kernels.cpp: a bad index is recorded and raised at the next read, as on
// a GPU, engine/device_index_errors.hpp). It counts every transfer by direction, so a test can
// prove that a training step copies nothing back to the host.
//
// Never install it in a process that uses a real GPU: it replaces the CUDA backend and
// kernels of the process. Installing again replaces the previous stand-in's kernel set;
// its backend (and memory) stays the same.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "engine/device.hpp"

namespace patchbay::engine {

struct HostStandinOptions {
  // Ops that get no kernel on the stand-in (their calls fail naming op and device).
  std::vector<std::string> ops_without_kernel;
};

struct TransferCounts {
  size_t host_to_device = 0;  // copies, and their bytes
  size_t host_to_device_bytes = 0;
  size_t device_to_host = 0;
  size_t device_to_host_bytes = 0;
  size_t device_to_device = 0;
};

// Returns the stand-in's device, cuda:0.
Device install_host_standin_device(const HostStandinOptions& options = {});
// Transfers through the stand-in backend since it was first installed.
TransferCounts standin_transfer_counts();
// Registers the stand-in's index-checking kernels (called by install_host_standin_device),
// except those of the ops named.
void register_standin_checked_kernels(const std::vector<std::string>& ops_without_kernel);

}  // namespace patchbay::engine
