// The list of host sections; see host_schema.hpp.
#include "config/host_schema.hpp"

namespace patchbay::config {

SchemaRegistry make_host_schema() {
  SchemaRegistry schema;
  declare_run_section(schema);
  declare_data_section(schema);
  declare_tokenizer_section(schema);
  declare_train_sections(schema);
  return schema;
}

}  // namespace patchbay::config
