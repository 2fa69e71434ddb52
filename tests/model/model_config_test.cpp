// The [model], [model.attention] and [model.feedforward] sections: validation through the
// host's schema mechanism (with the plugins' schemas from the registry), translation into
// ModelOptions / ComponentTables, and a model built from a config file's text.
#include <algorithm>
#include <span>
#include <string>

#include "config/config_loader.hpp"
#include "config/config_validator.hpp"
#include "config/host_schema.hpp"
#include "model_fixture.hpp"

namespace cfg = patchbay::config;
namespace pm = patchbay::model;

namespace {

cfg::SchemaRegistry schema_with_model() {
  cfg::SchemaRegistry schema = cfg::make_host_schema();
  pm::declare_model_sections(schema);
  return schema;
}

cfg::ComponentSchemaLookup registry_lookup() {
  return [](pb_component_kind kind, std::string_view name) {
    cfg::ComponentLookupResult found;
    try {
      const auto& entry = model_test::registry().find(kind, name);
      found.schema = cfg::ComponentSchema{
          entry.name, "",
          std::span<const pb_config_field>(entry.descriptor->config_fields,
                                           entry.descriptor->config_field_count)};
    } catch (const patchbay::Error&) {
      found.available = {"dense", "mlp"};
    }
    return found;
  };
}

std::string all_issues(const std::vector<cfg::ConfigIssue>& issues) {
  std::string text;
  for (const cfg::ConfigIssue& issue : issues) text += issue.to_string() + "\n";
  return text;
}

}  // namespace

TEST_CASE("a [model] config gives the options it says, defaults for the rest") {
  const cfg::ResolvedConfig config = cfg::load_config_text(R"(
[model]
n_layers = 3
d_model = 32
n_heads = 4
norm = "rmsnorm"
norm_position = "post"
positional = "rotary"
tie_embeddings = false
[model.attention]
pattern = ["dense", "dense"]
dropout = 0.1
[model.feedforward]
kind = "mlp"
activation = "relu"
)",
                                                           "model.toml");
  const cfg::SchemaRegistry schema = schema_with_model();
  const std::vector<cfg::ConfigIssue> issues =
      cfg::validate_config(config, schema, registry_lookup());
  INFO(all_issues(issues));
  CHECK(issues.empty());
  const pm::ModelOptions o = pm::model_options_from_config(config, 11);
  CHECK(o.vocab_size == 11);
  CHECK(o.n_layers == 3);
  CHECK(o.d_model == 32);
  CHECK(o.d_ff == 128);  // d_ff = 0 -> 4 * d_model
  CHECK(o.context_length == 256);
  CHECK(o.norm == pm::NormKind::kRmsNorm);
  CHECK_FALSE(o.pre_norm);
  CHECK(o.positional == pm::PositionalKind::kRotary);
  CHECK_FALSE(o.tie_embeddings);
  CHECK(o.attention_kinds == std::vector<std::string>{"dense", "dense"});
  CHECK(o.feedforward_kinds == std::vector<std::string>{"mlp"});
  const pm::ComponentTables tables = pm::component_tables_from_config(config);
  CHECK(tables.feedforward["activation"].value<std::string>() == "relu");

  pm::ModelOptions small = o;
  small.context_length = 8;
  auto model = pm::LanguageModel::build(small, tables, model_test::registry());
  CHECK(model->parameter_count() > 0);
}

TEST_CASE("the validator reports unknown model keys, bad choices and unknown plugin keys") {
  const cfg::ResolvedConfig config = cfg::load_config_text(R"(
[model]
n_layer = 3
norm = "batchnorm"
[model.attention]
kind = "dense"
windw = 4
)",
                                                           "bad.toml");
  const std::string text =
      all_issues(cfg::validate_config(config, schema_with_model(), registry_lookup()));
  CHECK(text.find("model.n_layer") != std::string::npos);
  CHECK(text.find("n_layers") != std::string::npos);  // the closest valid name
  CHECK(text.find("model.norm") != std::string::npos);
  CHECK(text.find("model.attention.windw") != std::string::npos);
}

TEST_CASE("n_heads must divide d_model") {
  const cfg::ResolvedConfig config =
      cfg::load_config_text("[model]\nd_model = 30\nn_heads = 4\n", "heads.toml");
  CHECK_THROWS_WITH_AS(pm::model_options_from_config(config, 11),
                       doctest::Contains("do not divide d_model = 30"), patchbay::Error);
}
