// `patchbay generate` end to end: a freshly built model saved as a checkpoint (the trainer's
// format, core/train/checkpoint.hpp) with its tokenizer file, then the command run twice as a
// separate process. Its output must be the prompt followed by exactly what generate() gives
// in-process for the same weights and chain (so weights, tokenizer and chain survive the
// round trip), and equal between runs.
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "config/config_loader.hpp"
#include "data/split.hpp"
#include "generate/generate.hpp"
#include "generate/sampler_config.hpp"
#include "model_fixture.hpp"
#include "patchbay/testing/temp_dir.hpp"
#include "train/checkpoint.hpp"

#include "../command_runner.hpp"

namespace fs = std::filesystem;
namespace gen = patchbay::generate;
namespace pm = patchbay::model;
namespace rt = patchbay::runtime;

namespace {

// The command's output; it must exit 0.
std::string run_command(const std::string& command) {
  const patchbay::testing::CommandResult r = patchbay::testing::run_shell(command);
  CHECK(r.exit_code == 0);
  return r.output;
}

constexpr const char* kConfig = R"([tokenizer]
kind = "char"
[model]
context_length = 16
n_layers = 2
n_heads = 2
d_model = 16
init_std = 0.5
positional = "rotary"
seed = 3
)";

}  // namespace

TEST_CASE("patchbay generate reproduces in-process generation from a saved checkpoint") {
  const patchbay::testing::TempDir scratch("generate_cmd");
  const fs::path& dir = scratch.path();
  fs::create_directories(dir / "run");

  rt::ComponentConfig tokenizer_config(
      *model_test::registry().find(PB_KIND_TOKENIZER, "char").descriptor);
  rt::TokenizerHandle tokenizer =
      model_test::registry().create_tokenizer("char", tokenizer_config.view());
  tokenizer.train("In the beginning God created the heaven and the earth.");
  const fs::path tokenizer_file = dir / "run" / "tokenizer.txt";
  tokenizer.save(tokenizer_file.string());
  std::string tokenizer_text;
  {
    std::ifstream in(tokenizer_file, std::ios::binary);
    tokenizer_text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

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

  rt::SamplerChain chain =
      gen::build_sampler_chain(gen::default_chain_entries(4), model_test::registry());
  gen::GenerateOptions options;
  options.max_new_tokens = 12;
  options.stop_at_special = false;
  const gen::GenerateResult expected = gen::generate(*model, tokenizer, "the", options, chain);
  REQUIRE(expected.tokens.size() == 12);

  const std::string command = std::string(PATCHBAY_EXECUTABLE) + " generate " +
                              (dir / "run").string() +
                              " --prompt the -n 12 --seed 4 --no-stop 2>/dev/null";
  const std::string first = run_command(command);
  CHECK(first == "the" + expected.text + "\n");
  CHECK(run_command(command) == first);

  // stdout and stderr into one pipe: the text ends its line before the statistics line
  // starts, and the statistics line ends with a newline (nothing runs into the prompt).
  const std::string both = run_command(std::string(PATCHBAY_EXECUTABLE) + " generate " +
                                       (dir / "run").string() + " --prompt the -n 12 --seed 4 --no-stop 2>&1");
  const size_t stats = both.find("12 tokens (max-new-tokens)");
  REQUIRE(stats != std::string::npos);
  CHECK(both.substr(0, stats).ends_with("the" + expected.text + "\n"));
  CHECK(both.ends_with(" tokens/s\n"));

  // --weights-dtype bf16: the command converts the loaded weights as convert_weights_for_inference
  // does in-process, so both give the same text; a dtype it does not know is refused.
  model->convert_weights_for_inference(patchbay::engine::DType::kBF16);
  const gen::GenerateResult expected_bf16 = gen::generate(*model, tokenizer, "the", options, chain);
  CHECK(run_command(std::string(PATCHBAY_EXECUTABLE) + " generate " + (dir / "run").string() +
                    " --prompt the -n 12 --seed 4 --no-stop --weights-dtype bf16 2>/dev/null") ==
        "the" + expected_bf16.text + "\n");
  CHECK(std::system((std::string(PATCHBAY_EXECUTABLE) + " generate " + (dir / "run").string() +
                     " --prompt the -n 2 --weights-dtype f16 >/dev/null 2>&1")
                        .c_str()) != 0);
}
