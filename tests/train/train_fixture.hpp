// A tiny training set-up for tests: a generated text corpus in a temporary folder, a config
// for a 2-layer character-level model on it, and the plugin registry (PATCHBAY_PLUGIN_PATH).
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/config_loader.hpp"
#include "patchbay/testing/temp_dir.hpp"
#include "runtime/registry.hpp"
#include "train/train_config.hpp"
#include "train/trainer.hpp"

namespace patchbay::train::testing {

// An empty folder of its own, removed with everything in it when the returned object dies
// (also when the test fails); converts to the folder's path.
inline patchbay::testing::TempDir fresh_folder(const std::string& name) {
  return patchbay::testing::TempDir("train_" + name);
}

// ~40 KB of simple sentences: three 16 KiB blocks, so the split has training and validation.
inline std::filesystem::path write_tiny_corpus(const std::filesystem::path& folder) {
  const std::vector<std::string> subjects = {"the cat", "a dog", "the bird", "my fish"};
  const std::vector<std::string> verbs = {"sat on", "ran to", "looked at", "slept by"};
  const std::vector<std::string> objects = {"the mat.", "the door.", "a tree.", "the river."};
  std::ofstream out(folder / "corpus.txt");
  for (int i = 0; i < 1600; ++i)
    out << subjects[i % 4] << " " << verbs[(i / 4) % 4] << " " << objects[(i / 16) % 4] << "\n";
  return folder / "corpus.txt";
}

inline std::string tiny_config_text(const std::filesystem::path& folder, const std::string& extra = "") {
  return "[run]\nname = \"tiny\"\nseed = 7\n"
         "[data]\ncorpus = \"" + (folder / "corpus.txt").string() + "\"\nvalidation_fraction = 0.3\n"
         "output_dir = \"" + (folder / "data").string() + "\"\n"
         "[tokenizer]\nkind = \"char\"\n"
         "[model]\ncontext_length = 32\nn_layers = 2\nn_heads = 2\nd_model = 32\n"
         "[optimizer]\nkind = \"adamw\"\n"
         "[train]\nbatch_size = 4\nseq_len = 16\nmax_steps = 6\nlr = 0.01\nwarmup_steps = 2\n"
         "eval_every = 3\neval_batches = 2\ncheckpoint_every = 3\nlog_every = 1\nsample_tokens = 8\n"
         "out_dir = \"" + (folder / "run").string() + "\"\n" + extra;
}

struct TinySetup {
  runtime::Registry registry;
  config::ComponentSchemaLookup lookup;
  TinySetup() {
    registry.scan(runtime::plugin_search_path({}));
    lookup = registry_schema_lookup(registry);
  }
  // Loads `text` with `overrides` (--set style) and validates it.
  config::ResolvedConfig config(const std::string& text, const std::vector<std::string>& overrides = {}) {
    config::ResolvedConfig c = config::load_config_text(text, "tiny.toml");
    for (const std::string& o : overrides) config::apply_set_override(c, o);
    validate_training_config(c, lookup);
    return c;
  }
};

// A request that draws no progress bar and prints no samples (test output stays readable).
inline TrainRequest quiet_request() {
  TrainRequest quiet;
  quiet.show_progress = false;
  quiet.print_samples = false;
  return quiet;
}

}  // namespace patchbay::train::testing
