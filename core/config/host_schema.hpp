// The host's config sections for this version of Patchbay. Each section is declared in
// its own file under sections/ (section_<name>.cpp); adding a section is one new file and
// one line in make_host_schema().
#pragma once

#include "config/schema_registry.hpp"

namespace patchbay::config {

void declare_run_section(SchemaRegistry& schema);        // [run]
void declare_data_section(SchemaRegistry& schema);       // [data]
void declare_tokenizer_section(SchemaRegistry& schema);  // [tokenizer] -> tokenizer component
void declare_train_sections(SchemaRegistry& schema);     // [train], [optimizer] -> optimizer, [eval]

// Every host section, parents before children.
SchemaRegistry make_host_schema();

}  // namespace patchbay::config
