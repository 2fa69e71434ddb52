// ParallelismHandle (see parallelism_handle.hpp).
#include "runtime/parallelism_handle.hpp"

#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "common/error.hpp"
#include "engine/ops_table.hpp"
#include "runtime/host_api.hpp"

namespace patchbay::runtime {
namespace {

// One reference to a pb_tensor of the engine's table sharing the engine tensor's storage.
class WrappedTensor {
 public:
  explicit WrappedTensor(const engine::Tensor& t) : h_(engine::ops_table_wrap(t)) {}
  ~WrappedTensor() { engine::host_ops_table()->release(h_); }
  WrappedTensor(const WrappedTensor&) = delete;
  WrappedTensor& operator=(const WrappedTensor&) = delete;
  pb_tensor* get() const { return h_; }

 private:
  pb_tensor* h_;
};

}  // namespace

std::string parallel_strategy_name(pb_parallel_strategy strategy) {
  switch (strategy) {
    case PB_PARALLEL_SINGLE: return "single";
    case PB_PARALLEL_DATA: return "data";
    case PB_PARALLEL_ZERO1: return "zero1";
    case PB_PARALLEL_TENSOR: return "tensor";
  }
  return "strategy " + std::to_string(static_cast<int>(strategy));
}

ParallelismHandle::ParallelismHandle(ComponentInstance instance, const pb_host_api* host)
    : instance_(std::move(instance)), host_(host) {
  if (!instance_ || instance_.component()->kind != PB_KIND_PARALLELISM) {
    throw Error(ErrorKind::kInternal, "ParallelismHandle needs a parallelism instance");
  }
  vtable_ = static_cast<const pb_parallelism_vtable*>(instance_.component()->vtable);
  if (host_ == nullptr || host_->ops != engine::host_ops_table()) {
    throw Error(ErrorKind::kInternal,
                context("the host api must carry the engine's ops table (runtime::set_host_ops("
                        "engine::host_ops_table()) before creating process groups)"));
  }
  world_size_ = vtable_->world_size(instance_.get());
  rank_ = vtable_->rank(instance_.get());
  if (world_size_ < 1 || rank_ < 0 || rank_ >= world_size_) {
    throw Error(ErrorKind::kPluginRefused, context("reports rank " + std::to_string(rank_) + " of world size " +
                                                   std::to_string(world_size_) +
                                                   "; expected world >= 1 and 0 <= rank < world"));
  }
  const auto strategy = static_cast<int>(vtable_->strategy);
  if (strategy < PB_PARALLEL_SINGLE || strategy > PB_PARALLEL_TENSOR) {
    throw Error(ErrorKind::kPluginRefused, context("declares unknown " + parallel_strategy_name(vtable_->strategy)));
  }
}

std::string ParallelismHandle::context(const std::string& operation) const {
  return "parallelism '" + instance_.name() + "' (" + instance_.file().string() + "): " + operation;
}

void ParallelismHandle::all_reduce(engine::Tensor& tensor, pb_collective_op op) {
  const WrappedTensor t(tensor);
  throw_if_error(vtable_->all_reduce(instance_.get(), t.get(), op), context("all_reduce failed"));
}

void ParallelismHandle::broadcast(engine::Tensor& tensor, int64_t root) {
  const WrappedTensor t(tensor);
  throw_if_error(vtable_->broadcast(instance_.get(), t.get(), root), context("broadcast failed"));
}

void ParallelismHandle::all_gather(const engine::Tensor& in, engine::Tensor& out) {
  const WrappedTensor a(in), b(out);
  throw_if_error(vtable_->all_gather(instance_.get(), a.get(), b.get()), context("all_gather failed"));
}

engine::Tensor ParallelismHandle::all_gather(const engine::Tensor& in) {
  if (in.dim() == 0) throw Error(ErrorKind::kInvalidArgument, context("all_gather needs a tensor with rows, got a scalar"));
  engine::Shape shape = in.shape();
  shape[0] *= world_size_;
  engine::Tensor out = engine::Tensor::empty(shape, in.dtype(), in.device());
  all_gather(in, out);
  return out;
}

void ParallelismHandle::reduce_scatter(const engine::Tensor& in, engine::Tensor& out, pb_collective_op op) {
  const WrappedTensor a(in), b(out);
  throw_if_error(vtable_->reduce_scatter(instance_.get(), a.get(), b.get(), op), context("reduce_scatter failed"));
}

engine::Tensor ParallelismHandle::reduce_scatter(const engine::Tensor& in, pb_collective_op op) {
  if (in.dim() == 0 || in.shape()[0] % world_size_ != 0) {
    throw Error(ErrorKind::kInvalidArgument,
                context("reduce_scatter needs dim 0 divisible by world size " + std::to_string(world_size_) +
                        ", got " + engine::shape_str(in.shape())));
  }
  engine::Shape shape = in.shape();
  shape[0] /= world_size_;
  engine::Tensor out = engine::Tensor::empty(shape, in.dtype(), in.device());
  reduce_scatter(in, out, op);
  return out;
}

bool ParallelismHandle::has_nonblocking() const {
  return vtable_->struct_size >= offsetof(pb_parallelism_vtable, wait) + sizeof(vtable_->wait) &&
         vtable_->all_reduce_start != nullptr && vtable_->wait != nullptr;
}

ParallelismHandle::Request::Request(Request&& other) noexcept
    : group_(other.group_), request_(other.request_), tensor_(other.tensor_) {
  other.request_ = nullptr;
  other.tensor_ = nullptr;
}

ParallelismHandle::Request& ParallelismHandle::Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    this->~Request();
    group_ = other.group_;
    request_ = other.request_;
    tensor_ = other.tensor_;
    other.request_ = nullptr;
    other.tensor_ = nullptr;
  }
  return *this;
}

ParallelismHandle::Request::~Request() {
  if (request_ != nullptr) {
    pb_status* st = group_->vtable_->wait(group_->instance_.get(), request_);
    if (st != nullptr) group_->host_->status_free(st);
  }
  if (tensor_ != nullptr) engine::host_ops_table()->release(tensor_);
}

ParallelismHandle::Request ParallelismHandle::all_reduce_start(engine::Tensor& tensor, pb_collective_op op) {
  Request r;
  r.group_ = this;
  if (!has_nonblocking()) {
    all_reduce(tensor, op);
    return r;
  }
  r.tensor_ = engine::ops_table_wrap(tensor);
  throw_if_error(vtable_->all_reduce_start(instance_.get(), r.tensor_, op, &r.request_),
                 context("all_reduce_start failed"));
  return r;
}

void ParallelismHandle::wait(Request& request) {
  if (request.request_ != nullptr) {
    pb_collective_request* req = request.request_;
    request.request_ = nullptr;
    throw_if_error(vtable_->wait(instance_.get(), req), context("wait failed"));
  }
  if (request.tensor_ != nullptr) {
    engine::host_ops_table()->release(request.tensor_);
    request.tensor_ = nullptr;
  }
}

void ParallelismHandle::abort_job(int exit_code, const std::string& message) {
  if (vtable_->struct_size >= offsetof(pb_parallelism_vtable, abort_job) + sizeof(vtable_->abort_job) &&
      vtable_->abort_job != nullptr)
    vtable_->abort_job(instance_.get(), exit_code, message.c_str());
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(exit_code);
}

void ParallelismHandle::barrier() { throw_if_error(vtable_->barrier(instance_.get()), context("barrier failed")); }

}  // namespace patchbay::runtime
