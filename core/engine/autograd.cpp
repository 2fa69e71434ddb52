// Tape recording, the reverse topological walk with gradient accumulation, grad mode and
// custom ops (see autograd.hpp for the contract).
#include "engine/autograd.hpp"

#include <unordered_map>
#include <unordered_set>

#include "common/error.hpp"
#include "engine/ops.hpp"

namespace patchbay::engine {
namespace {
thread_local bool tls_grad_enabled = true;

// True when `slot` may be added into in place: a contiguous f32 CPU tensor of g's shape, outside
// any graph, whose storage is held by nothing but `holders` references to its one TensorImpl
// (so no view, no other gradient slot and no caller sees the change).
bool can_accumulate_in_place(const Tensor& slot, const Tensor& g, long holders) {
  return slot.dtype() == DType::kF32 && g.dtype() == DType::kF32 && slot.shape() == g.shape() &&
         slot.device().type == DeviceType::kCpu && g.device().type == DeviceType::kCpu &&
         slot.is_contiguous() && g.is_contiguous() && !slot.requires_grad() && !g.requires_grad() &&
         slot.impl_ptr().use_count() <= holders && slot.impl_ptr()->storage.use_count() == 1 &&
         slot.impl_ptr()->storage != g.impl_ptr()->storage;
}

// True when `slot` (defined) may be written in place as the running gradient of a tensor of
// `shape`: f32, contiguous, on the CPU, outside any graph, held by at most `holders` handles and
// sharing its storage with nothing.
bool is_private_f32(const Tensor& slot, const Shape& shape, long holders) {
  return slot.dtype() == DType::kF32 && slot.shape() == shape &&
         slot.device().type == DeviceType::kCpu && slot.is_contiguous() && !slot.requires_grad() &&
         slot.impl_ptr().use_count() <= holders && slot.impl_ptr()->storage.use_count() == 1;
}

// Adds g into the running sum at `slot` (undefined slot takes g as is). In place when the
// slot is private (see above): no new buffer per extra gradient (a tied embedding's two
// gradients, a residual stream's, micro-batches accumulating into a leaf's .grad).
void accumulate(Tensor& slot, const Tensor& g, long holders = 1) {
  if (!slot.defined()) {
    slot = g;
  } else if (can_accumulate_in_place(slot, g, holders)) {
    float* out = slot.data<float>();
    const float* in = g.data<float>();
    const int64_t n = slot.numel();
#pragma omp parallel for simd schedule(static) if (n >= (1 << 16))
    for (int64_t i = 0; i < n; ++i) out[i] += in[i];
  } else {
    slot = add(slot, g);
  }
}
}  // namespace

Node::Node(std::string name, std::vector<Tensor> inputs, std::vector<Shape> output_shapes,
           std::vector<DType> output_dtypes, BackwardFn backward)
    : name_(std::move(name)),
      inputs_(std::move(inputs)),
      output_shapes_(std::move(output_shapes)),
      output_dtypes_(std::move(output_dtypes)),
      backward_(std::move(backward)) {}

bool grad_enabled() { return tls_grad_enabled; }
bool set_grad_enabled(bool enabled) {
  bool previous = tls_grad_enabled;
  tls_grad_enabled = enabled;
  return previous;
}
NoGradGuard::NoGradGuard() : previous_(tls_grad_enabled) { tls_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { tls_grad_enabled = previous_; }

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!tls_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void record_op_node(std::string_view name, const std::vector<Tensor>& inputs,
                    const std::vector<Tensor*>& outputs, BackwardFn backward) {
  if (!any_requires_grad(inputs)) return;
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  for (Tensor* o : outputs) {
    shapes.push_back(o->shape());
    dtypes.push_back(o->dtype());
  }
  auto node = std::make_shared<Node>(std::string(name), inputs, std::move(shapes),
                                     std::move(dtypes), std::move(backward));
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!is_floating(outputs[i]->dtype())) continue;  // integer outputs (indices) carry no grad
    TensorImpl* impl = outputs[i]->impl();
    impl->grad_fn = node;
    impl->output_index = static_cast<int>(i);
    impl->requires_grad = true;
  }
}

LeafGradReadyHook& leaf_grad_ready_hook();  // this thread's hook (below)

void backward(const Tensor& root, const Tensor& seed, bool keep_graph) {
  if (!root.defined() || !root.requires_grad())
    throw Error(ErrorKind::kInvalidArgument,
                "backward: the tensor does not require grad (no input had requires_grad, or it was "
                "made under "
                "NoGradGuard)");
  Tensor root_grad = seed;
  if (!root_grad.defined()) {
    if (root.numel() != 1)
      throw Error(ErrorKind::kInvalidArgument,
                  "backward: implicit seed needs a one-element loss, found " + root.str() +
                      "; pass a seed gradient");
    root_grad = ones(root.shape(), root.dtype(), root.device());
  } else if (root_grad.shape() != root.shape()) {
    throw Error(ErrorKind::kInvalidArgument,
                "backward: seed " + root_grad.str() + " does not match " + root.str());
  }
  NoGradGuard no_grad;
  if (!root.grad_fn()) {  // a leaf: its gradient is the seed itself
    Tensor g = root.grad();
    accumulate(g, root_grad.contiguous());
    const_cast<Tensor&>(root).set_grad(g);
    return;
  }
  // Topological order by iterative DFS (post-order), then walk it reversed.
  std::vector<Node*> order;
  std::unordered_set<Node*> visited;
  std::vector<std::pair<Node*, size_t>> stack{{root.grad_fn().get(), 0}};
  visited.insert(root.grad_fn().get());
  while (!stack.empty()) {
    auto& [node, next_input] = stack.back();
    if (node->released())
      throw Error(ErrorKind::kInvalidArgument,
                  "backward: the graph through '" + node->name() +
                      "' was already freed by an earlier backward; pass keep_graph");
    if (next_input < node->inputs().size()) {
      const Tensor& in = node->inputs()[next_input++];
      Node* child = in.defined() ? in.grad_fn().get() : nullptr;
      if (child && visited.insert(child).second) stack.emplace_back(child, 0);
    } else {
      order.push_back(node);
      stack.pop_back();
    }
  }
  // With a leaf-ready hook: how many edges still lead into each leaf (by storage address).
  std::unordered_map<const void*, int64_t> leaf_edges_left;
  if (leaf_grad_ready_hook())
    for (Node* node : order)
      for (const Tensor& in : node->inputs())
        if (in.defined() && in.requires_grad() && !in.grad_fn()) ++leaf_edges_left[in.data_ptr()];
  std::unordered_map<Node*, std::vector<Tensor>> pending;
  pending[root.grad_fn().get()].resize(root.grad_fn()->num_outputs());
  pending[root.grad_fn().get()][static_cast<size_t>(root.output_index())] = root_grad;
  std::vector<std::shared_ptr<Node>> keep_alive;  // nodes stay alive until the walk ends
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* node = *it;
    std::vector<Tensor> grads = std::move(pending[node]);
    pending.erase(node);
    grads.resize(node->num_outputs());
    for (size_t i = 0; i < grads.size(); ++i)
      if (!grads[i].defined()) grads[i] = zeros(node->output_shape(i), node->output_dtype(i));
    // A one-input node with an add-into form (AddIntoFn) whose input already has a private
    // running gradient adds into it: no dense gradient of the whole input is made.
    if (node->add_into() && node->inputs().size() == 1) {
      const Tensor& in = node->inputs()[0];
      bool added = false;
      if (in.defined() && in.requires_grad() && in.dtype() == DType::kF32) {
        if (in.grad_fn()) {
          auto found = pending.find(in.grad_fn().get());
          if (found != pending.end() &&
              static_cast<size_t>(in.output_index()) < found->second.size()) {
            Tensor& slot = found->second[static_cast<size_t>(in.output_index())];
            if (slot.defined() && is_private_f32(slot, in.shape(), 1)) {
              node->add_into()(grads, slot);
              added = true;
            }
          }
        } else {
          Tensor acc = in.grad();
          if (acc.defined() && is_private_f32(acc, in.shape(), 2)) {  // acc and the grad field
            node->add_into()(grads, acc);
            added = true;
            if (!leaf_edges_left.empty() && --leaf_edges_left[in.data_ptr()] == 0)
              leaf_grad_ready_hook()(in);
          }
        }
      }
      if (added) {
        if (!keep_graph) {
          if (in.grad_fn()) keep_alive.push_back(in.grad_fn());
          node->release();
        }
        continue;
      }
    }
    std::vector<Tensor> input_grads = node->apply(grads);
    const std::vector<Tensor>& inputs = node->inputs();
    if (input_grads.size() != inputs.size())
      throw Error(ErrorKind::kInternal, "backward of '" + node->name() + "' returned " +
                                            std::to_string(input_grads.size()) + " gradients for " +
                                            std::to_string(inputs.size()) + " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& in = inputs[i];
      Tensor g = input_grads[i];
      // A leaf whose last edge this is tells the hook once its .grad is final.
      const bool last_leaf_edge = !leaf_edges_left.empty() && in.defined() && in.requires_grad() &&
                                  !in.grad_fn() && --leaf_edges_left[in.data_ptr()] == 0;
      if (!in.defined() || !in.requires_grad() || !g.defined()) {
        if (last_leaf_edge) leaf_grad_ready_hook()(in);
        continue;
      }
      if (g.shape() != in.shape())
        throw Error(ErrorKind::kInternal, "backward of '" + node->name() + "' gave gradient " +
                                              g.str() + " for input " + in.str());
      if (g.dtype() != in.dtype()) g = g.to(in.dtype());
      if (in.grad_fn()) {
        auto& slot = pending[in.grad_fn().get()];
        slot.resize(in.grad_fn()->num_outputs());
        accumulate(slot[static_cast<size_t>(in.output_index())], g);
      } else {
        Tensor acc = in.grad();
        accumulate(acc, g, /*holders=*/2);  // acc and the leaf's grad field
        const_cast<Tensor&>(in).set_grad(acc.contiguous());
        if (last_leaf_edge) leaf_grad_ready_hook()(in);
      }
    }
    if (!keep_graph) {
      for (const Tensor& in : inputs)
        if (in.defined() && in.grad_fn()) keep_alive.push_back(in.grad_fn());
      node->release();
    }
  }
}

LeafGradReadyHook& leaf_grad_ready_hook() {
  thread_local LeafGradReadyHook hook;
  return hook;
}

LeafGradReadyHook set_leaf_grad_ready_hook(LeafGradReadyHook hook) {
  LeafGradReadyHook previous = std::move(leaf_grad_ready_hook());
  leaf_grad_ready_hook() = std::move(hook);
  return previous;
}

void CustomOpContext::save_for_backward(const std::vector<Tensor>& tensors) {
  saved_.clear();
  for (const Tensor& t : tensors) saved_.push_back(t.defined() ? t.detach() : Tensor());
}

std::vector<Tensor> apply_custom_op(const std::shared_ptr<CustomOp>& op,
                                    const std::vector<Tensor>& inputs) {
  auto ctx = std::make_shared<CustomOpContext>();
  std::vector<bool> needs;
  for (const Tensor& t : inputs)
    needs.push_back(grad_enabled() && t.defined() && t.requires_grad());
  ctx->set_needs_input_grad(needs);
  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;
    std::vector<Tensor> detached;
    for (const Tensor& t : inputs) detached.push_back(t.defined() ? t.detach() : Tensor());
    outputs = op->forward(*ctx, detached);
  }
  std::vector<Tensor*> out_ptrs;
  for (Tensor& o : outputs) out_ptrs.push_back(&o);
  record_op(op->name(), inputs, out_ptrs,
            [op, ctx, n = inputs.size()](const std::vector<Tensor>& grads) {
              std::vector<Tensor> g = op->backward(*ctx, grads);
              if (g.size() != n)
                throw Error(ErrorKind::kInvalidArgument,
                            "custom op '" + op->name() + "' backward returned " +
                                std::to_string(g.size()) + " gradients for " + std::to_string(n) +
                                " inputs");
              return g;
            });
  return outputs;
}

}  // namespace patchbay::engine
