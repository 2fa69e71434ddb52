// Mixture-of-experts dispatch on a device, through ops only: nothing is read back per forward
// (the host plan of dispatch_plan.hpp needs the router's choices on the host, a wait per
// layer). The fixed-capacity form keeps the same assignments in the same order:
//   scores[e, a] = N·k − rank(a) when assignment a = n·k + j chose expert e, else 0, where
//   rank is the position-major priority order of dispatch_plan.hpp (t, then b, then j);
//   top-C of each expert's row = its C earliest assignments, earliest first (the host plan's
//   kept rows of expert e, in its order); a slot whose score is 0 is empty (filled = 0).
// So expert e always computes C rows (its kept rows, then arbitrary rows masked out): the
// shapes depend on (B, T, k, E, C) only. Results equal the host plan's up to the rounding of
// the experts' products on C instead of M_e rows and the order the input gradient is summed.
// Dropless routing has no fixed capacity and stays on the host path (refused on a device).
#pragma once

#include <patchbay/tensor.hpp>
#include <vector>

namespace patchbay_ffn_moe {

// Tensors created on (type, index) straight away: zeros, ones and host constants.
struct DeviceTensors {
  const pb_ops_table* ops = nullptr;
  pb_device_type type = PB_DEVICE_CPU;
  int32_t index = 0;
  patchbay::Tensor full(const std::vector<int64_t>& shape, double value) const;  // f32
  patchbay::Tensor moved(const patchbay::Tensor& t) const;  // t copied there (itself on the CPU)
};

struct DeviceDispatch {
  int64_t capacity = 0;     // C (at most N·k)
  patchbay::Tensor slots;   // [E·C] int64: the assignment n·k + j each slot holds
  patchbay::Tensor filled;  // [E·C, 1] f32: 1 for a kept assignment, 0 for an empty slot
  patchbay::Tensor routed;  // [E] f32: assignments chosen per expert, before capacity
};

// N·k − rank(n·k + j) for every assignment (the host constant behind the scores; exact in f32
// while N·k < 2^24).
std::vector<float> priority_scores(int64_t batch, int64_t seq_len, int64_t k);

// ids [N, k] int64 (the router's choices, on the device); priority [N·k] f32 there.
DeviceDispatch plan_dispatch_on_device(const DeviceTensors& device, const patchbay::Tensor& ids,
                                       const patchbay::Tensor& priority, int64_t experts,
                                       int64_t capacity);

// y2 [N, C] = Σ_j weighted[slot of assignment n·k + j] (0 for a dropped assignment):
// weighted [E·C, C] (expert outputs times gates, empty slots 0) scattered back per assignment
// and summed over the k choices in order j = 0, 1, ... (the host combine's additions).
patchbay::Tensor combine_on_device(const DeviceTensors& device, const patchbay::Tensor& weighted,
                                   const DeviceDispatch& plan, int64_t tokens, int64_t k);

}  // namespace patchbay_ffn_moe
