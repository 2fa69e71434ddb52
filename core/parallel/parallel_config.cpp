// [parallelism] section (see parallel_config.hpp).
#include "parallel/parallel_config.hpp"

#include "patchbay/component.hpp"

namespace patchbay::parallel {

void declare_parallelism_section(config::SchemaRegistry& schema) {
  using patchbay::Field;
  config::HostSection section;
  section.path = "parallelism";
  section.summary =
      "multi-process training (launch with mpirun -np N): strategy component and gradient buckets";
  section.component_kind = PB_KIND_PARALLELISM;
  section.fields = {
      Field::string(
          "kind", nullptr,
          "parallelism component: \"mpi_data\", \"mpi_zero1\", \"mpi_tensor\" or \"single\"")
          .required(),
      Field::real("bucket_mb", "1.0",
                  "MiB of gradients per all-reduce bucket (started during backward)")
          .range(0.0009765625, 4096.0),
      Field::boolean("overlap", "true",
                     "start bucket all-reduces during backward (false: all after backward)"),
  };
  schema.add_section(std::move(section));
}

ParallelOptions parallel_options_from_config(const config::ResolvedConfig& config) {
  ParallelOptions o;
  const toml::node* table = config.find("parallelism");
  if (table == nullptr || !table->is_table()) return o;
  o.enabled = true;
  const toml::table& t = *table->as_table();
  o.kind = t["kind"].value<std::string>().value_or("single");
  o.bucket_mb = t["bucket_mb"].value<double>().value_or(1.0);
  o.overlap = t["overlap"].value<bool>().value_or(true);
  return o;
}

}  // namespace patchbay::parallel
