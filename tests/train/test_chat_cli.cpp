// Talking to an instruction-tuned run through the real CLI (issue 36 item 6): a tiny character
// model tuned with train.objective = "sft" (ChatML, its markers special tokens), then
//   - `patchbay chat RUN` with two user lines on stdin: two replies on stdout (one line each,
//     no end-of-turn marker in them), the second prompt longer than the first (the history is
//     kept), a clear end on end of input; --system; /reset; the template from the run's config;
//   - `generate --chat`: the prompt wrapped in the template, the reply alone on stdout;
//   - refusals: a run with no template anywhere, --system without --chat.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../command_runner.hpp"
#include "sft_fixture.hpp"
#include "train_fixture.hpp"

namespace fs = std::filesystem;
using patchbay::testing::CommandResult;

namespace {

std::string quoted(const fs::path& p) {
  std::string text = "'";  // built up: GCC 12 warns (-Wrestrict) on "'" + string at -O3
  text += p.string();
  text += "'";
  return text;
}

std::string patchbay_command(const std::string& arguments) {
  return std::string("env -u PATCHBAY_PLUGIN_PATH OMP_NUM_THREADS=1 '") + PATCHBAY_EXECUTABLE +
         "' --plugin-path '" + PATCHBAY_TEST_PLUGIN_DIR + "' " + arguments;
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// `patchbay chat ...` fed `input` on stdin: stdout as the result's output, stderr in `errors`.
CommandResult chat(const std::string& arguments, const std::string& input, const fs::path& folder,
                   std::string& errors) {
  std::ofstream(folder / "stdin.txt") << input;
  CommandResult r = patchbay::testing::run_shell(patchbay_command("chat " + arguments) + " < " +
                                                 quoted(folder / "stdin.txt") + " 2> " +
                                                 quoted(folder / "stderr.txt"));
  errors = read_text(folder / "stderr.txt");
  return r;
}

int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size()))
    ++n;
  return n;
}

// The prompt sizes chat reports on stderr, in order ("prompt 57 tokens").
std::vector<int> prompt_sizes(const std::string& errors) {
  std::vector<int> sizes;
  for (size_t at = errors.find("prompt "); at != std::string::npos;
       at = errors.find("prompt ", at + 1))
    sizes.push_back(std::atoi(errors.c_str() + at + 7));
  return sizes;
}

}  // namespace

TEST_CASE("CLI: chat with an instruction-tuned run over stdin, generate --chat, refusals") {
  patchbay::testing::TempDir dir = patchbay::train::testing::fresh_folder("chat_cli");
  const fs::path folder = dir.path();
  patchbay::train::testing::write_chat_data(folder);
  std::ofstream(folder / "sft.toml") << patchbay::train::testing::tiny_config_text(
      folder, "objective = \"sft\"\n[train.sft]\ndata = \"" + (folder / "chat.jsonl").string() +
                  "\"\ntemplate = \"chatml\"\n");
  CommandResult r = patchbay::testing::run_patchbay(
      "train " + quoted(folder / "sft.toml") +
          " --no-progress --set 'tokenizer.special_tokens=[\"<|im_start|>\", \"<|im_end|>\"]' "
          "--set "
          "model.context_length=128 --set train.max_steps=20 --set train.seq_len=64",
      "OMP_NUM_THREADS=1");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  const fs::path run = folder / "run";

  std::string errors;
  r = chat(quoted(run) + " --temperature 0 -n 12", "what is 3 plus one?\n\nand twice 3?\n", folder,
           errors);
  REQUIRE_MESSAGE(r.exit_code == 0, (r.output + errors));
  CHECK_MESSAGE(count(r.output, "\n") >= 2, r.output);  // each reply ends its line
  CHECK_MESSAGE(count(errors, "tokens, prompt ") == 2, errors);
  CHECK(r.output.find("<|im_end|>") == std::string::npos);
  CHECK(r.output.find("<|im_start|>") == std::string::npos);
  CHECK_MESSAGE(errors.find("template chatml") != std::string::npos, errors);
  CHECK_MESSAGE(errors.find("end of the conversation: 2 replies") != std::string::npos, errors);
  const std::vector<int> sizes = prompt_sizes(errors);
  REQUIRE_MESSAGE(sizes.size() == 2, errors);
  CHECK(sizes[1] > sizes[0] + 10);  // the first exchange is part of the second prompt

  // --system opens the conversation (a longer first prompt); /reset forgets the history.
  r = chat(quoted(run) + " --temperature 0 -n 4 --system 'Be brief.'",
           "what is 3 plus one?\n/reset\nhi\n/exit\n", folder, errors);
  REQUIRE_MESSAGE(r.exit_code == 0, (r.output + errors));
  const std::vector<int> with_system = prompt_sizes(errors);
  REQUIRE_MESSAGE(with_system.size() == 2, errors);
  CHECK(with_system[0] > sizes[0]);
  CHECK(with_system[1] < with_system[0]);  // "hi" after /reset: system + one short turn
  CHECK(errors.find("conversation forgotten") != std::string::npos);

  // generate --chat: the reply alone (the prompt is not echoed), stopped at the turn's end.
  r = patchbay::testing::run_shell(
      patchbay_command("generate " + quoted(run) +
                       " --chat --prompt 'what is 3 plus one?' --temperature 0 -n 12") +
      " 2>/dev/null");
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("what is 3") == std::string::npos);
  CHECK(r.output.find("<|im_end|>") == std::string::npos);
  r = patchbay::testing::run_patchbay("generate " + quoted(run) + " --prompt x --system y");
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("--system and --template go with --chat") != std::string::npos);

  // A plain run (no template beside it, not instruction-tuned) needs --template.
  std::ofstream(folder / "plain.toml") << patchbay::train::testing::tiny_config_text(folder);
  r = patchbay::testing::run_patchbay(
      "train " + quoted(folder / "plain.toml") +
          " --no-progress --set train.max_steps=2 --set train.out_dir=\"" +
          (folder / "plain").string() + "\"",
      "OMP_NUM_THREADS=1");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  r = chat(quoted(folder / "plain"), "hi\n", folder, errors);
  CHECK(r.exit_code != 0);
  CHECK_MESSAGE(errors.find("has no chat template") != std::string::npos, errors);
  CHECK(errors.find("--template chatml") != std::string::npos);
  r = chat(quoted(folder / "plain") + " --template chatml -n 3", "hi\n", folder, errors);
  CHECK_MESSAGE(r.exit_code == 0, (errors));
  CHECK(errors.find("end of the conversation: 1 reply") != std::string::npos);
}
