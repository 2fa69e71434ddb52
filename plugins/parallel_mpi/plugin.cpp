// Registers the parallel_mpi plugin: mpi_data, mpi_zero1 and mpi_tensor (mpi_group.hpp).
#include <patchbay/plugin.hpp>

#include "mpi_group.hpp"

PATCHBAY_PLUGIN("parallel-mpi", "1.0.0",
                PATCHBAY_COMPONENT_LIST(&patchbay_parallel_mpi::kMpiData,
                                        &patchbay_parallel_mpi::kMpiZero1,
                                        &patchbay_parallel_mpi::kMpiTensor));
