// Parsing a sweep file and expanding it into jobs; see sweep_spec.hpp for the format.
#include "sweep/sweep_spec.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "config/config_error.hpp"
#include "sweep/toml_value_text.hpp"

namespace patchbay::sweep {
namespace {

using config::ConfigError;
using config::ConfigIssue;

int64_t line_of(const toml::node& node) { return static_cast<int64_t>(node.source().begin.line); }

[[noreturn]] void fail(const std::string& file, const toml::node* node, const std::string& key,
                       const std::string& problem, const std::string& expected,
                       const std::string& found, const std::string& fix) {
  ConfigIssue issue;
  issue.where = {file, node != nullptr ? line_of(*node) : 0};
  issue.key_path = key;
  issue.problem = problem;
  issue.expected = expected;
  issue.found = found;
  issue.fix = fix;
  throw ConfigError({issue});
}

std::string type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    default:
      return "a date/time";
  }
}

std::vector<SweepSpec::Axis> read_axes(const std::string& file, const toml::table& table,
                                       const std::string& section) {
  // TOML++ iterates keys sorted; axes keep the order they are written in (line, column).
  std::vector<std::pair<toml::source_position, std::string>> order;
  for (const auto& [key, node] : table)
    order.push_back({node.source().begin, std::string(key.str())});
  std::sort(order.begin(), order.end(), [](const auto& l, const auto& r) {
    return l.first.line != r.first.line ? l.first.line < r.first.line
                                        : l.first.column < r.first.column;
  });
  std::vector<SweepSpec::Axis> axes;
  for (const auto& [position, key_text] : order) {
    const toml::key& key = table.find(key_text)->first;
    const toml::node& node = table.find(key_text)->second;
    const std::string where = section + "." + std::string(key.str());
    const toml::array* values = node.as_array();
    if (values == nullptr || values->empty())
      fail(file, &node, where, "an axis needs a non-empty list of values", "[value, value, ...]",
           values == nullptr ? type_name(node) : "an empty list",
           "write the key path as the axis name and its values as a list: \"train.lr\" = [1e-3, "
           "3e-3]");
    SweepSpec::Axis axis{std::string(key.str()), {}};
    for (const toml::node& value : *values) axis.values.push_back(toml_value_text(value));
    axes.push_back(std::move(axis));
  }
  return axes;
}

std::vector<SweepSpec::Axis> read_zip(const std::string& file, const toml::table& table,
                                      const std::string& section) {
  std::vector<SweepSpec::Axis> axes = read_axes(file, table, section);
  for (const SweepSpec::Axis& axis : axes) {
    if (axis.values.size() != axes.front().values.size())
      fail(file, table.get(axis.path), section + "." + axis.path,
           "zipped lists must have the same length",
           std::to_string(axes.front().values.size()) + " values (as " + axes.front().path + ")",
           std::to_string(axis.values.size()) + " values",
           "give every list in one [zip] group the same length, or use [grid] for a product");
  }
  return axes;
}

}  // namespace

std::string JobSpec::label() const {
  if (overrides.empty()) return "baseline";
  std::string text;
  for (const Override& o : overrides) text += (text.empty() ? "" : ", ") + o.text();
  return text;
}

SweepSpec parse_sweep_spec(const std::string& text, const std::string& source_name,
                           const std::filesystem::path& base_dir) {
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    ConfigIssue issue;
    issue.where = {source_name, static_cast<int64_t>(e.source().begin.line)};
    issue.problem = "TOML syntax error: " + std::string(e.description());
    issue.fix = "fix the syntax of the sweep file";
    throw ConfigError({issue});
  }
  SweepSpec spec;
  spec.file = source_name;
  static const std::set<std::string> known = {"base",     "name", "output_dir", "set", "seeds",
                                              "seed_key", "grid", "zip",        "ofat"};
  for (const auto& [key, node] : root) {
    if (known.count(std::string(key.str())) == 0)
      fail(source_name, &node, std::string(key.str()), "unknown key in a sweep file",
           "one of base, name, output_dir, set, seeds, seed_key, [grid], [zip], [ofat]",
           std::string(key.str()),
           "axes go under [grid], [zip] or [ofat]; see configs/sweeps/ for examples");
  }
  auto string_key = [&](const char* key, bool required) -> std::string {
    const toml::node* node = root.get(key);
    if (node == nullptr) {
      if (required)
        fail(source_name, nullptr, key, "missing key", "a string", "nothing",
             std::string("add ") + key + " = \"...\" at the top of the sweep file");
      return "";
    }
    if (!node->is_string())
      fail(source_name, node, key, "wrong type", "a string", type_name(*node), "quote the value");
    return node->as_string()->get();
  };
  spec.base_config = base_dir / string_key("base", true);
  spec.name = string_key("name", false);
  if (spec.name.empty()) spec.name = std::filesystem::path(source_name).stem().string();
  if (const std::string out = string_key("output_dir", false); !out.empty()) spec.output_dir = out;
  if (const std::string key = string_key("seed_key", false); !key.empty()) spec.seed_key = key;
  if (const toml::node* node = root.get("set")) {
    const toml::array* list = node->as_array();
    if (list == nullptr)
      fail(source_name, node, "set", "wrong type", "a list of \"path=value\" strings",
           type_name(*node), "write set = [\"train.max_steps=200\"]");
    for (const toml::node& item : *list) {
      if (!item.is_string() || item.as_string()->get().find('=') == std::string::npos)
        fail(source_name, &item, "set", "bad override", "\"path=value\"", toml_value_text(item),
             "write each fixed override as --set takes it: \"train.max_steps=200\"");
      spec.fixed_overrides.push_back(item.as_string()->get());
    }
  }
  if (const toml::node* node = root.get("seeds")) {
    const toml::array* list = node->as_array();
    if (list == nullptr || list->empty())
      fail(source_name, node, "seeds", "wrong type", "a non-empty list of integers",
           type_name(*node), "write seeds = [0, 1, 2]");
    for (const toml::node& item : *list) {
      if (!item.is_integer())
        fail(source_name, &item, "seeds", "wrong type", "integers", type_name(item),
             "write seeds = [0, 1, 2]");
      spec.seeds.push_back(item.as_integer()->get());
    }
  }
  auto section = [&](const char* key) -> const toml::table* {
    const toml::node* node = root.get(key);
    if (node == nullptr) return nullptr;
    if (!node->is_table())
      fail(source_name, node, key, "wrong type", "a table of axes", type_name(*node),
           std::string("write [") + key + "] then one \"key.path\" = [values] line per axis");
    return node->as_table();
  };
  if (const toml::table* grid = section("grid")) spec.grid = read_axes(source_name, *grid, "grid");
  if (const toml::table* ofat = section("ofat")) spec.ofat = read_axes(source_name, *ofat, "ofat");
  if (const toml::node* zip = root.get("zip")) {
    if (const toml::table* table = zip->as_table()) {
      spec.zips.push_back(read_zip(source_name, *table, "zip"));
    } else if (const toml::array* groups = zip->as_array();
               groups != nullptr && groups->is_array_of_tables()) {
      for (const toml::node& group : *groups)
        spec.zips.push_back(read_zip(source_name, *group.as_table(), "zip"));
    } else {
      fail(source_name, zip, "zip", "wrong type", "[zip] or [[zip]] tables", type_name(*zip),
           "write [zip] then lists of equal length");
    }
  }
  return spec;
}

SweepSpec load_sweep_spec(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) {
    ConfigIssue issue;
    issue.where = {file.string(), 0};
    issue.problem = "cannot read the sweep file";
    issue.fix = "check the path (sweep files live under configs/sweeps/)";
    throw ConfigError({issue});
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_sweep_spec(text.str(), file.string(), file.parent_path());
}

std::vector<JobSpec> expand_jobs(const SweepSpec& spec) {
  // Each factor is a list of alternatives; an alternative is a list of overrides.
  using Alternative = std::vector<Override>;
  std::vector<std::vector<Alternative>> factors;
  for (const SweepSpec::Axis& axis : spec.grid) {
    std::vector<Alternative> alternatives;
    for (const std::string& value : axis.values) alternatives.push_back({{axis.path, value}});
    factors.push_back(std::move(alternatives));
  }
  for (const std::vector<SweepSpec::Axis>& zip : spec.zips) {
    std::vector<Alternative> alternatives(zip.front().values.size());
    for (const SweepSpec::Axis& axis : zip)
      for (size_t i = 0; i < axis.values.size(); ++i)
        alternatives[i].push_back({axis.path, axis.values[i]});
    factors.push_back(std::move(alternatives));
  }
  if (!spec.ofat.empty()) {
    Alternative baseline;
    for (const SweepSpec::Axis& axis : spec.ofat)
      baseline.push_back({axis.path, axis.values.front()});
    std::vector<Alternative> alternatives{baseline};
    for (size_t a = 0; a < spec.ofat.size(); ++a)
      for (size_t v = 1; v < spec.ofat[a].values.size(); ++v) {
        Alternative changed = baseline;
        changed[a].value = spec.ofat[a].values[v];
        alternatives.push_back(std::move(changed));
      }
    factors.push_back(std::move(alternatives));
  }
  // Odometer over the factors, last factor fastest.
  std::vector<Alternative> configurations;
  std::vector<size_t> digit(factors.size(), 0);
  while (true) {
    Alternative combined;
    for (size_t f = 0; f < factors.size(); ++f)
      combined.insert(combined.end(), factors[f][digit[f]].begin(), factors[f][digit[f]].end());
    configurations.push_back(std::move(combined));
    size_t f = factors.size();
    while (f > 0) {
      --f;
      if (++digit[f] < factors[f].size()) break;
      digit[f] = 0;
      if (f == 0) {
        f = factors.size() + 1;
        break;
      }
    }
    if (factors.empty() || f == factors.size() + 1) break;
  }
  std::vector<JobSpec> jobs;
  const std::vector<int64_t> seeds = spec.seeds.empty() ? std::vector<int64_t>{0} : spec.seeds;
  for (const Alternative& configuration : configurations) {
    for (int64_t seed : seeds) {
      JobSpec job;
      job.index = jobs.size();
      job.overrides = configuration;
      job.has_seed = !spec.seeds.empty();
      job.seed = seed;
      job.all_overrides = spec.fixed_overrides;
      for (const Override& o : configuration) job.all_overrides.push_back(o.text());
      if (job.has_seed) job.all_overrides.push_back(spec.seed_key + "=" + std::to_string(seed));
      jobs.push_back(std::move(job));
    }
  }
  return jobs;
}

}  // namespace patchbay::sweep
