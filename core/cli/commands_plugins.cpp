// `patchbay plugins list` and `patchbay plugins describe NAME`: what the plugin search path
// holds, which files were refused and why, and each component's version, ABI and config
// schema. Built on the runtime registry (core/runtime/registry.hpp).
#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/command.hpp"
#include "config/closest_names.hpp"
#include "patchbay/attention.h"
#include "patchbay/feedforward.h"
#include "patchbay/optimizer.h"
#include "patchbay/parallelism.h"
#include "patchbay/sampler.h"
#include "patchbay/tokenizer.h"
#include "runtime/registry.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;
namespace rt = patchbay::runtime;

// Prints rows as left-aligned columns separated by two spaces.
void print_table(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

// 1000000 rather than 1e+06 for whole numbers; shortest round-trip form otherwise.
std::string number_text(double v) {
  if (std::floor(v) == v && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  std::ostringstream out;
  out << std::setprecision(17) << v;
  std::ostringstream shorter;
  shorter << v;
  return std::stod(shorter.str()) == v ? shorter.str() : out.str();
}

std::string dotted(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// Options shared by both commands; returns false when --help was answered.
bool parse(const std::vector<std::string>& args, po::options_description& options,
           const po::positional_options_description& positional, const std::string& usage,
           const std::string& what) {
  bool help = false;
  options.add_options()("help,h", po::bool_switch(&help), "this help");
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), values);
  po::notify(values);
  if (help) {
    std::cout << "Usage: " << usage << "\n\n" << what << "\n\n" << options;
    return false;
  }
  return true;
}

std::vector<std::filesystem::path> search_path(const GlobalOptions& global) {
  rt::SearchPathOptions options;
  options.cli_paths = global.plugin_paths;
  return rt::plugin_search_path(options);
}

const char* kSearchOrder =
    "Search order: --plugin-path entries, PATCHBAY_PLUGIN_PATH (colon-separated), the build's\n"
    "plugin folder, <prefix>/lib/patchbay/plugins. The first file providing a plugin wins.";

int run_plugins_list(const std::vector<std::string>& args, const GlobalOptions& global) {
  // By default no plugin code runs (metadata only), so a plugin that would crash on load is
  // still listed; --check loads each one and runs every validation.
  bool check = false;
  po::options_description options("Options");
  options.add_options()("check", po::bool_switch(&check),
                        "also load every plugin and validate its descriptor (runs plugin code)");
  if (!parse(args, options, {}, "patchbay plugins list [--check]",
             std::string("Lists the plugins on the search path and their components from each "
                         "file's metadata\n"
                         "section (no plugin code runs), and the files that were "
                         "refused with the reason.\n") +
                 kSearchOrder)) {
    return kExitOk;
  }
  rt::Registry registry;
  const auto path = search_path(global);
  registry.scan(path, check ? rt::LoadMode::kLoad : rt::LoadMode::kMetadataOnly);

  std::vector<std::vector<std::string>> rows = {
      {"PLUGIN", "VERSION", "KIND", "COMPONENT", "COMPONENT VERSION", "ABI", "FILE"}};
  for (const auto& plugin : registry.plugins()) {
    for (const rt::ComponentEntry& c : plugin->components) {
      rows.push_back({plugin->metadata.name, plugin->metadata.version, rt::kind_name(c.kind),
                      c.name, c.version,
                      dotted(plugin->metadata.abi_major, plugin->metadata.abi_minor),
                      plugin->file.string()});
    }
  }
  if (rows.size() == 1) {
    std::cout << "No plugins found.\n";
  } else {
    print_table(std::cout, rows);
  }
  std::cout << "\nSearch path:";
  if (path.empty()) std::cout << " (empty)";
  std::cout << "\n";
  for (const auto& p : path) std::cout << "  " << p.string() << "\n";
  if (registry.refused().empty()) {
    std::cout << "\nRefused files: none\n";
  } else {
    std::cout << "\nRefused files (" << registry.refused().size() << "):\n";
  }
  for (const rt::RefusedPlugin& r : registry.refused()) std::cout << "  " << r.reason << "\n";
  if (!check) {
    std::cout << "\n(read from metadata only; `patchbay plugins list --check` loads and validates "
                 "every plugin)\n";
  }
  return kExitOk;
}

// "causal, rotary" from the bits set in `bits`, named by `names` (bit, name) in order; bits
// without a name are shown in hex so nothing a plugin declares is hidden.
std::string capability_names(uint64_t bits,
                             std::initializer_list<std::pair<uint64_t, const char*>> names) {
  std::string out;
  for (const auto& [bit, name] : names) {
    if ((bits & bit) == 0) continue;
    out += (out.empty() ? "" : ", ") + std::string(name);
    bits &= ~bit;
  }
  if (bits != 0) {
    std::ostringstream hex;
    hex << "0x" << std::hex << bits;
    out += (out.empty() ? "" : ", ") + std::string("unknown bits ") + hex.str();
  }
  return out.empty() ? "(none)" : out;
}

// What the component's vtable declares for people: capabilities, and per kind the cache
// kind and complexity (attention), the strategy (parallelism), sharding (optimizer).
void describe_declarations(std::ostream& out, const pb_component_descriptor& d) {
  if (d.vtable == nullptr) return;
  switch (d.kind) {
    case PB_KIND_TOKENIZER: {
      const auto* v = static_cast<const pb_tokenizer_vtable*>(d.vtable);
      out << "  capabilities: "
          << capability_names(v->capabilities, {{PB_TOKENIZER_CAP_TRAIN, "train"},
                                                {PB_TOKENIZER_CAP_BYTE_LEVEL, "byte-level"}})
          << "\n";
      break;
    }
    case PB_KIND_ATTENTION: {
      const auto* v = static_cast<const pb_attention_vtable*>(d.vtable);
      out << "  capabilities: "
          << capability_names(
                 v->capabilities,
                 {{PB_ATTENTION_CAP_CAUSAL, "causal"},
                  {PB_ATTENTION_CAP_NONCAUSAL, "non-causal"},
                  {PB_ATTENTION_CAP_ROTARY, "rotary"},
                  {PB_ATTENTION_CAP_ALIBI, "alibi"},
                  {PB_ATTENTION_CAP_TENSOR_PARALLEL, "tensor-parallel"},
                  {PB_ATTENTION_CAP_CROSS, "cross-attention"},
                  {PB_ATTENTION_CAP_CROSS_POSITIONAL, "cross-attention keys by position"},
                  {PB_ATTENTION_CAP_PACKED, "packed sequences"}})
          << "\n";
      const char* cache =
          v->cache_kind == PB_ATTENTION_CACHE_NONE ? "none (no incremental decoding)"
          : v->cache_kind == PB_ATTENTION_CACHE_KV ? "kv (keys and values, grows with length)"
          : v->cache_kind == PB_ATTENTION_CACHE_RECURRENT ? "recurrent (fixed-size state)"
                                                          : "unknown";
      out << "  cache:        " << cache << "\n"
          << "  complexity:   " << (v->complexity != nullptr ? v->complexity : "(not declared)")
          << "\n";
      break;
    }
    case PB_KIND_FEEDFORWARD: {
      const auto* v = static_cast<const pb_feedforward_vtable*>(d.vtable);
      out << "  capabilities: "
          << capability_names(v->capabilities,
                              {{PB_FEEDFORWARD_CAP_CAUSAL, "causal (position-wise)"},
                               {PB_FEEDFORWARD_CAP_TENSOR_PARALLEL, "tensor-parallel"}})
          << "\n";
      break;
    }
    case PB_KIND_SAMPLER: {
      const auto* v = static_cast<const pb_sampler_vtable*>(d.vtable);
      out << "  capabilities: "
          << capability_names(v->capabilities,
                              {{PB_SAMPLER_CAP_PROCESSOR, "processor"},
                               {PB_SAMPLER_CAP_SELECTOR, "selector"},
                               {PB_SAMPLER_CAP_STATEFUL, "stateful"},
                               {PB_SAMPLER_CAP_NEEDS_VOCABULARY, "needs the vocabulary (1.1)"}})
          << "\n";
      break;
    }
    case PB_KIND_OPTIMIZER: {
      const auto* v = static_cast<const pb_optimizer_vtable*>(d.vtable);
      out << "  sharding:     "
          << (v->set_shard != nullptr ? "yes (set_shard: ZeRO-1 state sharding)" : "no") << "\n";
      const bool scaled =
          PB_HAS_FIELD(v, pb_optimizer_vtable, step_scaled) && v->step_scaled != nullptr;
      out << "  clipping:     "
          << (scaled ? "folded into the update (step_scaled, 1.1)"
                     : "host scales the gradients first")
          << "\n";
      const bool copies =
          PB_HAS_FIELD(v, pb_optimizer_vtable, set_bf16_copy) && v->set_bf16_copy != nullptr;
      out << "  bf16 weights: "
          << (copies ? "written by the update pass (set_bf16_copy, 1.2)"
                     : "host rounds the weights under bf16 precision")
          << "\n";
      break;
    }
    case PB_KIND_PARALLELISM: {
      const auto* v = static_cast<const pb_parallelism_vtable*>(d.vtable);
      const char* names[] = {"single", "data", "zero1", "tensor"};
      const int s = static_cast<int>(v->strategy);
      out << "  strategy:     " << (s >= 0 && s < 4 ? names[s] : "unknown") << "\n";
      break;
    }
  }
}

void describe_component(std::ostream& out, const rt::PluginEntry& plugin,
                        const rt::ComponentEntry& c) {
  out << rt::kind_name(c.kind) << " '" << c.name << "' " << c.version << "\n"
      << "  summary:   " << c.summary << "\n"
      << "  plugin:    " << plugin.metadata.name << " " << plugin.metadata.version << "\n"
      << "  file:      " << plugin.file.string() << "\n"
      << "  ABI:       " << dotted(plugin.metadata.abi_major, plugin.metadata.abi_minor)
      << " (host " << dotted(PB_ABI_VERSION_MAJOR, PB_ABI_VERSION_MINOR) << "), "
      << rt::kind_name(c.kind) << " interface " << dotted(c.interface_major, c.interface_minor)
      << "\n"
      << "  min host:  " << plugin.metadata.min_host_major << "." << plugin.metadata.min_host_minor
      << "." << plugin.metadata.min_host_patch << "\n";
  const pb_component_descriptor* d = c.descriptor;
  if (d != nullptr) describe_declarations(out, *d);
  if (d == nullptr || d->config_field_count == 0) {
    out << "  config:    (no keys)\n";
    return;
  }
  out << "  config:\n";
  std::vector<std::vector<std::string>> rows = {
      {"    KEY", "TYPE", "DEFAULT", "RANGE / CHOICES", "DOC"}};
  for (size_t i = 0; i < d->config_field_count; ++i) {
    const pb_config_field& f = *PB_ARRAY_AT(pb_config_field, d->config_fields, i);
    std::string limits;
    if (f.has_range != 0) {
      limits = "[" + number_text(f.min_value) + ", " + number_text(f.max_value) + "]";
    } else if (f.choices != nullptr) {
      limits = f.choices;
    }
    const char* type = "?";
    switch (f.type) {
      case PB_TYPE_BOOL:
        type = "bool";
        break;
      case PB_TYPE_INT:
        type = "int";
        break;
      case PB_TYPE_FLOAT:
        type = "float";
        break;
      case PB_TYPE_STRING:
        type = "string";
        break;
      case PB_TYPE_STRING_ARRAY:
        type = "string[]";
        break;
    }
    rows.push_back({std::string("    ") + f.key, type,
                    f.required != 0 ? "(required)" : (f.default_value ? f.default_value : ""),
                    limits, f.doc != nullptr ? f.doc : ""});
  }
  print_table(out, rows);
}

int run_plugins_describe(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string name, kind;
  po::options_description options("Options");
  options.add_options()("kind", po::value(&kind),
                        "component kind when several kinds share NAME (tokenizer, attention, ...)");
  po::options_description hidden;
  hidden.add_options()("name", po::value(&name), "component, plugin or file");
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("name", 1);
  if (!parse(args, all, positional, "patchbay plugins describe NAME [--kind KIND]",
             std::string("Describes a component (kind, version, file, ABI and interface version, "
                         "summary, declared capabilities, cache kind and complexity, config schema "
                         "with type, default, range or choices, doc). NAME is a component name, a "
                         "plugin name (all its components) or a plugin file.\n") +
                 kSearchOrder)) {
    return kExitOk;
  }
  if (name.empty()) throw po::error("missing NAME: patchbay plugins describe NAME");
  int wanted_kind = 0;
  if (!kind.empty() && (wanted_kind = rt::kind_from_name(kind)) == 0) {
    throw po::error("unknown --kind '" + kind +
                    "'; kinds: tokenizer, attention, feedforward, optimizer, parallelism, sampler");
  }

  rt::Registry registry;
  std::error_code ec;
  const bool is_file = std::filesystem::is_regular_file(name, ec);
  if (is_file) {
    registry.scan_file(std::filesystem::weakly_canonical(name));
    if (!registry.refused().empty()) {
      throw Error(ErrorKind::kPluginRefused, registry.refused()[0].reason);
    }
  } else {
    registry.scan(search_path(global), rt::LoadMode::kMetadataOnly);
  }

  // What to describe: every component of the file, or those named NAME (component or plugin).
  std::vector<std::pair<pb_component_kind, std::string>> targets;
  std::vector<std::string> available;
  for (const auto& plugin : registry.plugins()) {
    for (const rt::ComponentEntry& c : plugin->components) {
      const bool kind_ok = wanted_kind == 0 || c.kind == wanted_kind;
      available.push_back(rt::kind_name(c.kind) + " " + c.name);
      if (kind_ok && (is_file || c.name == name || plugin->metadata.name == name)) {
        targets.emplace_back(c.kind, c.name);
      }
    }
  }
  if (targets.empty()) {
    std::sort(available.begin(), available.end());
    std::vector<std::string> names;
    for (const auto& plugin : registry.plugins()) {
      names.push_back(plugin->metadata.name);
      for (const rt::ComponentEntry& c : plugin->components) names.push_back(c.name);
    }
    const auto close = config::closest_names(name, names);
    const std::string hint =
        close.empty() ? std::string() : " Did you mean " + config::quote_alternatives(close) + "?";
    throw Error(ErrorKind::kComponentNotFound,
                "no component or plugin named '" + name + "'." + hint + " Available components: " +
                    (available.empty() ? std::string("none") : config::join_names(available)) +
                    ". `patchbay plugins list` shows the search path and refused files.");
  }
  // Loading happens here (the schema lives in the library); a refusal throws with its reason.
  bool first = true;
  for (const auto& [target_kind, target_name] : targets) {
    const rt::ComponentEntry& component = registry.find(target_kind, target_name);
    if (!first) std::cout << "\n";
    first = false;
    describe_component(std::cout, registry.plugin_of(component), component);
  }
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"plugins list",
                           "List plugins on the search path and the files refused, with reasons",
                           run_plugins_list});
PATCHBAY_REGISTER_COMMAND(
    {"plugins describe",
     "Describe a component: version, file, ABI, capabilities, cache, complexity, config schema",
     run_plugins_describe});

}  // namespace patchbay::cli
