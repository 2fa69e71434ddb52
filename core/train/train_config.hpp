// The training configuration: the [train] and [data] keys as typed options (read once, then
// passed down: the loop, the objective and the data reader take these structures, not the
// config), and the one way a
// training-related command (train, eval, bench train, tests) turns a loaded config into a
// validated one — host sections plus the model's sections, component keys checked against
// the plugins the registry found, defaults filled in.
//
// Defaults that make a minimal config work: a config without [optimizer] gets
// `kind = "adamw"`, and empty [train] / [eval] tables are added so apply_defaults writes
// every key into the resolved config (what the run directory and checkpoints store).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "config/config_document.hpp"
#include "config/schema_registry.hpp"
#include "train/lr_scale.hpp"
#include "train/lr_schedule.hpp"

namespace patchbay::runtime {
class Registry;
}

namespace patchbay::train {

// [train.lora] (train/lora.hpp): LoRA adapters on the model's weight matrices.
struct LoraOptions {
  bool enabled = false;  // the config has a [train.lora] table
  int64_t rank = 8;
  double alpha = 16.0;   // adapters are scaled by alpha / rank
  double dropout = 0.0;  // on the adapter input (PEFT lora_dropout), training only
  std::vector<std::string> targets = {"attention.q", "attention.v"};
};

struct TrainOptions {
  int64_t batch_size = 8;
  int64_t seq_len = 128;
  int64_t grad_accum_steps = 1;
  int64_t max_steps = 1000;
  LrSchedule schedule;  // kind, lr, min_lr, warmup_steps, max_steps
  double grad_clip = 1.0;  // 0: off
  int64_t eval_every = 200;
  int64_t eval_batches = 20;
  int64_t checkpoint_every = 500;
  int64_t keep_checkpoints = 0;  // the newest N step checkpoints kept (0: all)
  int64_t log_every = 10;
  int64_t sample_every = 0;
  int64_t sample_tokens = 200;
  std::string sample_prompt;
  double sample_temperature = 0.8;
  std::filesystem::path run_dir;  // train.out_dir, or <run.output_dir>/<run.name>
  uint64_t seed = 0;              // [run] seed: batches and everything random in the run
  std::string run_name;
  std::string precision = "f32";  // [train] precision: "f32" or "bf16" (matmul autocast, see train_step)
  std::string objective = "clm";  // [train] objective: a name in objective.cpp's table
  // Some layer has dropout > 0 (model.dropout or a [model.attention] / [model.feedforward]
  // table's dropout): a resume then replays earlier forwards to advance its generators.
  bool dropout = false;
  // Fine-tuning (train/fine_tuning.hpp, train/lora.hpp; docs/finetuning.md).
  std::filesystem::path init_from;  // [train] init_from: weights to start from ("": none)
  std::vector<std::string> freeze;  // [train] freeze: name patterns of frozen parameters
  LoraOptions lora;                 // [train.lora]
  std::vector<LrScale> lr_scales;   // [train] lr_scale: per-parameter lr factors (lr_scale.hpp)
};

// [train] init_from, freeze, lr_scale and [train.lora] of a validated config (absent keys: none; configs
// stored before these keys existed have none).
void read_fine_tuning_options(const config::ResolvedConfig& config, TrainOptions& options);

// One [[data.sources]] table: a prepared dataset in a mixture (mixture_sampler.hpp).
struct MixtureSourceOptions {
  std::string name;                // default: the folder's name; unique
  std::filesystem::path prepared;  // a `patchbay data prepare --source` folder
  double weight = 1.0;             // > 0; shares are weight / sum of weights
  double epochs = 0;               // > 0: epochs per pass instead of a weight (all sources or none)
};

// [data]: the corpus and its split (training_data.hpp prepares them).
struct DataOptions {
  std::string corpus = "kjv";          // "kjv" or a path
  double validation_fraction = 0.1;    // share of documents held out
  uint64_t split_seed = 1234;          // [data] seed of the document-hash split
  std::filesystem::path output_dir;    // the prepared folder
  std::filesystem::path prepared;      // a `patchbay data prepare --source` folder ("": corpus)
  std::string sampling = "auto";       // auto | random | epochs | documents (window_sampler.hpp)
  bool pack_documents = false;         // segment ids per document in every window (packing.md)
  std::vector<MixtureSourceOptions> sources;  // [[data.sources]]: a mixture (empty: none)
};

// Host schema (make_host_schema) plus the model's sections.
config::SchemaRegistry make_training_schema();

// Component schemas from a registry's plugins (loads a plugin when one of its components is
// asked for). The registry must outlive the lookup.
config::ComponentSchemaLookup registry_schema_lookup(runtime::Registry& registry);

// Adds the defaults described above, validates (throws config::ConfigError listing every
// problem) and applies every schema default.
void validate_training_config(config::ResolvedConfig& config, const config::ComponentSchemaLookup& lookup);

// The learning-rate schedule of a validated config ([train] schedule, lr, min_lr, warmup_steps,
// max_steps, decay_steps / decay_fraction, decay_shape); not validated (validate() does that).
LrSchedule lr_schedule_from_config(const config::ResolvedConfig& config);

// Typed [train] options of a validated config. Throws Error(kInvalidArgument) naming the key
// for rules the schema cannot state (min_lr > lr, warmup_steps > max_steps).
TrainOptions train_options_from_config(const config::ResolvedConfig& config);

// [[data.sources]]: validated by the schema and by validate_with_defaults (data_sources_config.hpp).

// Typed [data] options of a validated config.
DataOptions data_options_from_config(const config::ResolvedConfig& config);

// Whether any layer of the config's model has dropout (TrainOptions::dropout).
bool config_has_dropout(const config::ResolvedConfig& config);

// Readers for validated configs ("train.batch_size"); throw Error(kInvalidArgument) naming the
// key when it is missing or has another type.
int64_t config_int(const config::ResolvedConfig& config, const std::string& key_path);
double config_real(const config::ResolvedConfig& config, const std::string& key_path);
std::string config_string(const config::ResolvedConfig& config, const std::string& key_path);

}  // namespace patchbay::train
