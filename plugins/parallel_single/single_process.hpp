// The "single" parallelism component: a process group of one (rank 0, world size 1,
// strategy SINGLE). Collectives reduce over one rank, so all_reduce and broadcast leave the
// tensor as it is (AVG divides by 1), barrier returns at once, and all_gather /
// reduce_scatter copy `in` into `out`. The SDK adapter has already checked ops, roots,
// shapes and dtypes (patchbay/parallelism.hpp) before these run.
#pragma once

#include <patchbay/parallelism.hpp>

namespace patchbay_parallel_single {

class SingleProcess : public patchbay::Parallelism {
 public:
  static constexpr pb_parallel_strategy kStrategy = PB_PARALLEL_SINGLE;

  SingleProcess(const patchbay::Host& host, const patchbay::ConfigView& config);

  int64_t rank() const override { return 0; }
  int64_t world_size() const override { return 1; }
  void all_reduce(const patchbay::Tensor& tensor, pb_collective_op op) override;
  void broadcast(const patchbay::Tensor& tensor, int64_t root) override;
  void all_gather(const patchbay::Tensor& in, const patchbay::Tensor& out) override;
  void reduce_scatter(const patchbay::Tensor& in, const patchbay::Tensor& out, pb_collective_op op) override;
  void barrier() override {}
};

inline constexpr pb_component_descriptor kSingle = patchbay::make_parallelism_component<SingleProcess>(
    "single", "1.0.0", "one process: rank 0 of a world of 1; collectives are identities");

}  // namespace patchbay_parallel_single
