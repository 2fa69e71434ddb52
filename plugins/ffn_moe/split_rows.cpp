// The split_rows custom op; see split_rows.hpp.
#include "split_rows.hpp"

#include <string>

namespace patchbay_ffn_moe {
namespace {

struct SplitState {
  const pb_ops_table* ops;
  std::vector<int64_t> starts, ends;  // the non-empty blocks
};

pb_status* split_forward(void* user_data, pb_custom_ctx*, pb_tensor* const* inputs,
                         size_t num_inputs, pb_tensor** outputs, size_t num_outputs) {
  const auto* s = static_cast<const SplitState*>(user_data);
  if (num_inputs != 1 || num_outputs != s->starts.size()) {
    return s->ops->status_create(PB_STATUS_INTERNAL, "split_rows: wrong input or output count");
  }
  for (size_t i = 0; i < num_outputs; ++i) {
    if (pb_status* st = s->ops->slice(inputs[0], 0, s->starts[i], s->ends[i], 1, &outputs[i]))
      return st;
  }
  return nullptr;
}

pb_status* split_backward(void* user_data, pb_custom_ctx*, pb_tensor* const* grad_outputs,
                          size_t num_outputs, pb_tensor** grad_inputs, size_t) {
  const auto* s = static_cast<const SplitState*>(user_data);
  if (num_outputs == 1) {
    s->ops->retain(grad_outputs[0]);
    grad_inputs[0] = grad_outputs[0];
    return nullptr;
  }
  return s->ops->concat(const_cast<const pb_tensor* const*>(grad_outputs), num_outputs, 0,
                        &grad_inputs[0]);
}

void split_destroy(void* user_data) { delete static_cast<SplitState*>(user_data); }

}  // namespace

std::vector<patchbay::Tensor> split_rows(const patchbay::Tensor& rows,
                                         const std::vector<int64_t>& bounds) {
  const pb_ops_table* ops = rows.ops();
  auto* state = new SplitState{ops, {}, {}};
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    if (bounds[i + 1] > bounds[i]) {
      state->starts.push_back(bounds[i]);
      state->ends.push_back(bounds[i + 1]);
    }
  }
  const size_t count = state->starts.size();
  pb_custom_op_desc desc{sizeof(pb_custom_op_desc), "moe_split_rows", count, state, &split_forward,
                         &split_backward,           &split_destroy};
  pb_custom_op* op = nullptr;
  if (pb_status* st = ops->custom_op_create(&desc, &op)) {
    delete state;
    patchbay::check_ops_status(ops, st, "split_rows: custom_op_create");
  }
  std::vector<pb_tensor*> outputs(count, nullptr);
  pb_tensor* input = rows.handle();
  pb_status* st = ops->custom_op_apply(op, &input, 1, outputs.data(), count);
  ops->custom_op_release(op);  // the recorded graph node keeps its own reference
  patchbay::check_ops_status(ops, st, "split_rows");
  std::vector<patchbay::Tensor> blocks;
  for (pb_tensor* t : outputs) blocks.emplace_back(ops, t);
  return blocks;
}

}  // namespace patchbay_ffn_moe
