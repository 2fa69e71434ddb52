// `patchbay generate --regex / --grammar` end to end on a saved random-weights checkpoint:
// sampled and beam outputs match the constraint (std::regex as the oracle), and a bad GBNF
// file is refused with its line and column.
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "config/config_loader.hpp"
#include "data/split.hpp"
#include "model_fixture.hpp"
#include "patchbay/testing/temp_dir.hpp"
#include "train/checkpoint.hpp"

#include "../command_runner.hpp"

namespace fs = std::filesystem;
namespace pm = patchbay::model;
namespace rt = patchbay::runtime;

namespace {

using patchbay::testing::CommandResult;
using patchbay::testing::run_shell;

constexpr const char* kConfig = R"([tokenizer]
kind = "char"
[model]
context_length = 32
n_layers = 2
n_heads = 2
d_model = 16
init_std = 0.5
positional = "rotary"
seed = 3
)";

// A random-weights checkpoint with its tokenizer in `dir`/run.
void save_run(const fs::path& dir) {
  fs::create_directories(dir / "run");
  rt::ComponentConfig tokenizer_config(
      *model_test::registry().find(PB_KIND_TOKENIZER, "char").descriptor);
  rt::TokenizerHandle tokenizer =
      model_test::registry().create_tokenizer("char", tokenizer_config.view());
  tokenizer.train("In the beginning God created the heaven and the earth. 0123456789");
  const fs::path tokenizer_file = dir / "run" / "tokenizer.txt";
  tokenizer.save(tokenizer_file.string());
  std::ifstream in(tokenizer_file, std::ios::binary);
  const std::string tokenizer_text{std::istreambuf_iterator<char>(in),
                                   std::istreambuf_iterator<char>()};
  const patchbay::config::ResolvedConfig config =
      patchbay::config::load_config_text(kConfig, "test.toml");
  auto model =
      pm::LanguageModel::build(pm::model_options_from_config(config, tokenizer.vocab_size()),
                               pm::component_tables_from_config(config), model_test::registry());
  std::vector<patchbay::train::NamedTensor> tensors;
  for (const pm::NamedParameter& p : model->parameters()) tensors.push_back({p.name, p.tensor});
  patchbay::train::save_checkpoint(dir / "run", 0, tensors,
                                   {{patchbay::train::kMetaConfig, kConfig},
                                    {patchbay::train::kMetaTokenizerFile, tokenizer_file.string()},
                                    {patchbay::train::kMetaTokenizerHash,
                                     std::to_string(patchbay::data::fnv1a64(tokenizer_text))}});
}

}  // namespace

TEST_CASE("patchbay generate --regex / --grammar constrain sampled and beam outputs") {
  const patchbay::testing::TempDir scratch("grammar_cmd");
  const fs::path& dir = scratch.path();
  save_run(dir);
  const std::string generate =
      std::string(PATCHBAY_EXECUTABLE) + " generate " + (dir / "run").string();
  const std::regex oracle("[a-z]{2,4}( [0-9]{1,2}){1,3}\\.");
  for (int seed = 1; seed <= 5; ++seed) {
    const CommandResult r =
        run_shell(generate + " --prompt the -n 24 --seed " + std::to_string(seed) +
                    " --regex '[a-z]{2,4}( [0-9]{1,2}){1,3}\\.' 2>/dev/null");
    CHECK(r.exit_code == 0);
    REQUIRE(r.output.starts_with("the"));
    const std::string text = r.output.substr(3, r.output.size() - 4);  // prompt and newline off
    CHECK_MESSAGE(std::regex_match(text, oracle), "seed " << seed << ": \"" << text << "\"");
  }
  std::ofstream(dir / "digits.gbnf") << "# digits then a dot\nroot ::= [0-9]{1,3} \".\"\n";
  const CommandResult beams = run_shell(
      generate + " --prompt the -n 8 --num-beams 3 --num-return-sequences 3 --grammar " +
      (dir / "digits.gbnf").string() + " 2>/dev/null");
  CHECK(beams.exit_code == 0);
  const std::regex line_oracle("the[0-9]{1,3}\\.");
  int lines = 0;
  std::istringstream stream(beams.output);
  for (std::string line; std::getline(stream, line);) {
    if (line.starts_with("[")) continue;  // "[k] score ..." headers
    ++lines;
    CHECK_MESSAGE(std::regex_match(line, line_oracle), "\"" << line << "\"");
  }
  CHECK(lines == 3);

  std::ofstream(dir / "bad.gbnf") << "root ::= item\nitem ::= [a-z\n";
  const CommandResult bad =
      run_shell(generate + " --prompt the --grammar " + (dir / "bad.gbnf").string() + " 2>&1");
  CHECK(bad.exit_code != 0);
  CHECK_MESSAGE(bad.output.find("bad.gbnf: line 2, column 10: unterminated character class") !=
                    std::string::npos,
                bad.output);
}

TEST_CASE(
    "generate refuses empty constraints, devices and hostile nesting with an error, never a "
    "crash") {
  const patchbay::testing::TempDir scratch("grammar_cmd_bad");
  const fs::path& dir = scratch.path();
  save_run(dir);
  const std::string generate = std::string(PATCHBAY_EXECUTABLE) + " generate " +
                               (dir / "run").string() + " --prompt the -n 4";
  const CommandResult empty_regex = run_shell(generate + " --regex '' 2>&1");
  CHECK(empty_regex.exit_code == 2);
  CHECK(empty_regex.output.find("--regex needs a regular expression") != std::string::npos);
  const CommandResult empty_grammar = run_shell(generate + " --grammar '' 2>&1");
  CHECK(empty_grammar.exit_code == 2);
  CHECK(empty_grammar.output.find("--grammar needs a .gbnf file") != std::string::npos);
  const CommandResult device = run_shell("timeout 60 " + generate + " --grammar /dev/zero 2>&1");
  CHECK(device.exit_code == 2);
  CHECK(device.output.find("/dev/zero: not a regular file") != std::string::npos);
  // 60K nested groups (an argument stays under the kernel's 128 KiB limit per argument).
  const std::string nested = std::string(60000, '(') + "a" + std::string(60000, ')');
  const CommandResult deep = run_shell(generate + " --regex '" + nested + "' 2>&1");
  CHECK(deep.exit_code > 0);  // an error exit, not a signal (-1)
  CHECK_MESSAGE(deep.output.find("groups nest deeper than") != std::string::npos,
                deep.output.substr(0, 400));
  std::ofstream(dir / "deep.gbnf")
      << "root ::= " << std::string(100000, '(') << "\"x\"" << std::string(100000, ')') << "\n";
  const CommandResult deep_file =
      run_shell(generate + " --grammar " + (dir / "deep.gbnf").string() + " 2>&1");
  CHECK(deep_file.exit_code > 0);
  CHECK(deep_file.output.find("groups nest deeper than") != std::string::npos);
}
