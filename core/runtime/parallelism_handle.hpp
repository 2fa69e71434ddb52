// ParallelismHandle: a PB_KIND_PARALLELISM object (a process group) in plain C++ over engine
// tensors, as the trainer uses it:
//
//   ParallelismHandle group(registry.create(PB_KIND_PARALLELISM, "single", config.view()), &api);
//   group.all_reduce(grad, PB_COLLECTIVE_AVG);          // in place
//   engine::Tensor all = group.all_gather(shard);       // [world * N, ...]
//
// Every plugin failure becomes patchbay::Error carrying the plugin's message, prefixed by
// "parallelism '<name>' (<file>): <operation>". The constructor reads rank and world size once
// and refuses a plugin reporting world_size < 1 or a rank outside [0, world). Collectives write
// into the tensors they are given (the engine tensor and the pb_tensor share storage), so pass
// contiguous tensors the caller owns. Tensors cross as pb_tensor handles of the engine's ops
// table: the api must carry engine::host_ops_table() (checked at construction).
#pragma once

#include <cstdint>
#include <string>

#include "engine/tensor.hpp"
#include "patchbay/parallelism.h"
#include "runtime/component_instance.hpp"

namespace patchbay::runtime {

class ParallelismHandle {
 public:
  // `instance` must be a PB_KIND_PARALLELISM object created with `host`.
  ParallelismHandle(ComponentInstance instance, const pb_host_api* host);

  pb_parallel_strategy strategy() const { return vtable_->strategy; }
  int64_t rank() const { return rank_; }
  int64_t world_size() const { return world_size_; }

  void all_reduce(engine::Tensor& tensor, pb_collective_op op);
  void broadcast(engine::Tensor& tensor, int64_t root);
  // out [world * N, ...] from in [N, ...]; the allocating form returns a new tensor.
  void all_gather(const engine::Tensor& in, engine::Tensor& out);
  engine::Tensor all_gather(const engine::Tensor& in);
  // out [N / world, ...] from in [N, ...] (N divisible by world); allocating form too.
  void reduce_scatter(const engine::Tensor& in, engine::Tensor& out, pb_collective_op op);
  engine::Tensor reduce_scatter(const engine::Tensor& in, pb_collective_op op);
  void barrier();

  // SDK 1.1: a non-blocking in-place all-reduce. The tensor must stay untouched until wait().
  // A 1.0 plugin (no all_reduce_start) runs the blocking all_reduce in start instead.
  // A request not waited for is waited for by its destructor (errors then ignored).
  class Request {
   public:
    Request() = default;
    Request(Request&& other) noexcept;
    Request& operator=(Request&& other) noexcept;
    ~Request();
    bool pending() const { return request_ != nullptr; }

   private:
    friend class ParallelismHandle;
    ParallelismHandle* group_ = nullptr;
    pb_collective_request* request_ = nullptr;
    pb_tensor* tensor_ = nullptr;  // our reference to the wrapped tensor, released after the wait
  };
  Request all_reduce_start(engine::Tensor& tensor, pb_collective_op op);
  void wait(Request& request);
  bool has_nonblocking() const;
  // Ends every rank of the job (SDK 1.1 abort_job; a 1.0 plugin: this process only).
  [[noreturn]] void abort_job(int exit_code, const std::string& message);

  const ComponentInstance& instance() const { return instance_; }

 private:
  std::string context(const std::string& operation) const;

  ComponentInstance instance_;
  const pb_parallelism_vtable* vtable_ = nullptr;
  const pb_host_api* host_;
  int64_t rank_ = 0;
  int64_t world_size_ = 1;
};

// "single", "data", "zero1", "tensor"; "strategy N" for an unknown value.
std::string parallel_strategy_name(pb_parallel_strategy strategy);

}  // namespace patchbay::runtime
