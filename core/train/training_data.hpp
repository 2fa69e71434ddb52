// The data a training run reads, prepared once and cached:
//   <data.output_dir>/{train.txt, val.txt, manifest.json}   (data/split.hpp;
//       prepared again when the manifest's val_fraction or seed differ from [data])
//   .../tokenizer-<kind>-<h>.txt    the [tokenizer] component trained on train.txt
//                                   (h = fnv1a64 of the [tokenizer] table: a changed setting
//                                   trains a new one)
//   .../{train,val}-<kind>-<h>.tokens  the splits encoded with it (data/token_cache.hpp),
//                                   re-encoded when the header's tokenizer hash differs
// Or, with [[data.sources]], several prepared datasets made with one tokenizer (refused,
// naming both hashes, when two differ), read as a mixture (mixture_sampler.hpp).
// Or, with [data] prepared = DIR, a dataset made by `patchbay data prepare --source ...`
// (data/prepared_dataset.hpp): its train and val shards read as streams, the tokenizer it
// was prepared with (refused, naming both hashes, when the config names another file).
// The splits are memory-mapped; nothing is held in memory beyond the tokenizer (and, for
// data.sampling = "documents", the documents' start offsets).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "config/config_document.hpp"
#include "config/schema_registry.hpp"
#include "data/token_sequence.hpp"
#include "runtime/registry.hpp"
#include "train/window_sampler.hpp"

namespace patchbay::train {

// One dataset of a mixture ([[data.sources]]).
struct MixtureData {
  std::string name;
  double weight = 1.0;
  double epochs = 0;  // > 0: epochs per pass instead of a weight (mixture_sampler.hpp)
  data::TokenSequence train;
  data::TokenSequence val;
  uint64_t val_bytes = 0;
};

struct TrainingData {
  runtime::TokenizerHandle tokenizer;
  std::string tokenizer_kind;
  std::filesystem::path tokenizer_file;  // the cached, trained tokenizer
  uint64_t tokenizer_hash = 0;           // fnv1a64 of tokenizer_file's bytes
  data::TokenSequence train;  // with document starts when sampling is kDocuments
  data::TokenSequence val;
  uint64_t train_bytes = 0;
  uint64_t val_bytes = 0;  // bytes of val.txt (logged; bits per byte counts evaluated targets' bytes)
  std::filesystem::path prepared_dir;
  Sampling sampling = Sampling::kRandom;  // data.sampling resolved ("auto": random / epochs)
  // data.pack_documents: train and val opened with their document starts, and every window
  // marked with its documents' segments (with_document_segments, window_sampler.hpp).
  bool pack_documents = false;
  // [[data.sources]]: every dataset of the mixture (train / val above are the first's); empty
  // for a single dataset or corpus.
  std::vector<MixtureData> mixture;
};

// Prepares (or reuses) everything above for a validated training config. Logs what it does.
TrainingData prepare_training_data(const config::ResolvedConfig& config, runtime::Registry& registry,
                                   const config::ComponentSchemaLookup& lookup);

// The tokenizer a checkpoint's run used, loaded from `file` with the config's [tokenizer].
runtime::TokenizerHandle load_config_tokenizer(const config::ResolvedConfig& config, runtime::Registry& registry,
                                               const config::ComponentSchemaLookup& lookup,
                                               const std::filesystem::path& file);

// Bits per byte of evaluated targets: loss_nats_per_token * tokens / bytes / ln 2, where
// `bytes` are the bytes those very tokens decode to (evaluator.hpp: TokenBytes); NaN for 0 bytes.
double bits_per_byte(double loss_nats_per_token, uint64_t tokens, uint64_t bytes);

}  // namespace patchbay::train
