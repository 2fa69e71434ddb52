// `patchbay config show` and `patchbay config check`: load a config with its includes and
// --set overrides, validate it against the host schema and the chosen components'
// schemas, and print it resolved (defaults filled in) or list every problem found.
#include <boost/program_options.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/component_lookup.hpp"
#include "common/error.hpp"
#include "config/config_loader.hpp"
#include "config/config_printer.hpp"
#include "train/config_preflight.hpp"
#include "train/train_config.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;

struct ConfigCommandLine {
  std::string file;
  std::vector<std::string> overrides;
  bool with_sources = false;
  bool raw = false;
  bool help = false;
};

ConfigCommandLine parse_config_command_line(const std::vector<std::string>& args, const std::string& name,
                                            const std::string& what, bool is_show) {
  ConfigCommandLine parsed;
  po::options_description options("Options");
  options.add_options()("help,h", po::bool_switch(&parsed.help), "this help")(
      "set", po::value(&parsed.overrides)->composing()->value_name("path=value"),
      "override a key: path=value, e.g. --set tokenizer.vocab_size=512 (repeatable; value is TOML, "
      "else a bare string)");
  if (is_show) {
    options.add_options()("sources", po::bool_switch(&parsed.with_sources),
                          "end each line with '# file:line' saying where the value came from")(
        "raw", po::bool_switch(&parsed.raw), "print the composed file without validating or adding defaults");
  }
  po::options_description hidden;
  hidden.add_options()("file", po::value(&parsed.file), "config file");
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(all).positional(positional).run(), values);
  po::notify(values);
  if (parsed.help) {
    std::cout << "Usage: patchbay config " << name << " FILE [--set path=value ...]"
              << (is_show ? " [--sources] [--raw]" : "") << "\n\n"
              << what << "\n\n"
              << options;
  } else if (parsed.file.empty()) {
    throw po::error("missing config FILE: patchbay config " + name + " FILE");
  }
  return parsed;
}

int run_config_show(const std::vector<std::string>& args, const GlobalOptions& global) {
  const ConfigCommandLine command_line = parse_config_command_line(
      args, "show",
      "Prints the resolved config as TOML: includes merged, --set applied, every default filled in\n"
      "(after validation), each component's options in its own table ([optimizer.adamw]); options\n"
      "tables of components not chosen are printed marked '# ignored'. Exit 3 with every problem\n"
      "listed when the config is invalid.",
      true);
  if (command_line.help) return kExitOk;
  if (command_line.raw) {
    const config::ResolvedConfig composed = config::load_config(command_line.file, command_line.overrides);
    std::cout << config::to_toml(composed, config::PrintOptions{command_line.with_sources});
    return kExitOk;
  }
  const ValidatedConfig validated = load_validated_config(command_line.file, command_line.overrides, global);
  std::cout << config::to_toml(validated.config, config::PrintOptions{command_line.with_sources, true});
  return kExitOk;
}

int run_config_check(const std::vector<std::string>& args, const GlobalOptions& global) {
  const ConfigCommandLine command_line = parse_config_command_line(
      args, "check",
      "Validates a config (includes and --set applied) against the host sections and the schemas\n"
      "of the components it names, then what `patchbay train` checks before its first\n"
      "step (n_heads dividing d_model, seq_len within the context, the optimizer plugin's own\n"
      "rules). Exit 0 when valid; exit 3 listing every problem otherwise.",
      false);
  if (command_line.help) return kExitOk;
  const ValidatedConfig validated =
      load_validated_config(command_line.file, command_line.overrides, global);
  // What `train` would refuse before its first step, checked here too (train/config_preflight.hpp);
  // without plugins only the schemas could be checked, and the warning above says so.
  if (validated.components.registry && validated.components.lookup) {
    config::ResolvedConfig training = validated.config;
    train::validate_training_config(training, validated.components.lookup);
    try {
      train::preflight_training_config(training, *validated.components.registry,
                                       validated.components.lookup);
    } catch (const Error& e) {
      std::cerr << "error: " << command_line.file << ": " << e.what() << "\n";
      return kExitConfig;
    }
  }
  std::cout << command_line.file << ": valid\n";
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"config show", "Print the resolved config (includes, --set, defaults) as TOML",
                           run_config_show});
PATCHBAY_REGISTER_COMMAND({"config check", "Validate a config; list every problem with file:line",
                           run_config_check});

}  // namespace patchbay::cli
