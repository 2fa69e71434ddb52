// Reverse-mode automatic differentiation. Every op that runs while grad mode is on and has
// an input with requires_grad records a Node: the inputs it differentiates against and a
// backward function mapping output gradients to input gradients. backward(loss) walks the
// Nodes in reverse topological order, summing gradients that meet, and ACCUMULATES into the
// .grad of leaves (call zero_grad between steps, or do not, for gradient accumulation).
//
// Rules for op writers (engine/README.md, "How to add an op"):
//  - record the node with `record_op` AFTER computing the outputs;
//  - capture what backward needs by value; capture an OUTPUT only as output.detach()
//    (capturing the output itself would make a reference cycle output -> node -> output);
//  - backward runs with grad mode off and returns one gradient per input (undefined Tensor
//    for inputs that need none); gradients must have the input's shape (use sum_to_shape
//    to undo broadcasting).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/tensor.hpp"

namespace patchbay::engine {

// Gets gradients of the outputs (never undefined: missing ones are zeros of the output's
// shape) and returns gradients of the inputs, one per input, undefined where not needed.
using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs)>;
// Optional second form of a one-input op's backward, for ops whose input gradient touches a
// few rows of a large input (embedding: n rows of a [V, D] table): ADDS the input's gradient
// into `grad_input` (f32, contiguous, the input's shape) in place. backward() calls it instead
// of the BackwardFn when the input's running gradient already exists and is private (a tied
// embedding whose head gradient arrived first, a leaf accumulating micro-batches), so no
// dense zero-filled gradient is made and added; otherwise the BackwardFn runs as usual. Both
// must give the same sum up to rounding order. Set with set_add_into() after record_op.
using AddIntoFn = std::function<void(const std::vector<Tensor>& grad_outputs, Tensor& grad_input)>;

class Node {
 public:
  Node(std::string name, std::vector<Tensor> inputs, std::vector<Shape> output_shapes,
       std::vector<DType> output_dtypes, BackwardFn backward);
  const std::string& name() const { return name_; }
  const std::vector<Tensor>& inputs() const { return inputs_; }
  size_t num_outputs() const { return output_shapes_.size(); }
  const Shape& output_shape(size_t i) const { return output_shapes_[i]; }
  DType output_dtype(size_t i) const { return output_dtypes_[i]; }
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) const {
    return backward_(grad_outputs);
  }
  // See AddIntoFn (one-input nodes only; empty: none).
  void set_add_into(AddIntoFn add_into) { add_into_ = std::move(add_into); }
  const AddIntoFn& add_into() const { return add_into_; }
  // Drops saved state after use (backward frees the graph as it goes, as PyTorch does by default).
  void release() {
    backward_ = nullptr;
    add_into_ = nullptr;
    inputs_.clear();
    released_ = true;
  }
  bool released() const { return released_; }

 private:
  std::string name_;
  std::vector<Tensor> inputs_;  // the differentiable inputs, as passed to the op
  std::vector<Shape> output_shapes_;
  std::vector<DType> output_dtypes_;
  BackwardFn backward_;
  AddIntoFn add_into_;
  bool released_ = false;
};

// Thread-local grad mode.
bool grad_enabled();
// Sets this thread's grad mode; returns the previous value (prefer NoGradGuard in C++).
bool set_grad_enabled(bool enabled);
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// True when grad mode is on and any defined input requires grad.
bool any_requires_grad(const std::vector<Tensor>& inputs);

// Attaches a new Node to `outputs` (sets grad_fn, output_index, requires_grad) when
// any_requires_grad(inputs); otherwise does nothing (and never builds the std::function, so
// ops run without grad pay nothing for their backward closure).
void record_op_node(std::string_view name, const std::vector<Tensor>& inputs,
                    const std::vector<Tensor*>& outputs, BackwardFn backward);
template <class Backward>
void record_op(std::string_view name, const std::vector<Tensor>& inputs,
               const std::vector<Tensor*>& outputs, Backward&& backward) {
  if (!any_requires_grad(inputs)) return;
  record_op_node(name, inputs, outputs, BackwardFn(std::forward<Backward>(backward)));
}

// Runs the backward pass from `root`. With an undefined `seed`, root must have one element
// and the seed is 1. keep_graph=false releases each node after use (a second backward
// through the same graph then throws).
void backward(const Tensor& root, const Tensor& seed = Tensor(), bool keep_graph = false);

// Called by backward(), on this thread, once per leaf that requires grad, right after the
// leaf's .grad received the last contribution of this backward pass (the data-parallel
// trainer starts gradient all-reduces from it while backward goes on: core/parallel).
// Empty (the default): nothing is called and backward pays nothing for it.
using LeafGradReadyHook = std::function<void(const Tensor& leaf)>;
// Sets this thread's hook; returns the previous one.
LeafGradReadyHook set_leaf_grad_ready_hook(LeafGradReadyHook hook);

// ---- custom ops: own forward and backward (fused kernels, plugin ops) ----
class CustomOpContext {
 public:
  // Saved tensors are stored detached (no reference cycles); retrieve them in backward.
  void save_for_backward(const std::vector<Tensor>& tensors);
  const std::vector<Tensor>& saved_tensors() const { return saved_; }
  // needs_input_grad()[i]: input i requires a gradient (backward may skip the others).
  const std::vector<bool>& needs_input_grad() const { return needs_input_grad_; }
  void set_needs_input_grad(std::vector<bool> v) { needs_input_grad_ = std::move(v); }

 private:
  std::vector<Tensor> saved_;
  std::vector<bool> needs_input_grad_;
};

class CustomOp {
 public:
  virtual ~CustomOp() = default;
  virtual std::string name() const = 0;
  // Runs with grad mode off. Returns the outputs (new tensors).
  virtual std::vector<Tensor> forward(CustomOpContext& ctx, const std::vector<Tensor>& inputs) = 0;
  // Runs with grad mode off. One gradient per input (undefined where none).
  virtual std::vector<Tensor> backward(CustomOpContext& ctx,
                                       const std::vector<Tensor>& grad_outputs) = 0;
};

// Runs op->forward and, when grad is needed, records a Node that calls op->backward.
std::vector<Tensor> apply_custom_op(const std::shared_ptr<CustomOp>& op,
                                    const std::vector<Tensor>& inputs);

}  // namespace patchbay::engine
