// The CLI tests' seq2seq run folder: the tiny corpus, two pairs ("the cat" -> "a dog", "sat
// on" -> "ran to") as both training and validation file, and a config training them with
// train.objective = "seq2seq". Returns the config's path; the model's shape comes from --set.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "../train/train_fixture.hpp"

namespace patchbay::testing {

inline std::string write_seq2seq_cli_run(const std::filesystem::path& folder) {
  patchbay::train::testing::write_tiny_corpus(folder);
  std::ofstream(folder / "pairs.jsonl") << R"({"source": "the cat", "target": "a dog"})"
                                        << "\n"
                                        << R"({"source": "sat on", "target": "ran to"})"
                                        << "\n";
  const std::string config = (folder / "seq2seq.toml").string();
  std::ofstream(config) << patchbay::train::testing::tiny_config_text(
      folder, "objective = \"seq2seq\"\n[train.seq2seq]\ntrain_file = \"" +
                  (folder / "pairs.jsonl").string() + "\"\nvalidation_file = \"" +
                  (folder / "pairs.jsonl").string() + "\"\n");
  return config;
}

}  // namespace patchbay::testing
