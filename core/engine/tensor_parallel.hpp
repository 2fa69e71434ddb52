// The engine's side of Megatron-style tensor parallelism (ops table version 9): the conjugate
// pair f / g over a process-wide tensor-parallel all-reduce that the host installs (the
// trainer does, over the parallelism plugin, for `[parallelism] kind = "mpi_tensor"`). The
// engine knows nothing about MPI: it calls the installed function.
//   tp_copy_to_region(x)     (f) forward: x itself (aliases); backward: gradient SUMMED over the
//   group tp_reduce_from_region(x) (g) forward: SUM of x over the group (fresh); backward: identity
// Without an installed all-reduce (one process) both are the identity. Every rank of the group
// must run the same ops in the same order (the all-reduce is a collective).
#pragma once

#include <functional>

#include "engine/tensor.hpp"

namespace patchbay::engine {

// Sums a contiguous CPU tensor over the group, in place (every rank passes the same shape
// and dtype). Throws on failure.
using TensorParallelAllReduce = std::function<void(Tensor& contiguous)>;

// Installs the group's all-reduce for the process (empty: none); returns the previous one.
// Call before building or running a split model; not thread-safe against running ops.
TensorParallelAllReduce set_tensor_parallel_all_reduce(TensorParallelAllReduce all_reduce);
bool tensor_parallel_installed();

Tensor tp_copy_to_region(const Tensor& x);
Tensor tp_reduce_from_region(const Tensor& x);

}  // namespace patchbay::engine
