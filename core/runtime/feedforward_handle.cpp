// FeedForwardHandle (see feedforward_handle.hpp).
#include "runtime/feedforward_handle.hpp"

#include <set>

#include "common/error.hpp"
#include "engine/ops_table.hpp"
#include "runtime/host_api.hpp"

namespace patchbay::runtime {
namespace {

// One reference to a pb_tensor of the engine's table, released when it goes.
class OwnedHandle {
 public:
  explicit OwnedHandle(pb_tensor* h) : h_(h) {}
  ~OwnedHandle() { engine::host_ops_table()->release(h_); }
  OwnedHandle(const OwnedHandle&) = delete;
  OwnedHandle& operator=(const OwnedHandle&) = delete;
  pb_tensor* get() const { return h_; }
  engine::Tensor tensor() const { return engine::ops_table_tensor(h_); }

 private:
  pb_tensor* h_;
};

std::string shape_text(const engine::Shape& s) { return engine::shape_str(s); }

}  // namespace

FeedForwardHandle::FeedForwardHandle(ComponentInstance instance, const pb_host_api* host)
    : instance_(std::move(instance)), host_(host) {
  if (!instance_ || instance_.component()->kind != PB_KIND_FEEDFORWARD) {
    throw Error(ErrorKind::kInternal, "FeedForwardHandle needs a feedforward instance");
  }
  vtable_ = static_cast<const pb_feedforward_vtable*>(instance_.component()->vtable);
  if (host_ == nullptr || host_->ops != engine::host_ops_table()) {
    throw Error(ErrorKind::kInternal,
                context("the host api must carry the engine's ops table (runtime::set_host_ops("
                        "engine::host_ops_table()) before creating layers)"));
  }
}

std::string FeedForwardHandle::context(const std::string& operation) const {
  return "feedforward '" + instance_.name() + "' (" + instance_.file().string() + "): " + operation;
}

void FeedForwardHandle::init(const pb_layer_context& ctx) {
  if (ctx.causal != 0 && !causal()) {
    throw Error(ErrorKind::kInvalidArgument,
                context("cannot be used in a causal language model: it does not declare "
                        "PB_FEEDFORWARD_CAP_CAUSAL (its routing lets a token see later tokens, as "
                        "expert-choice routing does); choose a token-choice or dense layer"));
  }
  // A split the layer did not declare it can do would train a wrong model without an error.
  if (ctx.tp_size > 1 && (capabilities() & PB_FEEDFORWARD_CAP_TENSOR_PARALLEL) == 0) {
    throw Error(
        ErrorKind::kInvalidArgument,
        context("cannot be split over " + std::to_string(ctx.tp_size) +
                " tensor-parallel ranks: it does not declare PB_FEEDFORWARD_CAP_TENSOR_PARALLEL"));
  }
  pb_layer_context copy = ctx;
  copy.struct_size = sizeof(pb_layer_context);
  throw_if_error(vtable_->init(instance_.get(), &copy), context("init failed"));
}

std::vector<FeedForwardHandle::Parameter> FeedForwardHandle::parameters() const {
  std::vector<Parameter> out;
  std::set<std::string> seen;
  const size_t count = vtable_->parameter_count(instance_.get());
  for (size_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    pb_tensor* handle = nullptr;
    throw_if_error(vtable_->parameter(instance_.get(), i, &name, &handle),
                   context("parameter " + std::to_string(i) + " failed"));
    if (name == nullptr || name[0] == '\0' || handle == nullptr) {
      throw Error(ErrorKind::kPluginRefused,
                  context("parameter " + std::to_string(i) + " has no name or no tensor"));
    }
    if (!seen.insert(name).second) {
      throw Error(ErrorKind::kPluginRefused, context("parameter name '" + std::string(name) + "' appears twice"));
    }
    engine::Tensor t = engine::ops_table_tensor(handle);  // borrowed handle: copy the tensor
    if (!t.requires_grad()) {
      throw Error(ErrorKind::kPluginRefused,
                  context("parameter '" + std::string(name) + "' does not require grad"));
    }
    out.push_back(Parameter{name, std::move(t)});
  }
  return out;
}

FeedForwardHandle::Output FeedForwardHandle::forward(const engine::Tensor& x, bool training) {
  const OwnedHandle in(engine::ops_table_wrap(x));
  pb_feedforward_result result{};
  result.struct_size = sizeof(result);
  throw_if_error(vtable_->forward(instance_.get(), in.get(), training ? 1 : 0, &result),
                 context("forward failed"));
  // Take ownership of the returned references before validating anything.
  const OwnedHandle y(result.y);
  const OwnedHandle aux(result.aux_loss);
  if (result.y == nullptr) throw Error(ErrorKind::kPluginRefused, context("forward returned no y"));
  Output out;
  out.y = y.tensor();
  if (out.y.shape() != x.shape()) {
    throw Error(ErrorKind::kPluginRefused, context("forward returned y " + shape_text(out.y.shape()) +
                                                   " for x " + shape_text(x.shape()) + "; y must have x's shape"));
  }
  if (result.aux_loss != nullptr) {
    out.aux_loss = aux.tensor();
    if (out.aux_loss.numel() != 1) {
      throw Error(ErrorKind::kPluginRefused,
                  context("aux_loss must be a scalar, got " + shape_text(out.aux_loss.shape())));
    }
  }
  if (result.stat_count > 0 && result.stats == nullptr) {
    throw Error(ErrorKind::kPluginRefused, context("stat_count > 0 but stats is NULL"));
  }
  for (size_t i = 0; i < result.stat_count; ++i) {
    const pb_feedforward_stat& s = *PB_ARRAY_AT(pb_feedforward_stat, result.stats, i);
    if (s.name == nullptr || (s.count > 0 && s.values == nullptr)) {
      throw Error(ErrorKind::kPluginRefused, context("stat " + std::to_string(i) + " has no name or no values"));
    }
    out.stats.push_back(Stat{s.name, std::vector<float>(s.values, s.values + s.count)});
  }
  return out;
}

}  // namespace patchbay::runtime
