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
      // Appended for Hugging Face import (core/interop): a run whose tokenizer came from elsewhere.
      Field::string("file", "\"\"",
                    "a trained tokenizer file of this kind to use as is (empty: train one on the corpus); "
                    "relative paths are relative to the working directory"),
  };
  schema.add_section(std::move(section));
}

}  // namespace patchbay::config
