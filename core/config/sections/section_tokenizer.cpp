// [tokenizer]: `kind` names a tokenizer component (a plugin); the component's own keys
// sit beside it, e.g. [tokenizer] kind = "bpe" vocab_size = 4096.
#include "config/host_schema.hpp"
#include "patchbay/component.hpp"

namespace patchbay::config {

void declare_tokenizer_section(SchemaRegistry& schema) {
  HostSection section;
  section.path = "tokenizer";
  section.summary = "the tokenizer component and its settings";
  section.component_kind = PB_KIND_TOKENIZER;
  section.fields = {
      Field::string("kind", nullptr, "tokenizer component name, e.g. \"char\" or \"bpe\" (patchbay plugins list)")
          .required(),
  };
  schema.add_section(std::move(section));
}

}  // namespace patchbay::config
