// AttentionHandle (see attention_handle.hpp): status-to-Error translation and the crossing of
// engine tensors as the ops table's pb_tensor handles.
#include "runtime/attention_handle.hpp"

#include <string>
#include <utility>

#include "common/error.hpp"
#include "engine/ops_table.hpp"
#include "runtime/host_api.hpp"

namespace patchbay::runtime {
namespace {

// Owns one reference to a handle made for a call.
struct HandleDeleter {
  const pb_ops_table* ops;
  void operator()(pb_tensor* t) const { ops->release(t); }
};
using OwnedHandle = std::unique_ptr<pb_tensor, HandleDeleter>;

const pb_attention_vtable* vtable_of(const ComponentInstance& instance) {
  return static_cast<const pb_attention_vtable*>(instance.component()->vtable);
}

}  // namespace

AttentionHandle::State::State(std::shared_ptr<const ComponentInstance> owner, void* state,
                              int64_t batch, int64_t capacity)
    : owner_(std::move(owner)), state_(state), batch_(batch), capacity_(capacity) {}

AttentionHandle::State::State(State&& other) noexcept
    : owner_(std::move(other.owner_)),
      state_(std::exchange(other.state_, nullptr)),
      batch_(other.batch_),
      capacity_(other.capacity_) {}

AttentionHandle::State& AttentionHandle::State::operator=(State&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::move(other.owner_);
    state_ = std::exchange(other.state_, nullptr);
    batch_ = other.batch_;
    capacity_ = other.capacity_;
  }
  return *this;
}

AttentionHandle::State::~State() { reset(); }

void AttentionHandle::State::reset() noexcept {
  if (state_ != nullptr) vtable_of(*owner_)->state_destroy(owner_->get(), state_);
  state_ = nullptr;
  owner_.reset();
}

int64_t AttentionHandle::State::length() const {
  return state_ == nullptr ? 0 : vtable_of(*owner_)->state_length(owner_->get(), state_);
}

AttentionHandle::CrossMemory::CrossMemory(std::shared_ptr<const ComponentInstance> owner,
                                          void* memory, int64_t batch)
    : owner_(std::move(owner)), memory_(memory), batch_(batch) {}

AttentionHandle::CrossMemory::CrossMemory(CrossMemory&& other) noexcept
    : owner_(std::move(other.owner_)),
      memory_(std::exchange(other.memory_, nullptr)),
      batch_(other.batch_) {}

AttentionHandle::CrossMemory& AttentionHandle::CrossMemory::operator=(
    CrossMemory&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::move(other.owner_);
    memory_ = std::exchange(other.memory_, nullptr);
    batch_ = other.batch_;
  }
  return *this;
}

AttentionHandle::CrossMemory::~CrossMemory() { reset(); }

void AttentionHandle::CrossMemory::reset() noexcept {
  if (memory_ != nullptr) vtable_of(*owner_)->cross_memory_destroy(owner_->get(), memory_);
  memory_ = nullptr;
  owner_.reset();
}

AttentionHandle::AttentionHandle(ComponentInstance instance, const pb_host_api* host)
    : instance_(std::make_shared<const ComponentInstance>(std::move(instance))),
      vtable_(nullptr),
      host_(host) {
  if (!*instance_ || instance_->component()->kind != PB_KIND_ATTENTION)
    throw Error(ErrorKind::kInternal, "AttentionHandle needs an attention instance");
  if (host_ == nullptr || host_->ops != engine::host_ops_table())
    throw Error(
        ErrorKind::kInternal,
        context("the host api handed to the plugin does not carry the engine's ops table; call "
                "runtime::set_host_ops(engine::host_ops_table()) before creating layers"));
  vtable_ = vtable_of(*instance_);
}

std::string AttentionHandle::context(const char* operation) const {
  return "attention '" + instance_->name() + "' (" + instance_->file().string() + "): " + operation;
}

engine::Tensor AttentionHandle::take(pb_tensor* handle, const char* operation) const {
  if (handle == nullptr)
    throw Error(ErrorKind::kInternal,
                context(operation) + " returned success but no tensor (a plugin bug)");
  OwnedHandle owned(handle, HandleDeleter{host_->ops});
  return engine::ops_table_tensor(owned.get());
}

void AttentionHandle::init(const pb_layer_context& ctx) {
  // A split the layer did not declare it can do would train a wrong model without an error.
  if (ctx.tp_size > 1 && !has(PB_ATTENTION_CAP_TENSOR_PARALLEL))
    throw Error(ErrorKind::kInvalidArgument,
                context("init") + ": cannot be split over " + std::to_string(ctx.tp_size) +
                    " tensor-parallel ranks: it does not declare PB_ATTENTION_CAP_TENSOR_PARALLEL");
  pb_layer_context sized = ctx;
  sized.struct_size = sizeof(pb_layer_context);
  throw_if_error(vtable_->init(instance_->get(), &sized), context("init failed"));
}

std::vector<AttentionHandle::Parameter> AttentionHandle::parameters() const {
  std::vector<Parameter> out;
  const size_t count = vtable_->parameter_count(instance_->get());
  for (size_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    pb_tensor* tensor = nullptr;  // borrowed from the layer
    throw_if_error(vtable_->parameter(instance_->get(), i, &name, &tensor),
                   context("parameter failed"));
    if (name == nullptr || tensor == nullptr)
      throw Error(ErrorKind::kInternal, context("parameter") + " #" + std::to_string(i) +
                                            " returned a NULL name or tensor (a plugin bug)");
    out.push_back(Parameter{name, engine::ops_table_tensor(tensor)});
  }
  return out;
}

engine::Tensor AttentionHandle::forward(const engine::Tensor& x, bool training) const {
  OwnedHandle input(engine::ops_table_wrap(x), HandleDeleter{host_->ops});
  pb_tensor* y = nullptr;
  throw_if_error(vtable_->forward(instance_->get(), input.get(), training ? 1 : 0, &y),
                 context("forward failed"));
  return take(y, "forward");
}

AttentionHandle::State AttentionHandle::state_create(int64_t batch, int64_t capacity) const {
  if (cache_kind() == PB_ATTENTION_CACHE_NONE)
    throw Error(ErrorKind::kInvalidArgument,
                context("state_create") +
                    ": this layer has no decoding state (cache_kind NONE); it cannot be "
                    "used for incremental generation");
  void* state = nullptr;
  throw_if_error(vtable_->state_create(instance_->get(), batch, capacity, &state),
                 context("state_create failed"));
  if (state == nullptr)
    throw Error(ErrorKind::kInternal,
                context("state_create") + " returned success but no state (a plugin bug)");
  return State(instance_, state, batch, capacity);
}

engine::Tensor AttentionHandle::forward_step(State& state, const engine::Tensor& x) const {
  if (state.state_ == nullptr || state.owner_ != instance_)
    throw Error(ErrorKind::kInternal,
                context("forward_step") + ": the state was not made by this layer");
  OwnedHandle input(engine::ops_table_wrap(x), HandleDeleter{host_->ops});
  pb_tensor* y = nullptr;
  throw_if_error(vtable_->forward_step(instance_->get(), state.state_, input.get(), &y),
                 context("forward_step failed"));
  return take(y, "forward_step");
}

bool AttentionHandle::reorder_state(State& state, std::span<const int64_t> source) const {
  if (state.state_ == nullptr || state.owner_ != instance_)
    throw Error(ErrorKind::kInternal,
                context("state_reorder") + ": the state was not made by this layer");
  if (!PB_HAS_FIELD(vtable_, pb_attention_vtable, state_reorder) ||
      vtable_->state_reorder == nullptr)
    return false;
  pb_status* status = vtable_->state_reorder(instance_->get(), state.state_, source.data(),
                                             static_cast<int64_t>(source.size()));
  if (status != nullptr && host_->status_code(status) == PB_STATUS_UNSUPPORTED) {
    host_->status_free(status);
    return false;
  }
  throw_if_error(status, context("state_reorder failed"));
  return true;
}

std::optional<AttentionHandle::State> AttentionHandle::fork_state(
    const State& state, std::span<const int64_t> source) const {
  if (state.state_ == nullptr || state.owner_ != instance_)
    throw Error(ErrorKind::kInternal,
                context("state_fork") + ": the state was not made by this layer");
  if (!PB_HAS_FIELD(vtable_, pb_attention_vtable, state_fork) || vtable_->state_fork == nullptr)
    return std::nullopt;
  void* copy = nullptr;
  pb_status* status = vtable_->state_fork(instance_->get(), state.state_, source.data(),
                                          static_cast<int64_t>(source.size()), &copy);
  if (status != nullptr && host_->status_code(status) == PB_STATUS_UNSUPPORTED) {
    host_->status_free(status);
    return std::nullopt;
  }
  throw_if_error(status, context("state_fork failed"));
  if (copy == nullptr)
    throw Error(ErrorKind::kInternal,
                context("state_fork") + " returned success but no state (a plugin bug)");
  return State(instance_, copy, static_cast<int64_t>(source.size()), state.capacity_);
}

bool AttentionHandle::can_cross() const {
  return has(PB_ATTENTION_CAP_CROSS) && PB_HAS_FIELD(vtable_, pb_attention_vtable, forward_cross) &&
         vtable_->cross_memory_create != nullptr && vtable_->cross_memory_destroy != nullptr &&
         vtable_->forward_cross != nullptr;
}

void AttentionHandle::require_cross() const {
  if (can_cross()) return;
  throw Error(ErrorKind::kInvalidArgument,
              "attention '" + instance_->name() + "' (" + instance_->file().string() +
                  ") cannot serve as cross-attention: it does not declare "
                  "PB_ATTENTION_CAP_CROSS (attention interface 1.3). Choose a kind whose "
                  "`patchbay plugins describe attention <name>` lists cross-attention (e.g. "
                  "dense) for the decoder's cross-attention");
}

AttentionHandle::CrossMemory AttentionHandle::cross_memory_create(
    const engine::Tensor& memory, const engine::Tensor* key_padding_mask, bool training) const {
  require_cross();
  OwnedHandle input(engine::ops_table_wrap(memory), HandleDeleter{host_->ops});
  OwnedHandle mask(
      key_padding_mask != nullptr ? engine::ops_table_wrap(*key_padding_mask) : nullptr,
      HandleDeleter{host_->ops});
  void* made = nullptr;
  throw_if_error(vtable_->cross_memory_create(instance_->get(), input.get(), mask.get(),
                                              training ? 1 : 0, &made),
                 context("cross_memory_create failed"));
  if (made == nullptr)
    throw Error(ErrorKind::kInternal,
                context("cross_memory_create") + " returned success but no memory (a plugin bug)");
  return CrossMemory(instance_, made, memory.size(0));
}

engine::Tensor AttentionHandle::forward_cross(const engine::Tensor& x, const CrossMemory& memory,
                                              bool training) const {
  if (memory.memory_ == nullptr || memory.owner_ != instance_)
    throw Error(ErrorKind::kInternal,
                context("forward_cross") + ": the memory was not made by this layer");
  OwnedHandle input(engine::ops_table_wrap(x), HandleDeleter{host_->ops});
  pb_tensor* y = nullptr;
  throw_if_error(
      vtable_->forward_cross(instance_->get(), input.get(), memory.memory_, training ? 1 : 0, &y),
      context("forward_cross failed"));
  return take(y, "forward_cross");
}

bool AttentionHandle::can_pack() const {
  return has(PB_ATTENTION_CAP_PACKED) &&
         PB_HAS_FIELD(vtable_, pb_attention_vtable, forward_packed) &&
         vtable_->forward_packed != nullptr;
}

void AttentionHandle::require_packed() const {
  if (can_pack()) return;
  throw Error(ErrorKind::kInvalidArgument,
              "attention '" + instance_->name() + "' (" + instance_->file().string() +
                  ") cannot run packed sequences: it does not declare PB_ATTENTION_CAP_PACKED "
                  "(attention interface 1.5), so examples packed into one row would attend to "
                  "each other. Turn packing off ([data] pack_documents = false, [train.sft] "
                  "pack_examples = false) or choose a kind "
                  "whose `patchbay plugins describe attention <name>` lists packed sequences "
                  "(e.g. dense)");
}

engine::Tensor AttentionHandle::forward_packed(const engine::Tensor& x,
                                               const engine::Tensor& segment_ids,
                                               bool training) const {
  require_packed();
  OwnedHandle input(engine::ops_table_wrap(x), HandleDeleter{host_->ops});
  OwnedHandle ids(engine::ops_table_wrap(segment_ids), HandleDeleter{host_->ops});
  pb_tensor* y = nullptr;
  throw_if_error(
      vtable_->forward_packed(instance_->get(), input.get(), ids.get(), training ? 1 : 0, &y),
      context("forward_packed failed"));
  return take(y, "forward_packed");
}

}  // namespace patchbay::runtime
