// The C custom-op bridge of pb_ops_table: a pb_custom_op_desc (plugin callbacks) wrapped in
// an engine CustomOp, so plugin-defined fused kernels take part in autograd like any op.
// Handles passed to callbacks are created here and released when the callback returns;
// statuses returned by callbacks become patchbay::Error with the callback's message.
#include <memory>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/ops.hpp"
#include "engine/ops_table.hpp"

struct pb_tensor;
struct pb_custom_ctx {
  patchbay::engine::CustomOpContext* ctx = nullptr;
  std::vector<pb_tensor*> saved;  // handles for ctx_saved, owned here
};

namespace patchbay::engine {

pb_status* ops_table_status(pb_status_code code, const std::string& message);
std::string ops_table_status_text(pb_status* s);

namespace {

class CCustomOp final : public CustomOp {
 public:
  explicit CCustomOp(const pb_custom_op_desc& desc)
      : desc_(desc), name_(desc.name ? desc.name : "custom") {}
  ~CCustomOp() override {
    if (desc_.destroy) desc_.destroy(desc_.user_data);
  }
  std::string name() const override { return name_; }

  std::vector<Tensor> forward(CustomOpContext& ctx, const std::vector<Tensor>& inputs) override {
    pb_custom_ctx c{&ctx, {}};
    Handles in(inputs);
    std::vector<pb_tensor*> out(desc_.num_outputs, nullptr);
    pb_status* s = desc_.forward(desc_.user_data, &c, in.data(), in.size(), out.data(), out.size());
    release_all(c.saved);
    return take(s, out, "forward", true);
  }

  std::vector<Tensor> backward(CustomOpContext& ctx,
                               const std::vector<Tensor>& grad_outputs) override {
    pb_custom_ctx c{&ctx, {}};
    Handles grads(grad_outputs);
    const size_t num_inputs = ctx.needs_input_grad().size();
    std::vector<pb_tensor*> out(num_inputs, nullptr);
    pb_status* s =
        desc_.backward(desc_.user_data, &c, grads.data(), grads.size(), out.data(), out.size());
    release_all(c.saved);
    return take(s, out, "backward", false);
  }

 private:
  // Temporary handles over engine tensors for one callback.
  class Handles {
   public:
    explicit Handles(const std::vector<Tensor>& ts) {
      for (const Tensor& t : ts) h_.push_back(t.defined() ? ops_table_wrap(t) : nullptr);
    }
    ~Handles() { release_all(h_); }
    pb_tensor* const* data() const { return h_.data(); }
    size_t size() const { return h_.size(); }

   private:
    std::vector<pb_tensor*> h_;
  };

  static void release_all(std::vector<pb_tensor*>& hs) {
    for (pb_tensor* h : hs) host_ops_table()->release(h);
    hs.clear();
  }

  std::vector<Tensor> take(pb_status* s, std::vector<pb_tensor*>& out, const char* which,
                           bool all_required) {
    std::vector<Tensor> result;
    for (pb_tensor* h : out) result.push_back(h ? ops_table_tensor(h) : Tensor());
    release_all(out);
    if (s)
      throw Error(ErrorKind::kInvalidArgument,
                  "custom op '" + name_ + "' " + which + ": " + ops_table_status_text(s));
    for (size_t i = 0; all_required && i < result.size(); ++i)
      if (!result[i].defined())
        throw Error(ErrorKind::kInvalidArgument,
                    "custom op '" + name_ + "' forward left output " + std::to_string(i) + " NULL");
    return result;
  }

  pb_custom_op_desc desc_;
  std::string name_;
};

}  // namespace
}  // namespace patchbay::engine

struct pb_custom_op {
  std::shared_ptr<patchbay::engine::CCustomOp> op;
  size_t num_outputs = 0;
};

namespace patchbay::engine {
namespace {

pb_status* custom_op_create(const pb_custom_op_desc* desc, pb_custom_op** out) {
  if (!desc || !out)
    return ops_table_status(PB_STATUS_INVALID_ARGUMENT,
                            "custom_op_create: desc and out must not be NULL");
  if (desc->struct_size < sizeof(pb_custom_op_desc))
    return ops_table_status(PB_STATUS_INVALID_ARGUMENT,
                            "custom_op_create: desc->struct_size " +
                                std::to_string(desc->struct_size) + " is smaller than " +
                                std::to_string(sizeof(pb_custom_op_desc)));
  if (!desc->forward || !desc->backward || desc->num_outputs == 0)
    return ops_table_status(PB_STATUS_INVALID_ARGUMENT,
                            std::string("custom_op_create: op '") +
                                (desc->name ? desc->name : "?") +
                                "' needs forward, backward and num_outputs >= 1");
  try {
    *out = new pb_custom_op{std::make_shared<CCustomOp>(*desc), desc->num_outputs};
    return nullptr;
  } catch (const std::exception& e) {
    return ops_table_status(PB_STATUS_OUT_OF_MEMORY, std::string("custom_op_create: ") + e.what());
  }
}

void custom_op_release(pb_custom_op* op) { delete op; }

pb_status* custom_op_apply(pb_custom_op* op, pb_tensor* const* inputs, size_t num_inputs,
                           pb_tensor** outputs, size_t num_outputs) {
  if (!op || !outputs || (num_inputs && !inputs))
    return ops_table_status(PB_STATUS_INVALID_ARGUMENT,
                            "custom_op_apply: op, inputs and outputs must not be NULL");
  if (num_outputs != op->num_outputs)
    return ops_table_status(PB_STATUS_INVALID_ARGUMENT,
                            "custom_op_apply: op '" + op->op->name() + "' has " +
                                std::to_string(op->num_outputs) + " outputs, " +
                                std::to_string(num_outputs) + " requested");
  try {
    std::vector<Tensor> in;
    for (size_t i = 0; i < num_inputs; ++i)
      in.push_back(inputs[i] ? ops_table_tensor(inputs[i]) : Tensor());
    std::vector<Tensor> out = apply_custom_op(op->op, in);
    for (size_t i = 0; i < num_outputs; ++i) outputs[i] = ops_table_wrap(out[i]);
    return nullptr;
  } catch (const Error& e) {
    return ops_table_status(PB_STATUS_INVALID_ARGUMENT, e.what());
  } catch (const std::exception& e) {
    return ops_table_status(PB_STATUS_INTERNAL, std::string("custom_op_apply: ") + e.what());
  }
}

pb_status* ctx_save_for_backward(pb_custom_ctx* ctx, pb_tensor* const* tensors, size_t count) {
  if (!ctx || (count && !tensors))
    return ops_table_status(PB_STATUS_INVALID_ARGUMENT,
                            "ctx_save_for_backward: ctx and tensors must not be NULL");
  std::vector<Tensor> ts;
  for (size_t i = 0; i < count; ++i)
    ts.push_back(tensors[i] ? ops_table_tensor(tensors[i]) : Tensor());
  ctx->ctx->save_for_backward(ts);
  return nullptr;
}

size_t ctx_num_saved(const pb_custom_ctx* ctx) {
  return ctx ? ctx->ctx->saved_tensors().size() : 0;
}

pb_tensor* ctx_saved(const pb_custom_ctx* ctx, size_t index) {
  if (!ctx || index >= ctx->ctx->saved_tensors().size()) return nullptr;
  auto* c = const_cast<pb_custom_ctx*>(ctx);
  if (c->saved.size() != ctx->ctx->saved_tensors().size()) {
    for (pb_tensor* h : c->saved) host_ops_table()->release(h);
    c->saved.clear();
    for (const Tensor& t : ctx->ctx->saved_tensors())
      c->saved.push_back(t.defined() ? ops_table_wrap(t) : nullptr);
  }
  return c->saved[index];
}

int ctx_needs_input_grad(const pb_custom_ctx* ctx, size_t i) {
  return ctx && i < ctx->ctx->needs_input_grad().size() && ctx->ctx->needs_input_grad()[i] ? 1 : 0;
}

}  // namespace

int ops_table_set_grad_enabled(int enabled) { return set_grad_enabled(enabled != 0) ? 1 : 0; }

void fill_custom_op_entries(pb_ops_table& t) {
  t.custom_op_create = custom_op_create;
  t.custom_op_release = custom_op_release;
  t.custom_op_apply = custom_op_apply;
  t.ctx_save_for_backward = ctx_save_for_backward;
  t.ctx_num_saved = ctx_num_saved;
  t.ctx_saved = ctx_saved;
  t.ctx_needs_input_grad = ctx_needs_input_grad;
}

}  // namespace patchbay::engine
