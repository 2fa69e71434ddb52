// bf16 copies of the trained weights that the optimizer's update pass keeps current
// (patchbay/optimizer.h minor 2), handed to each bf16 autocast scope so that the scope does
// not round every weight again. Without them a bf16 step reads each f32 weight (4 bytes) and
// writes its bf16 copy (2 bytes) in a pass of its own; with them the optimizer, which reads
// and writes the weight anyway, stores the 2 extra bytes in the same pass. The values the
// matmuls see are identical (same rounding of the same f32 weights), so a run is bit-identical
// with and without (tests/train/test_bf16_weight_copies.cpp).
//
// Invariant: while current, copy[i] == round_to_bf16(parameter[i]) for every registered pair.
// The optimizer's steps keep it (a parameter a step skips keeps both). Anything else that
// writes parameters must pause() the copies first; the next use_in_scope() rounds them afresh.
#pragma once

#include <vector>

#include "engine/tensor.hpp"
#include "runtime/optimizer_handle.hpp"

namespace patchbay::train {

class Bf16WeightCopies {
 public:
  // Registers a bf16 copy of each parameter with `optimizer` where it writes them (nothing
  // when it lacks set_bf16_copy; a parameter it refuses is rounded by the scope as before).
  Bf16WeightCopies(runtime::OptimizerHandle& optimizer,
                   const std::vector<engine::Tensor>& parameters);

  size_t size() const { return copies_.size(); }  // parameters with a registered copy
  // Inside an open bf16 autocast scope: registers the copies again if pause() unregistered
  // them, rounds them if they are not current, then hands every copy to the scope
  // (engine::autocast_use_copy).
  void use_in_scope();
  // Unregisters the copies, so that updates until the next use_in_scope() do not write them
  // (f32 updates interleaved with bf16 ones, as `bench train` runs them); they go stale.
  void pause();

 private:
  runtime::OptimizerHandle* optimizer_;
  std::vector<size_t> indices_;                      // the optimizer's parameter numbers
  std::vector<engine::Tensor> parameters_, copies_;  // pairs, same order
  bool registered_ = true;
  bool current_ = false;
};

}  // namespace patchbay::train
