// The [parallelism] config section and its options:
//   [parallelism]
//   kind = "mpi_data"        # a PB_KIND_PARALLELISM component: mpi_data, mpi_zero1, mpi_tensor,
//   single bucket_mb = 1.0          # gradient bucket size for the all-reduces started during
//   backward overlap = true           # false: all buckets are reduced after backward (for
//   measuring)
// A config without the table trains in one process, as before.
#pragma once

#include <string>

#include "config/config_document.hpp"
#include "config/schema_registry.hpp"

namespace patchbay::parallel {

struct ParallelOptions {
  bool enabled = false;  // the config has a [parallelism] table
  std::string kind;      // component name
  double bucket_mb = 1.0;
  bool overlap = true;
};

void declare_parallelism_section(config::SchemaRegistry& schema);
ParallelOptions parallel_options_from_config(const config::ResolvedConfig& config);

}  // namespace patchbay::parallel
