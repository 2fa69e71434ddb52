// The MPI process groups: components mpi_data, mpi_zero1 and mpi_tensor (one implementation,
// MpiGroup<strategy>; the host reads the strategy to decide how to use the collectives).
//
// Each object owns a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, so a failing MPI call
// becomes a PluginError naming the call and MPI's error text instead of killing the process
// silently. MPI is initialised (MPI_THREAD_SERIALIZED: the trainer calls from one thread at a
// time) by the first object and finalised when the plugin is unloaded or the process exits;
// once finalised it cannot start again in that process (MPI's rule), which an object created
// afterwards reports. Started without mpirun the group is a world of one (MPI singleton).
//
// Tensors travel in their own dtype (mpi_datatypes.hpp). Contiguous CPU tensors are passed to
// MPI in place; anything else is staged through host memory (copy_to_host / copy_from_host).
// AVG is SUM followed by a division by the world size in the tensor's dtype (integers divide
// with truncation toward zero).
#pragma once

#include <mpi.h>

#include <patchbay/parallelism.hpp>

namespace patchbay_parallel_mpi {

class MpiGroupBase : public patchbay::Parallelism {
 public:
  explicit MpiGroupBase(const patchbay::Host& host);
  ~MpiGroupBase() override;
  MpiGroupBase(const MpiGroupBase&) = delete;
  MpiGroupBase& operator=(const MpiGroupBase&) = delete;

  int64_t rank() const override { return rank_; }
  int64_t world_size() const override { return world_; }
  void all_reduce(const patchbay::Tensor& tensor, pb_collective_op op) override;
  void broadcast(const patchbay::Tensor& tensor, int64_t root) override;
  void all_gather(const patchbay::Tensor& in, const patchbay::Tensor& out) override;
  void reduce_scatter(const patchbay::Tensor& in, const patchbay::Tensor& out,
                      pb_collective_op op) override;
  void barrier() override;
  // MPI_Iallreduce; MPI progresses it inside later MPI calls and the wait.
  std::unique_ptr<patchbay::PendingCollective> all_reduce_start(const patchbay::Tensor& tensor,
                                                                pb_collective_op op) override;
  // Prints the message with this rank and calls MPI_Abort: mpirun ends every rank.
  void abort_job(int32_t exit_code, const std::string& message) override;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int64_t rank_ = 0;
  int64_t world_ = 1;
};

template <pb_parallel_strategy Strategy>
class MpiGroup : public MpiGroupBase {
 public:
  static constexpr pb_parallel_strategy kStrategy = Strategy;
  MpiGroup(const patchbay::Host& host, const patchbay::ConfigView& /*config*/)
      : MpiGroupBase(host) {}
};

inline constexpr pb_component_descriptor kMpiData =
    patchbay::make_parallelism_component<MpiGroup<PB_PARALLEL_DATA>>(
        "mpi_data", "1.0.0",
        "data parallel over MPI (mpirun -np N): replicas, gradients all-reduced");
inline constexpr pb_component_descriptor kMpiZero1 =
    patchbay::make_parallelism_component<MpiGroup<PB_PARALLEL_ZERO1>>(
        "mpi_zero1", "1.0.0",
        "ZeRO-1 over MPI: gradients reduce-scattered, optimizer state sharded by rank");
inline constexpr pb_component_descriptor kMpiTensor =
    patchbay::make_parallelism_component<MpiGroup<PB_PARALLEL_TENSOR>>(
        "mpi_tensor", "1.0.0",
        "Megatron tensor parallel over MPI: heads and FFN columns split across ranks");

}  // namespace patchbay_parallel_mpi
