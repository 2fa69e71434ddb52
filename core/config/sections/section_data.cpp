// [data]: the corpus and its deterministic train/validation split.
#include "config/field_builders.hpp"
#include "config/host_schema.hpp"

namespace patchbay::config {

void declare_data_section(SchemaRegistry& schema) {
  using namespace fields;
  HostSection section;
  section.path = "data";
  section.summary = "corpus, train/validation split and where prepared data goes";
  section.always_present = true;
  section.fields = {
      string_field("corpus", "\"kjv\"",
                   "\"kjv\" (the King James Bible from Debian's bible-kjv) or a path to a text file or folder"),
      float_field("validation_fraction", "0.1", 0.0, 0.5, "fraction of the corpus held out for validation"),
      int_field("seed", "1234", 0, 9007199254740992.0, "seed of the train/validation split"),
      string_field("output_dir", "\"data\"", "folder for the prepared split and token caches"),
  };
  schema.add_section(std::move(section));
}

}  // namespace patchbay::config
