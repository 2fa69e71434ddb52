// [run]: what every command that does work shares: the run's name and folder, the seed,
// extra plugin folders and the device. Relative paths are taken from the current directory.
#include "config/host_schema.hpp"
#include "patchbay/component.hpp"

namespace patchbay::config {

void declare_run_section(SchemaRegistry& schema) {
  HostSection section;
  section.path = "run";
  section.summary = "run name, output folder, seed and plugin search path";
  section.always_present = true;
  section.fields = {
      Field::string("name", "\"run\"", "name of the run; its folder is <output_dir>/<name>"),
      Field::string("output_dir", "\"runs\"", "folder holding run directories"),
      Field::integer("seed", "0", "seed of every random choice in the run")
          .range(0, 9007199254740992.0),
      Field::strings(
          "plugin_paths", "[]",
          "folders searched for plugins after --plugin-path and before the built-in folder"),
      Field::string(
          "device", "\"cpu\"",
          "device train, eval, generate and bench train run on: cpu, or cuda (the first GPU; "
          "needs a build with CUDA and a usable GPU; --device sets it)")
          .choices("cpu|cuda"),
  };
  schema.add_section(std::move(section));
}

}  // namespace patchbay::config
