// [tokenizer]: `kind` names a tokenizer component (a plugin); the component's own keys
// sit beside it, e.g. [tokenizer] kind = "bpe" vocab_size = 4096.
#include "config/field_builders.hpp"
#include "config/host_schema.hpp"

namespace patchbay::config {

void declare_tokenizer_section(SchemaRegistry& schema) {
  using namespace fields;
  HostSection section;
  section.path = "tokenizer";
  section.summary = "the tokenizer component and its settings";
  section.component_kind = PB_KIND_TOKENIZER;
  section.fields = {
      required_string("kind", "tokenizer component name, e.g. \"char\" or \"bpe\" (patchbay plugins list)"),
  };
  schema.add_section(std::move(section));
}

}  // namespace patchbay::config
