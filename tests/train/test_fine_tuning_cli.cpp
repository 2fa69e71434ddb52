// Fine-tuning through the real `patchbay` CLI (docs/finetuning.md): a base run, a LoRA run on it
// (train.init_from + [train.lora]) whose checkpoint holds the adapters only; `generate` on the
// LoRA run refuses naming `export --merge-lora`; `export --merge-lora` writes a plain run that
// `eval` accepts with the LoRA run's own validation loss; `train --resume` of the LoRA run reads
// the base again and continues; `--checkpoint-at-start` and `--record-batches` (appended on
// resume).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "../command_runner.hpp"
#include "train_fixture.hpp"

namespace fs = std::filesystem;
using patchbay::testing::CommandResult;

namespace {

CommandResult cli(const std::string& arguments) {
  return patchbay::testing::run_patchbay(arguments, "OMP_NUM_THREADS=1");
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string quoted(const fs::path& p) {
  std::string text = "'";
  text += p.string();
  text += "'";
  return text;
}

// The number after `label` in a command's output ("val loss: " of train, "loss: " of eval).
std::string number_after(const std::string& output, const std::string& label) {
  const size_t at = output.rfind(label);
  REQUIRE_MESSAGE(at != std::string::npos, output);
  const size_t start = at + label.size();
  return output.substr(start, output.find(' ', start) - start);
}

int64_t line_count(const fs::path& file) {
  std::ifstream in(file);
  int64_t lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

}  // namespace

TEST_CASE(
    "CLI: LoRA run, generate refuses it, export --merge-lora, eval of the merged run, resume") {
  patchbay::testing::TempDir dir = patchbay::train::testing::fresh_folder("finetune_cli");
  const fs::path folder = dir.path();
  patchbay::train::testing::write_tiny_corpus(folder);
  std::ofstream(folder / "base.toml") << patchbay::train::testing::tiny_config_text(folder);
  CommandResult r = cli("train " + quoted(folder / "base.toml") + " --no-progress");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);

  const fs::path lora = folder / "lora";
  std::ofstream(folder / "lora.toml") << patchbay::train::testing::tiny_config_text(
      folder, "init_from = \"" + (folder / "run").string() +
                  "\"\n[train.lora]\nrank = 2\ntargets = [\"attention.*\", \"mlp.*\"]\n");
  const fs::path batches = folder / "batches.jsonl";
  r = cli("train " + quoted(folder / "lora.toml") + " --no-progress --set train.out_dir=\"" +
          lora.string() + "\" --record-batches " + quoted(batches) + " --checkpoint-at-start");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  // --checkpoint-at-start: the adapters before any update; --record-batches: a line
  // per step (batch_record.hpp; its contents are checked in test_batch_record.cpp).
  CHECK(fs::exists(lora / "checkpoints" / "step_0.safetensors"));
  CHECK(line_count(batches) == 6);
  // q, k, v, o and mlp up, down (a GELU mlp has no gate) in 2 blocks
  CHECK(contains(r.output, "train.lora: 12 adapters of rank 2"));
  const std::string lora_val_loss = number_after(r.output, "val loss: ");

  r = cli("generate " + quoted(lora) + " --prompt 'the ' -n 5");
  CHECK(r.exit_code != 0);
  CHECK(contains(r.output, "holds LoRA adapters only"));
  CHECK(contains(r.output, "--merge-lora"));

  // The base model's chat template (as `patchbay import` of a GGUF file leaves it) travels to
  // the merged run, so `chat` of it needs no --template.
  const std::string chat_template =
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}";
  std::ofstream(folder / "run" / "chat_template.jinja") << chat_template;
  const fs::path merged = folder / "merged";
  r = cli("export " + quoted(lora) + " --merge-lora " + quoted(merged));
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(contains(r.output, "merged 12 LoRA adapters (step 6)"));
  std::ifstream copied(merged / "chat_template.jinja");
  CHECK(std::string(std::istreambuf_iterator<char>(copied), {}) == chat_template);
  r = cli("eval " + quoted(merged));
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(number_after(r.output, "\nloss: ") ==
        lora_val_loss);  // the same weights, the same validation windows
  r = cli("generate " + quoted(merged) + " --prompt 'the ' -n 5");
  CHECK_MESSAGE(r.exit_code == 0, r.output);

  r = cli("train --resume " + quoted(lora) + " --no-progress --set train.max_steps=8");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(contains(r.output, "train.init_from"));
  CHECK(contains(r.output, "steps: 6 -> 8"));
  r = cli("train --resume " + quoted(lora) + " --no-progress --set train.max_steps=9 " +
          "--record-batches " + quoted(batches));
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(line_count(batches) == 7);  // appended: step 8 only
}
