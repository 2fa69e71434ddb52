// Prepared splits, the trained tokenizer and token caches for a run; see training_data.hpp.
#include "train/training_data.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <sstream>

#include "common/error.hpp"
#include "config/component_view.hpp"
#include "data/corpus.hpp"
#include "data/prepared_dataset.hpp"
#include "data/split.hpp"
#include "data/tokenizer_io.hpp"
#include "train/train_config.hpp"

namespace patchbay::train {

namespace fs = std::filesystem;

namespace {

bool manifest_matches(const fs::path& manifest, const data::SplitOptions& options) {
  if (!fs::is_regular_file(manifest)) return false;
  try {
    std::ifstream in(manifest);
    const nlohmann::json m = nlohmann::json::parse(in);
    return m.at("val_fraction").get<double>() == options.val_fraction &&
           m.at("seed").get<uint64_t>() == options.seed;
  } catch (const std::exception&) {
    return false;
  }
}

std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

runtime::TokenizerHandle create_config_tokenizer(const config::ResolvedConfig& config, runtime::Registry& registry,
                                                 const config::ComponentSchemaLookup& lookup) {
  const config::SelectedComponent selected =
      config::select_component(config, make_training_schema(), lookup, "tokenizer");
  return registry.create_tokenizer(selected.name, *selected.config.view());
}

bool cache_is_current(const fs::path& cache_file, uint64_t tokenizer_hash, uint64_t source_bytes_hash) {
  if (!fs::is_regular_file(cache_file)) return false;
  try {
    const data::TokenCache cache = data::TokenCache::open(cache_file);
    return cache.info().tokenizer_hash == tokenizer_hash && cache.info().source_hash == source_bytes_hash;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

double bits_per_byte(double loss_nats_per_token, uint64_t tokens, uint64_t bytes) {
  if (bytes == 0) return std::nan("");
  return loss_nats_per_token * static_cast<double>(tokens) / static_cast<double>(bytes) / std::log(2.0);
}

runtime::TokenizerHandle load_config_tokenizer(const config::ResolvedConfig& config, runtime::Registry& registry,
                                               const config::ComponentSchemaLookup& lookup, const fs::path& file) {
  runtime::TokenizerHandle tokenizer = create_config_tokenizer(config, registry, lookup);
  tokenizer.load(file.string());
  return tokenizer;
}

namespace {

Sampling resolved_sampling(const DataOptions& options) {
  if (options.sampling == "auto")
    return options.prepared.empty() && options.sources.empty() ? Sampling::kRandom : Sampling::kEpochs;
  return sampling_from_name(options.sampling);
}

// [data] prepared = DIR: the shards and the tokenizer they were made with.
TrainingData open_prepared_training_data(const config::ResolvedConfig& config, runtime::Registry& registry,
                                         const config::ComponentSchemaLookup& lookup, const DataOptions& options) {
  const data::PreparedDataset dataset = data::open_prepared_dataset(options.prepared);
  const std::string kind = config_string(config, "tokenizer.kind");
  if (kind != dataset.tokenizer_kind)
    throw Error(ErrorKind::kInvalidArgument, "data.prepared '" + options.prepared.string() + "' was prepared with a '" +
                                                 dataset.tokenizer_kind + "' tokenizer, but tokenizer.kind is '" + kind +
                                                 "'; set tokenizer.kind = \"" + dataset.tokenizer_kind + "\"");
  const toml::node* file_node = config.find("tokenizer.file");
  const std::string given = file_node != nullptr ? file_node->value<std::string>().value_or("") : "";
  const fs::path tokenizer_file = given.empty() ? dataset.tokenizer_file : fs::path(given);
  if (!fs::is_regular_file(tokenizer_file))
    throw Error(ErrorKind::kNotFound, "the tokenizer file '" + tokenizer_file.string() + "' that data.prepared '" +
                                          options.prepared.string() + "' names is gone; set tokenizer.file to a copy of it");
  const uint64_t hash = data::fnv1a64(data::read_text_file(tokenizer_file));
  if (hash != dataset.tokenizer_hash)
    throw Error(ErrorKind::kInvalidArgument,
                "data.prepared '" + options.prepared.string() + "' was prepared with tokenizer " +
                    hex64(dataset.tokenizer_hash) + ", but '" + tokenizer_file.string() + "' is tokenizer " + hex64(hash) +
                    ": ids of two tokenizers never mix. Train with the tokenizer it was prepared with (" +
                    dataset.tokenizer_file.string() + "), or prepare the data again with this one");
  runtime::TokenizerHandle tokenizer = load_config_tokenizer(config, registry, lookup, tokenizer_file);
  const Sampling sampling = resolved_sampling(options);
  data::TokenSequence val = data::open_split(dataset, 1, options.pack_documents);
  if (val.size() == 0)
    throw Error(ErrorKind::kInvalidArgument, "data.prepared '" + options.prepared.string() +
                                                 "' has no validation documents: prepare it with --val-fraction > 0");
  spdlog::info("prepared dataset {}: {} train tokens in {} shards, {} val tokens; windows: {}",
               options.prepared.string(), dataset.tokens[0], dataset.shards[0].size(), dataset.tokens[1],
               sampling_name(sampling));
  TrainingData data{
      std::move(tokenizer),
      kind,
      tokenizer_file,
      hash,
      data::open_split(dataset, 0, sampling == Sampling::kDocuments || options.pack_documents),
      std::move(val),
      dataset.bytes[0],
      dataset.bytes[1],
      options.prepared};
  data.sampling = sampling;
  data.pack_documents = options.pack_documents;
  return data;
}

// [[data.sources]]: the first dataset as above, then every one as a mixture member.
TrainingData open_mixture_training_data(const config::ResolvedConfig& config, runtime::Registry& registry,
                                        const config::ComponentSchemaLookup& lookup, const DataOptions& options) {
  DataOptions first = options;
  first.prepared = options.sources.front().prepared;
  TrainingData data = open_prepared_training_data(config, registry, lookup, first);
  for (const MixtureSourceOptions& source : options.sources) {
    const data::PreparedDataset dataset = data::open_prepared_dataset(source.prepared);
    if (dataset.tokenizer_hash != data.tokenizer_hash)
      throw Error(ErrorKind::kInvalidArgument,
                  "data.sources '" + source.name + "' (" + source.prepared.string() + ") was prepared with tokenizer " +
                      hex64(dataset.tokenizer_hash) + ", but '" + options.sources.front().name + "' with " +
                      hex64(data.tokenizer_hash) + ": a mixture's datasets must share one tokenizer (ids of two "
                      "tokenizers never mix). Prepare them again with the same --tokenizer");
    MixtureData member{source.name, source.weight, source.epochs, data::open_split(dataset, 0, data.sampling == Sampling::kDocuments),
                       data::open_split(dataset, 1, false), dataset.bytes[1]};
    if (member.val.size() == 0)
      throw Error(ErrorKind::kInvalidArgument, "data.sources '" + source.name +
                                                   "' has no validation documents: prepare it with --val-fraction > 0");
    spdlog::info("mixture source '{}': {} {}, {} train tokens, {} val tokens", source.name,
                 source.epochs > 0 ? "epochs" : "weight", source.epochs > 0 ? source.epochs : source.weight,
                 dataset.tokens[0], dataset.tokens[1]);
    data.mixture.push_back(std::move(member));
  }
  return data;
}

}  // namespace

TrainingData prepare_training_data(const config::ResolvedConfig& config, runtime::Registry& registry,
                                   const config::ComponentSchemaLookup& lookup) {
  const DataOptions options = data_options_from_config(config);
  if (options.pack_documents && (!options.sources.empty() || options.prepared.empty()))
    throw Error(ErrorKind::kInvalidArgument,
                std::string("data.pack_documents = true needs one prepared dataset with document "
                            "boundaries (data.prepared, made by `patchbay data prepare --source "
                            "...`); ") +
                    (options.sources.empty() ? "the single-corpus [data] form has none"
                                             : "[[data.sources]] mixtures are not packed yet"));
  if (!options.sources.empty()) return open_mixture_training_data(config, registry, lookup, options);
  if (!options.prepared.empty()) return open_prepared_training_data(config, registry, lookup, options);
  const std::string& corpus_source = options.corpus;
  data::SplitOptions split_options;
  split_options.val_fraction = options.validation_fraction;
  split_options.seed = options.split_seed;
  const fs::path prepared = options.output_dir;  // [data]: the prepared folder itself

  if (!manifest_matches(prepared / "manifest.json", split_options) || !fs::is_regular_file(prepared / "train.txt") ||
      !fs::is_regular_file(prepared / "val.txt")) {
    spdlog::info("preparing corpus '{}' into {}", corpus_source, prepared.string());
    const data::Corpus corpus = data::load_corpus(corpus_source);
    const data::CorpusSplit split = data::split_corpus(corpus, split_options);
    data::write_prepared_corpus(prepared, corpus, split, split_options);
  }

  runtime::TokenizerHandle tokenizer = create_config_tokenizer(config, registry, lookup);
  const std::string kind = config_string(config, "tokenizer.kind");
  std::ostringstream tokenizer_table;
  tokenizer_table << *config.table()["tokenizer"].as_table();
  // [tokenizer] file: a given trained tokenizer (an imported run's); its bytes enter the tag, so
  // its token caches never mix with those of a tokenizer trained under the same table.
  const toml::node* file_node = config.find("tokenizer.file");  // absent in configs older than the key
  const std::string given_file = file_node != nullptr ? file_node->value<std::string>().value_or("") : "";
  if (!given_file.empty() && !fs::is_regular_file(given_file))
    throw Error(ErrorKind::kNotFound, "tokenizer.file '" + given_file +
                                          "' is not a file (a trained tokenizer of kind '" + kind +
                                          "' was expected there; leave tokenizer.file empty to train one)");
  if (!given_file.empty()) tokenizer_table << data::fnv1a64(data::read_text_file(given_file));
  const std::string tag = kind + "-" + hex64(data::fnv1a64(tokenizer_table.str())).substr(0, 8);
  const fs::path tokenizer_file = given_file.empty() ? prepared / ("tokenizer-" + tag + ".txt") : fs::path(given_file);
  if (fs::is_regular_file(tokenizer_file)) {
    tokenizer.load(tokenizer_file.string());
  } else if (tokenizer.vocab_size() > 0) {
    // The config named a ready vocabulary (bpe: vocab_file + merges_file or tokenizer_json),
    // loaded when the tokenizer was created: keep it, do not train.
    spdlog::info("tokenizer '{}' came with its vocabulary ({} ids); not training", kind, tokenizer.vocab_size());
    tokenizer.save(tokenizer_file.string());
  } else {
    if (!tokenizer.can_train())
      throw Error(ErrorKind::kInvalidArgument, "tokenizer '" + kind + "' cannot be trained and no trained file exists at " +
                                                   tokenizer_file.string());
    spdlog::info("training tokenizer '{}' on {}", kind, (prepared / "train.txt").string());
    tokenizer.train(data::read_text_file(prepared / "train.txt"));
    tokenizer.save(tokenizer_file.string());
  }
  const uint64_t tokenizer_hash = data::fnv1a64(data::read_text_file(tokenizer_file));

  // Encodes a split unless its cache is current; returns (cache file, text bytes).
  auto encode_split = [&](const std::string& split) {
    const fs::path text_file = prepared / (split + ".txt");
    const fs::path cache_file = prepared / (split + "-" + tag + ".tokens");
    const std::string text = data::read_text_file(text_file);
    if (!cache_is_current(cache_file, tokenizer_hash, data::fnv1a64(text))) {
      spdlog::info("encoding {} into {}", text_file.string(), cache_file.string());
      data::encode_file_to_token_cache(tokenizer, kind, tokenizer_file, text_file, cache_file);
    }
    return std::make_pair(cache_file, static_cast<uint64_t>(text.size()));
  };
  const auto [train_cache, train_bytes] = encode_split("train");
  const auto [val_cache, val_bytes] = encode_split("val");
  TrainingData result{std::move(tokenizer),
                      kind,
                      tokenizer_file,
                      tokenizer_hash,
                      data::TokenSequence::of(data::TokenCache::open(train_cache)),
                      data::TokenSequence::of(data::TokenCache::open(val_cache)),
                      train_bytes,
                      val_bytes,
                      prepared};
  result.sampling = resolved_sampling(options);
  if (result.sampling == Sampling::kDocuments)
    throw Error(ErrorKind::kInvalidArgument,
                "data.sampling = \"documents\" needs document boundaries: a dataset prepared with "
                "`patchbay data prepare --source ...` (data.prepared); the single-corpus [data] form has none");
  return result;
}

}  // namespace patchbay::train
