// A training step on a device without host reads (issue 34): the loss, the auxiliary loss and
// the gradient norm stay on the device as one f32 [4] tensor (StepResult::device_values), the
// clip factor is computed and applied there, and the trainer reads the values only where it
// prints or decides on them (logging steps, the last step, evaluation, sampling, checkpoints):
// one device -> host transfer then, none on the other steps.
//
// Non-finite values: each step's values carry a "poison" entry, (loss + aux + norm) * 0, which
// is 0 for finite values and NaN otherwise; PendingStepValues sums it over the steps since the
// last read, so the read at the next logging step sees any non-finite step in between. Unlike
// the CPU path (which checks every step and skips the update), a device run has applied the
// updates up to that read; the trainer then stops naming the window of steps, before any
// checkpoint is written from the spoiled weights.
//
// Used when every trained parameter is on one device and no hook needs host values each step
// (data or tensor parallelism, ZeRO-1, LoRA keep the per-step reads).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.hpp"
#include "train/trainer.hpp"

namespace patchbay::train {

// True when train_step keeps `t`'s step values on the device (see above).
bool keeps_step_values_on_device(const TrainableModel& t);

// Every defined gradient of `params` times min(1, max_norm / (norm + 1e-6)), the factor computed
// on the device from `norm` (a device f32 scalar): clip_factor's rule without reading the norm.
void clip_grads_on_device(const std::vector<engine::Tensor>& params, const engine::Tensor& norm,
                          double max_norm);

// {loss, aux_loss, norm, poison} as a device f32 [4] from three device scalars.
engine::Tensor pack_step_values(const engine::Tensor& loss, const engine::Tensor& aux_loss,
                                const engine::Tensor& norm);

// The trainer's window of unread steps.
class PendingStepValues {
 public:
  // Adds step `step`'s poison to the window (r.values_pending must be true).
  void add(const StepResult& r, int64_t step);
  // Reads r's values and the window's poison in one transfer: fills r.loss, r.aux_loss,
  // r.grad_norm and r.finite (false when any step of the window had a non-finite value), clears
  // r.values_pending and empties the window.
  void read_into(StepResult& r);
  // The first step (0-based) of the current window, -1 when empty.
  int64_t first_step() const { return first_step_; }

 private:
  engine::Tensor poison_;  // device f32 [1]: the window's summed poison
  int64_t first_step_ = -1;
};

}  // namespace patchbay::train
