// A sweep file and its expansion into jobs. A job is the base config plus a list of
// `--set path=value` overrides (the same mechanism `patchbay train --set` uses), so any key a
// config can hold is an axis, and a component swap (`optimizer.kind = ["adamw", "sgd"]`)
// goes through the config loader's own override rules.
//
// Sweep file (TOML; paths relative to the sweep file):
//   base = "../quickstart.toml"        # the config every job starts from
//   name = "attn-pos"                  # sweep directory <output_dir>/<name> (--out overrides)
//   output_dir = "runs/sweeps"         # default "runs/sweeps"
//   set = ["train.max_steps=200"]      # fixed overrides applied to every job, first
//   seeds = [0, 1, 2]                  # seed axis (innermost); key seed_key = "run.seed"
//   [grid]   "model.positional" = ["learned", "rotary"]   # Cartesian product, last axis fastest
//   [zip]    "model.d_model" = [64, 128]                   # lists stepped together (equal
//   lengths);
//            "model.n_heads" = [2, 4]                      #   [[zip]] for several groups
//   [ofat]   "train.lr" = [1e-3, 3e-3, 1e-2]               # one factor at a time: the first value
//                                                          #   of every axis is the baseline
// Job order: grid (first axis slowest) x zip groups x one-factor-at-a-time variants (baseline
// first, then each axis's other values in file order) x seeds (fastest). A section may be
// absent; with none the sweep is the base config once per seed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace patchbay::sweep {

// One override, as `--set` takes it: path=value with the value written as TOML.
struct Override {
  std::string path;
  std::string value;  // TOML text: 3, "rotary", {kind = "sgd"}
  std::string text() const { return path + "=" + value; }
};

struct JobSpec {
  size_t index = 0;                 // position in expansion order
  std::vector<Override> overrides;  // the axis values of this job (fixed `set` not included)
  bool has_seed = false;
  int64_t seed = 0;
  // Overrides that make the job, in order: the sweep's fixed ones, the axis values, the seed.
  std::vector<std::string> all_overrides;
  // The axis values without the seed, "path=value, ..." ("baseline" when empty).
  std::string label() const;
};

struct SweepSpec {
  std::filesystem::path file;         // the sweep file as given
  std::filesystem::path base_config;  // resolved relative to the sweep file
  std::string name;
  std::filesystem::path output_dir = "runs/sweeps";
  std::vector<std::string> fixed_overrides;
  std::string seed_key = "run.seed";
  std::vector<int64_t> seeds;  // empty: no seed axis
  struct Axis {
    std::string path;
    std::vector<std::string> values;  // TOML text of each value
  };
  std::vector<Axis> grid;
  std::vector<std::vector<Axis>> zips;
  std::vector<Axis> ofat;
};

// Parses a sweep file. Throws config::ConfigError (file:line, key, expected, found, fix) for
// unknown keys, empty axes, zipped lists of different lengths, a missing base.
SweepSpec load_sweep_spec(const std::filesystem::path& file);
// The same from text (base resolved relative to `base_dir`), for tests.
SweepSpec parse_sweep_spec(const std::string& text, const std::string& source_name,
                           const std::filesystem::path& base_dir);

// Every job of the sweep, in the order described above.
std::vector<JobSpec> expand_jobs(const SweepSpec& spec);

}  // namespace patchbay::sweep
