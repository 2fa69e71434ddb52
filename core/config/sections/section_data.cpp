// [data]: the corpus and its deterministic train/validation split, or a prepared dataset of
// token shards (core/data/prepare.hpp), and the order training windows are read in; and
// [[data.sources]], a mixture of prepared datasets (an array of tables: each entry checked
// against the fields below; the rules across entries — one of weight or epochs, positive,
// unique names — are core/train/train_config.cpp's check_data_sources).
#include "config/host_schema.hpp"
#include "patchbay/component.hpp"

namespace patchbay::config {

void declare_data_section(SchemaRegistry& schema) {
  HostSection section;
  section.path = "data";
  section.summary = "corpus, train/validation split and where prepared data goes";
  section.always_present = true;
  section.fields = {
      Field::string("corpus", "\"kjv\"",
                    "\"kjv\" (the King James Bible from Debian's bible-kjv) or a path to a text file or folder"),
      Field::real("validation_fraction", "0.1", "fraction of the corpus held out for validation").range(0.0, 0.5),
      Field::integer("seed", "1234", "seed of the train/validation split").range(0, 9007199254740992.0),
      Field::string("output_dir", "\"data\"", "folder for the prepared split and token caches"),
      Field::string("prepared", "\"\"",
                    "folder made by `patchbay data prepare --source ...` (token shards and manifest.json); "
                    "when set, corpus, validation_fraction and seed are not used"),
      Field::string("sampling", "\"auto\"",
                    "order of training windows: random (with replacement), epochs (packed windows, each "
                    "once per epoch, a seeded order), documents (windows from document starts, prepared "
                    "data only); auto: random for corpus, epochs for prepared")
          .choices("auto|random|epochs|documents"),
      Field::boolean("pack_documents", "false",
                     "mark each window's documents (prepared data's document boundaries) so that no "
                     "position attends across a document boundary and positions restart at each "
                     "document (docs/packing.md); every attention kind must support packed sequences"),
  };
  schema.add_section(std::move(section));

  HostSection sources;
  sources.path = "data.sources";
  sources.summary = "one prepared dataset of a mixture, with its weight or its epochs per pass";
  sources.array_of_tables = true;
  sources.fields = {
      Field::string("prepared", nullptr, "folder made by `patchbay data prepare --source ... --out DIR`").required(),
      Field::string("name", "\"\"", "name in metrics keys (val_loss.<name>); \"\": the folder's name"),
      Field::real("weight", "1.0", "share of the training samples, weight / sum of weights (> 0)"),
      Field::real("epochs", "0.0",
                  "instead of weight: epochs of this source per pass of the mixture (> 0, on every source "
                  "or none); 0: the weight is used"),
  };
  schema.add_section(std::move(sources));
}

}  // namespace patchbay::config
