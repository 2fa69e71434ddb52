// [train] options and training-config validation; see train_config.hpp.
#include "train/train_config.hpp"

#include <cmath>
#include <optional>
#include <set>

#include "common/error.hpp"
#include "config/config_validator.hpp"
#include "config/host_schema.hpp"
#include "model/language_model.hpp"
#include "parallel/parallel_config.hpp"
#include "runtime/registry.hpp"
#include "train/data_sources_config.hpp"
#include "train/lora.hpp"
#include "train/objective.hpp"

namespace patchbay::train {

config::SchemaRegistry make_training_schema() {
  config::SchemaRegistry schema = config::make_host_schema();
  model::declare_model_sections(schema);
  parallel::declare_parallelism_section(schema);  // [parallelism], optional (core/parallel)
  declare_lora_section(schema);                   // [train.lora], optional (train/lora.hpp)
  for (const ObjectiveEntry& objective : objective_entries())  // [train.mlm], ... (objective.hpp)
    if (objective.declare_options) objective.declare_options(schema);
  return schema;
}

config::ComponentSchemaLookup registry_schema_lookup(runtime::Registry& registry) {
  return [&registry](pb_component_kind kind, std::string_view name) {
    config::ComponentLookupResult found;
    for (const auto& plugin : registry.plugins()) {
      for (const runtime::ComponentEntry& component : plugin->components) {
        if (component.kind == kind) found.available.push_back(component.name);
        if (component.kind != kind || component.name != name) continue;
        const runtime::ComponentEntry& loaded = registry.find(kind, name);  // loads the plugin
        found.schema = config::ComponentSchema{
            loaded.name, registry.plugin_of(loaded).file.string(),
            std::span<const pb_config_field>(loaded.descriptor->config_fields, loaded.descriptor->config_field_count)};
        return found;
      }
    }
    return found;
  };
}

void validate_training_config(config::ResolvedConfig& config, const config::ComponentSchemaLookup& lookup) {
  toml::table& root = config.table();
  for (const char* section : {"train", "eval"}) {
    if (!root.contains(section)) root.insert(section, toml::table{});
  }
  if (!root.contains("optimizer")) root.insert("optimizer", toml::table{{"kind", "adamw"}});
  // The chosen objective (objective.hpp): its name known, its tables added before validation
  // (so their defaults are written), its own checks after (objective vs model.causal, rates).
  const ObjectiveEntry& objective = find_objective(objective_name(config));
  if (objective.add_defaults) objective.add_defaults(config);
  validate_with_defaults(config, make_training_schema(), lookup);
  if (objective.check) objective.check(config);
}

namespace {

const toml::node& node_at(const config::ResolvedConfig& config, const std::string& key_path) {
  const toml::node* node = config.find(key_path);
  if (node == nullptr)
    throw Error(ErrorKind::kInvalidArgument, "config key '" + key_path + "' is missing (validate the config first)");
  return *node;
}

}  // namespace

int64_t config_int(const config::ResolvedConfig& config, const std::string& key_path) {
  const auto value = node_at(config, key_path).value<int64_t>();
  if (!value) throw Error(ErrorKind::kInvalidArgument, "config key '" + key_path + "' must be an integer");
  return *value;
}

double config_real(const config::ResolvedConfig& config, const std::string& key_path) {
  const auto value = node_at(config, key_path).value<double>();  // integers convert
  if (!value) throw Error(ErrorKind::kInvalidArgument, "config key '" + key_path + "' must be a number");
  return *value;
}

std::string config_string(const config::ResolvedConfig& config, const std::string& key_path) {
  const auto value = node_at(config, key_path).value<std::string>();
  if (!value) throw Error(ErrorKind::kInvalidArgument, "config key '" + key_path + "' must be a string");
  return *value;
}

LrSchedule lr_schedule_from_config(const config::ResolvedConfig& config) {
  LrSchedule s;
  s.kind = lr_schedule_kind(config_string(config, "train.schedule"));
  s.lr = config_real(config, "train.lr");
  s.min_lr = config_real(config, "train.min_lr");
  s.warmup_steps = config_int(config, "train.warmup_steps");
  s.max_steps = config_int(config, "train.max_steps");
  s.decay_shape = decay_shape(config_string(config, "train.decay_shape"));
  const int64_t explicit_decay = config_int(config, "train.decay_steps");
  const double fraction = config_real(config, "train.decay_fraction");
  s.decay_steps = explicit_decay > 0
                      ? explicit_decay
                      : std::max<int64_t>(1, std::llround(fraction * static_cast<double>(s.max_steps - s.warmup_steps)));
  return s;
}

TrainOptions train_options_from_config(const config::ResolvedConfig& config) {
  TrainOptions o;
  o.batch_size = config_int(config, "train.batch_size");
  o.seq_len = config_int(config, "train.seq_len");
  o.grad_accum_steps = config_int(config, "train.grad_accum_steps");
  o.max_steps = config_int(config, "train.max_steps");
  o.schedule = lr_schedule_from_config(config);
  o.grad_clip = config_real(config, "train.grad_clip");
  o.precision = config_string(config, "train.precision");
  o.eval_every = config_int(config, "train.eval_every");
  o.eval_batches = config_int(config, "train.eval_batches");
  o.checkpoint_every = config_int(config, "train.checkpoint_every");
  o.keep_checkpoints = config_int(config, "train.keep_checkpoints");
  o.log_every = config_int(config, "train.log_every");
  o.sample_every = config_int(config, "train.sample_every");
  o.sample_tokens = config_int(config, "train.sample_tokens");
  o.sample_prompt = config_string(config, "train.sample_prompt");
  o.sample_temperature = config_real(config, "train.sample_temperature");
  o.seed = static_cast<uint64_t>(config_int(config, "run.seed"));
  o.run_name = config_string(config, "run.name");
  const std::string out_dir = config_string(config, "train.out_dir");
  o.run_dir = out_dir.empty() ? std::filesystem::path(config_string(config, "run.output_dir")) / o.run_name
                              : std::filesystem::path(out_dir);
  if (o.schedule.min_lr > o.schedule.lr)
    throw Error(ErrorKind::kInvalidArgument, "train.min_lr (" + std::to_string(o.schedule.min_lr) +
                                                 ") must not exceed train.lr (" + std::to_string(o.schedule.lr) + ")");
  if (o.schedule.warmup_steps > o.max_steps)
    throw Error(ErrorKind::kInvalidArgument, "train.warmup_steps (" + std::to_string(o.schedule.warmup_steps) +
                                                 ") must not exceed train.max_steps (" +
                                                 std::to_string(o.max_steps) + ")");
  validate(o.schedule);
  o.objective = objective_name(config);
  o.dropout = config_has_dropout(config);
  read_fine_tuning_options(config, o);
  return o;
}

void read_fine_tuning_options(const config::ResolvedConfig& config, TrainOptions& o) {
  if (const toml::node* init_from = config.find("train.init_from"))
    o.init_from = init_from->value<std::string>().value_or("");
  o.freeze.clear();
  if (const toml::node* freeze = config.find("train.freeze");
      freeze != nullptr && freeze->is_array())
    for (const toml::node& pattern : *freeze->as_array())
      o.freeze.push_back(pattern.value<std::string>().value_or(""));
  std::vector<std::string> lr_scale_entries;
  if (const toml::node* lr_scale = config.find("train.lr_scale");
      lr_scale != nullptr && lr_scale->is_array())
    for (const toml::node& entry : *lr_scale->as_array())
      lr_scale_entries.push_back(entry.value<std::string>().value_or(""));
  o.lr_scales = parse_lr_scales(lr_scale_entries);
  o.lora = lora_options_from_config(config);
  if (o.lora.enabled && o.init_from.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "[train.lora] trains adapters on top of a model's weights, but train.init_from is "
                "empty: set train.init_from to the run, checkpoint, Hugging Face directory or GGUF "
                "file to adapt");
  if (o.lora.enabled && !o.freeze.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "train.freeze is set together with [train.lora]: LoRA already freezes every base "
                "parameter (only the adapters train); remove train.freeze");
}

namespace {

std::string source_where(const config::ResolvedConfig& config) {
  const std::string location = config.locate("data.sources").to_string();
  return location.empty() ? "" : " (data.sources set at " + location + ")";
}

Error source_error(const config::ResolvedConfig& config, const std::string& message) {
  return Error(ErrorKind::kInvalidArgument, message + source_where(config));
}

toml::array* sources_of(config::ResolvedConfig& config) {
  toml::table* data = config.table()["data"].as_table();
  return data != nullptr ? (*data)["sources"].as_array() : nullptr;
}

// The rules across keys and entries, on the keys as written (the schema checked each entry's
// keys and types already).
void check_data_sources(const config::ResolvedConfig& config, const toml::array& sources) {
  const toml::node* prepared = config.find("data.prepared");
  if (prepared != nullptr && !prepared->value<std::string>().value_or("").empty())
    throw source_error(config, "data.prepared and data.sources are both set: a mixture lists every dataset in "
                                 "[[data.sources]]; remove data.prepared");
  const bool by_epochs = sources.get(0)->as_table()->contains("epochs");
  for (size_t i = 0; i < sources.size(); ++i) {
    const toml::table& entry = *sources.get(i)->as_table();
    const std::string at = "data.sources[" + std::to_string(i) + "]";
    const toml::node* weight = entry.get("weight");
    const toml::node* epochs = entry.get("epochs");
    if (weight != nullptr && epochs != nullptr)
      throw source_error(config, at + " gives both weight and epochs: give one (a weight shares the samples out, "
                                      "epochs say how often each source is read per pass)");
    if ((epochs != nullptr) != by_epochs)
      throw source_error(config, at + " and data.sources[0]: one gives epochs, the other a weight; give every "
                                      "source epochs (exact epochs per pass) or every source a weight");
    if (weight != nullptr) {
      const double w = weight->value<double>().value_or(0.0);
      if (!(w > 0) || !std::isfinite(w))
        throw source_error(config, at + ".weight is " + std::to_string(w) +
                                       ": a weight must be a positive number (leave a source out rather than "
                                       "weigh it 0)");
    }
    if (epochs != nullptr) {
      const double e = epochs->value<double>().value_or(0.0);
      if (!(e > 0) || !std::isfinite(e))
        throw source_error(config, at + ".epochs must be a positive number (epochs of this source per pass of "
                                        "the mixture; leave the source out rather than give 0)");
    }
  }
}

// After the defaults: names filled in and unique, the unused one of weight / epochs removed.
void finish_data_sources(const config::ResolvedConfig& config, toml::array& sources) {
  std::set<std::string> names;
  for (size_t i = 0; i < sources.size(); ++i) {
    toml::table& entry = *sources.get(i)->as_table();
    if (entry["name"].value<std::string>().value_or("").empty()) {
      std::filesystem::path folder(entry["prepared"].value<std::string>().value_or(""));
      while (!folder.empty() && folder.filename().empty()) folder = folder.parent_path();
      entry.insert_or_assign("name", folder.filename().string());
    }
    const std::string name = *entry["name"].value<std::string>();
    if (!names.insert(name).second)
      throw source_error(config, "data.sources[" + std::to_string(i) + "].name '" + name +
                                     "' is used twice: give each source its own name");
    entry.erase(entry["epochs"].value<double>().value_or(0.0) > 0 ? "weight" : "epochs");
  }
}

}  // namespace

void validate_with_defaults(config::ResolvedConfig& config, const config::SchemaRegistry& schema,
                            const config::ComponentSchemaLookup& lookup) {
  config::validate_config_or_throw(config, schema, lookup);
  if (const toml::array* sources = sources_of(config)) check_data_sources(config, *sources);
  config::apply_defaults(config, schema, lookup);
  if (toml::array* sources = sources_of(config)) finish_data_sources(config, *sources);
}

DataOptions data_options_from_config(const config::ResolvedConfig& config) {
  DataOptions d;
  d.corpus = config_string(config, "data.corpus");
  d.validation_fraction = config_real(config, "data.validation_fraction");
  d.split_seed = static_cast<uint64_t>(config_int(config, "data.seed"));
  d.output_dir = config_string(config, "data.output_dir");
  // Keys newer than some stored configs: absent means the single-corpus form, random order.
  if (const toml::node* prepared = config.find("data.prepared")) d.prepared = prepared->value<std::string>().value_or("");
  if (const toml::node* sampling = config.find("data.sampling"))
    d.sampling = sampling->value<std::string>().value_or("auto");
  if (const toml::node* pack = config.find("data.pack_documents"))
    d.pack_documents = pack->value<bool>().value_or(false);
  if (const toml::node* sources = config.find("data.sources"); sources != nullptr && sources->is_array())
    for (const toml::node& entry : *sources->as_array()) {
      const toml::table& t = *entry.as_table();
      d.sources.push_back({t["name"].value<std::string>().value_or(""), t["prepared"].value<std::string>().value_or(""),
                           t["weight"].value<double>().value_or(1.0), t["epochs"].value<double>().value_or(0.0)});
    }
  return d;
}

bool config_has_dropout(const config::ResolvedConfig& config) {
  const toml::node* model_dropout = config.find("model.dropout");
  if (model_dropout != nullptr && model_dropout->value<double>().value_or(0.0) > 0) return true;
  // A validated config keeps each used layer component's options in its per-kind table
  // ([model.attention.dense] dropout = 0.1; config/component_options.hpp); flat keys are
  // looked at too, for configs that did not go through validation.
  for (const char* section : {"model.attention", "model.feedforward"}) {
    const toml::node* node = config.find(section);
    if (node == nullptr || !node->is_table()) continue;
    if (node->as_table()->get("dropout") != nullptr &&
        node->as_table()->get("dropout")->value<double>().value_or(0.0) > 0)
      return true;
    for (const auto& [name, options] : *node->as_table()) {
      const toml::node* dropout = options.is_table() ? options.as_table()->get("dropout") : nullptr;
      if (dropout != nullptr && dropout->value<double>().value_or(0.0) > 0) return true;
    }
  }
  return false;
}

}  // namespace patchbay::train
