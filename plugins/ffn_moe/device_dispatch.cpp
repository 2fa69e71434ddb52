// Fixed-capacity MoE dispatch on a device (device_dispatch.hpp): one-hot by scatter_add, the
// experts' top-C by the topk op, the combine by scatter_add: ops with CUDA entries that read
// nothing back.
#include "device_dispatch.hpp"

#include <algorithm>

#include "engine_calls.hpp"

namespace patchbay_ffn_moe {

using patchbay::Tensor;

Tensor DeviceTensors::full(const std::vector<int64_t>& shape, double value) const {
  if (type == PB_DEVICE_CPU) return patchbay::Ops(ops).full(shape, value);
  pb_tensor* out = nullptr;
  patchbay::check_ops_status(
      ops, ops->full(shape.data(), shape.size(), value, PB_DTYPE_F32, type, index, &out), "full");
  return Tensor(ops, out);
}

Tensor DeviceTensors::moved(const Tensor& t) const {
  return type == PB_DEVICE_CPU ? t : patchbay::to_device(t, type, index);
}

std::vector<float> priority_scores(int64_t batch, int64_t seq_len, int64_t k) {
  const int64_t assignments = batch * seq_len * k;
  std::vector<float> scores(static_cast<size_t>(assignments));
  int64_t rank = 0;  // position-major: t, then b, then j (dispatch_plan.hpp)
  for (int64_t t = 0; t < seq_len; ++t)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < k; ++j)
        scores[static_cast<size_t>((b * seq_len + t) * k + j)] =
            static_cast<float>(assignments - rank++);
  return scores;
}

DeviceDispatch plan_dispatch_on_device(const DeviceTensors& device, const Tensor& ids,
                                       const Tensor& priority, int64_t experts, int64_t capacity) {
  const int64_t assignments = ids.size(0) * ids.size(1);
  DeviceDispatch plan;
  plan.capacity = std::min(capacity, assignments);
  // one_hot[a, e] = 1 when assignment a chose e.
  const Tensor one_hot =
      scatter_add(device.full({assignments, experts}, 0.0), 1, ids.reshape({assignments, 1}),
                  device.full({assignments, 1}, 1.0));
  plan.routed = one_hot.sum({0});  // [E], exact counts
  const Tensor scores =
      (one_hot * priority.reshape({assignments, 1})).transpose(0, 1).contiguous();  // [E, N·k]
  auto [values, slots] = topk(scores, plan.capacity, 1);  // [E, C], earliest first
  plan.slots = slots.reshape({experts * plan.capacity});
  // filled = min(score, 1): scores are 0 (empty) or >= 1 (kept).
  plan.filled = ((values * -1.0 + 1.0).relu() * -1.0 + 1.0).reshape({experts * plan.capacity, 1});
  return plan;
}

Tensor combine_on_device(const DeviceTensors& device, const Tensor& weighted,
                         const DeviceDispatch& plan, int64_t tokens, int64_t k) {
  const int64_t width = weighted.size(1), slot_count = weighted.size(0);
  const Tensor index = plan.slots.reshape({slot_count, 1}).expand({slot_count, width}).contiguous();
  // Kept slots hold distinct assignments; an empty slot adds its 0 to whichever it names.
  // In f32 (scatter_add's dtype), back to the experts' dtype at the end.
  const Tensor per_assignment =
      scatter_add(device.full({tokens * k, width}, 0.0), 0, index, weighted.to(PB_DTYPE_F32))
          .reshape({tokens, k, width});
  Tensor sum = per_assignment.slice(1, 0, 1).reshape({tokens, width});
  for (int64_t j = 1; j < k; ++j)
    sum = sum + per_assignment.slice(1, j, j + 1).reshape({tokens, width});
  return sum.to(weighted.dtype());
}

}  // namespace patchbay_ffn_moe
