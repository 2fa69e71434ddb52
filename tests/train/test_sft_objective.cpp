// The "sft" objective (core/train/objective_sft.cpp, instruction_data.hpp) on a character
// tokenizer whose special tokens are ChatML's, so every id is one character or one marker and
// the mask can be written down by hand:
//   - assistant flags on every assistant turn (content, <|im_end|>, newline), nothing else;
//     targets = the next id where it is the assistant's, -100 elsewhere and on padding;
//   - longer than the context: truncated with counts, dropped when no assistant id is left,
//     or refused with file:line;
//   - bad lines refused with file:line and what was expected (no messages, unknown role, not
//     JSON, no assistant turn), a template that cannot render a conversation (line, reason);
//   - a short run through the trainer lowers the assistant-token loss, and resumes exactly.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "resume_check.hpp"
#include "run/metrics_log.hpp"
#include "sft_fixture.hpp"
#include "train/checkpoint.hpp"
#include "train/instruction_data.hpp"
#include "train/objective.hpp"
#include "train/sft_options.hpp"
#include "train/trainer.hpp"
#include "train/training_data.hpp"
#include "train_fixture.hpp"

using namespace patchbay;
using train::testing::TinySetup;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

const std::vector<std::string> kSft = {
    "tokenizer.special_tokens=[\"<|im_start|>\", \"<|im_end|>\"]", "train.objective=\"sft\"",
    "train.sft.template=\"chatml\""};

std::vector<std::string> sft_overrides(const std::filesystem::path& folder,
                                       std::vector<std::string> extra = {}) {
  std::vector<std::string> all = kSft;
  all.push_back("train.sft.data=\"" + (folder / "chat.jsonl").string() + "\"");
  all.insert(all.end(), extra.begin(), extra.end());
  return all;
}

}  // namespace

TEST_CASE("sft: assistant tokens of every turn carry loss, checked against a hand-computed mask") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("sft_mask");
  train::testing::write_chat_data(folder);
  const config::ResolvedConfig c =
      setup.config(train::testing::tiny_config_text(folder), sft_overrides(folder));
  train::TrainingData data = train::prepare_training_data(c, setup.registry, setup.lookup);
  const train::Conversation conversation{
      {{"system", "S"}, {"user", "hi"}, {"assistant", "yo"}, {"user", "ok"}, {"assistant", "k"}},
      "hand:1"};
  const train::InstructionExample example = train::tokenize_conversation(
      conversation, eval::builtin_chat_template("chatml"), data.tokenizer);
  // By hand: <|im_start|> "system\n" "S" <|im_end|> "\n"                 11 ids (0-10)
  //          <|im_start|> "user\n" "hi" <|im_end|> "\n"                   10 ids (11-20)
  //          <|im_start|> "assistant\n"                                   11 ids (21-31)
  //          "yo" <|im_end|> "\n"                         the assistant's  4 ids (32-35)
  //          <|im_start|> "user\n" "ok" <|im_end|> "\n"                   10 ids (36-45)
  //          <|im_start|> "assistant\n"                                   11 ids (46-56)
  //          "k" <|im_end|> "\n"                          the assistant's  3 ids (57-59)
  std::vector<uint8_t> expected(60, 0);
  for (int t : {32, 33, 34, 35, 57, 58, 59}) expected[static_cast<size_t>(t)] = 1;
  REQUIRE(example.ids.size() == 60);
  CHECK(example.assistant == expected);
  CHECK(data.tokenizer.decode(std::vector<int32_t>(example.ids.begin() + 32,
                                                   example.ids.begin() + 36)) == "yo<|im_end|>\n");
  CHECK(data.tokenizer.decode(std::vector<int32_t>(example.ids.begin() + 57, example.ids.end())) ==
        "k<|im_end|>\n");
  CHECK(data.tokenizer.decode(example.ids) ==
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>"
        "assistant\nyo<|im_end|>\n"
        "<|im_start|>user\nok<|im_end|>\n<|im_start|>assistant\nk<|im_end|>\n");

  // The batch row: inputs ids[0, T), targets ids[t + 1] where t + 1 is the assistant's, padding
  // past the example (pad id as input, -100 as target); a padding-only row has no target.
  const int32_t pad = 7;
  const train::Batch b = train::instruction_batch({&example, nullptr}, 64, pad);
  REQUIRE(b.targets.shape() == std::vector<int64_t>{2, 64});
  const int32_t* inputs = b.inputs.data<int32_t>();
  const int32_t* targets = b.targets.data<int32_t>();
  for (int t = 0; t < 64; ++t) {
    INFO("position " << t);
    CHECK(inputs[t] == (t < 60 ? example.ids[static_cast<size_t>(t)] : pad));
    const bool carries = (t >= 31 && t <= 34) || (t >= 56 && t <= 58);
    CHECK(targets[t] == (carries ? example.ids[static_cast<size_t>(t + 1)] : train::kIgnoreTarget));
    CHECK(targets[64 + t] == train::kIgnoreTarget);
    CHECK(inputs[64 + t] == pad);
  }

  // Longer than the context: seq_len 40 keeps 41 ids (the first answer), seq_len 30 none of
  // the answers (dropped); both counted. "refuse" names the line and the lengths.
  const train::InstructionSet cut =
      train::fit_to_context({example}, 40, train::Overlong::kTruncate);
  CHECK(cut.read == 1);
  CHECK(cut.truncated == 1);
  CHECK(cut.ids_cut == 19);
  CHECK(cut.dropped == 0);
  REQUIRE(cut.examples.size() == 1);
  CHECK(cut.examples[0].assistant == std::vector<uint8_t>(expected.begin(), expected.begin() + 41));
  const train::InstructionSet none =
      train::fit_to_context({example}, 30, train::Overlong::kTruncate);
  CHECK(none.truncated == 1);
  CHECK(none.dropped == 1);
  CHECK(none.examples.empty());
  CHECK(train::fit_to_context({example}, 59, train::Overlong::kTruncate).truncated == 0);
  CHECK(error_of([&] {
          train::fit_to_context({example}, 40, train::Overlong::kRefuse);
        }).find("hand:1: the conversation is 60 tokens, longer than train.seq_len + 1 = 41") !=
        std::string::npos);
}

TEST_CASE("sft: bad lines are refused with file:line and what was expected") {
  const auto folder = train::testing::fresh_folder("sft_bad");
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(folder / name) << text;
    return (folder / name).string();
  };
  const std::string good = R"({"prompt": "p", "response": "r"})";
  const std::string no_messages = write("a.jsonl", good + "\n\n" + R"({"text": "hello"})" + "\n");
  CHECK(error_of([&] {
          train::read_conversations(no_messages);
        }).find(no_messages + ":3: expected {\"messages\"") != std::string::npos);
  CHECK(error_of([&] {
          train::read_conversations(no_messages);
        }).find("the line has keys \"text\"") != std::string::npos);
  const std::string robot = write(
      "b.jsonl",
      R"({"messages": [{"role": "user", "content": "x"}, {"role": "robot", "content": "y"}]})");
  CHECK(
      error_of([&] { train::read_conversations(robot); })
          .find(
              robot +
              ":1: message 2 has role \"robot\"; expected \"system\", \"user\" or \"assistant\"") !=
      std::string::npos);
  const std::string broken = write("c.jsonl", good + "\n{\"prompt\": \n");
  CHECK(error_of([&] {
          train::read_conversations(broken);
        }).find(broken + ":2: not a JSON value") != std::string::npos);
  const std::string unanswered =
      write("d.jsonl", R"({"messages": [{"role": "user", "content": "x"}]})");
  CHECK(error_of([&] { train::read_conversations(unanswered); }).find("has no assistant message") !=
        std::string::npos);
  const std::string number = write("e.jsonl", R"({"prompt": "p", "response": 3})");
  CHECK(error_of([&] {
          train::read_conversations(number);
        }).find("needs a string \"response\", found number") != std::string::npos);
  CHECK(train::read_conversations(write("f.jsonl", good + "\n")).front().messages.size() == 2);

  // A template that cannot render a conversation: the line, then the template's own reason.
  TinySetup setup;
  train::testing::write_chat_data(folder);
  const config::ResolvedConfig c =
      setup.config(train::testing::tiny_config_text(folder), sft_overrides(folder));
  train::TrainingData data = train::prepare_training_data(c, setup.registry, setup.lookup);
  const eval::ChatTemplate strict{"strict.jinja",
                                  "{% for m in messages %}\n{% if m.role == 'system' %}\n"
                                  "{{ raise_exception('System role not supported') }}\n{% endif %}"
                                  "{{ m.content }}{% endfor %}",
                                  "", ""};
  const train::Conversation with_system{{{"system", "s"}, {"user", "u"}, {"assistant", "a"}},
                                        "chat.jsonl:4"};
  const std::string message =
      error_of([&] { train::tokenize_conversation(with_system, strict, data.tokenizer); });
  CHECK(message.find(
            "chat.jsonl:4: the chat template strict.jinja cannot render this conversation") !=
        std::string::npos);
  CHECK(message.find("System role not supported") != std::string::npos);
}

TEST_CASE("sft: a short run lowers the assistant-token loss and resumes bit-identically") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("sft_run");
  train::testing::write_chat_data(folder);
  train::TrainRequest quiet;
  quiet.show_progress = false;
  quiet.print_samples = false;
  const std::string text = train::testing::tiny_config_text(folder);
  std::vector<std::string> run = sft_overrides(
      folder, {"train.max_steps=60", "train.eval_every=30", "train.eval_batches=4",
               "train.checkpoint_every=0", "train.seq_len=96", "model.context_length=128",
               "train.batch_size=8", "train.sample_tokens=0",
               "train.out_dir=\"" + (folder / "long").string() + "\""});
  // Every training batch: targets only where the next id is the assistant's (not -100 on a
  // system or user id): checked through the trainer's own batches.
  int64_t counted = 0, total = 0;
  train::TrainRequest watch = quiet;
  watch.on_batch = [&](int64_t, int64_t, const train::Batch& b) {
    const int32_t* t = b.targets.data<int32_t>();
    for (int64_t i = 0; i < b.targets.numel(); ++i) counted += t[i] != train::kIgnoreTarget;
    total += b.targets.numel();
  };
  const train::TrainSummary s =
      train::train_model(setup.config(text, run), setup.registry, setup.lookup, watch);
  REQUIRE(s.steps_done == 60);
  CHECK(counted > 0);
  CHECK(counted < total / 4);  // the answers are a small part of each padded row
  std::vector<nlohmann::json> evals, steps;
  for (const nlohmann::json& r : run::read_metrics(folder / "long" / "metrics.jsonl"))
    (r.contains("val_loss") ? evals : steps).push_back(r);
  REQUIRE(evals.size() == 2);
  INFO("train loss " << steps.front()["loss"] << " -> " << steps.back()["loss"] << ", val "
                     << evals[0]["val_loss"] << " -> " << evals[1]["val_loss"]);
  CHECK(evals[0]["objective"] == "sft");
  CHECK(evals[1]["val_conversations"] == 12);  // 10% of 120 held out
  CHECK(steps.back()["loss"].get<double>() < steps.front()["loss"].get<double>() - 1.0);
  CHECK(evals[1]["val_loss"].get<double>() < evals[0]["val_loss"].get<double>());

  // Resume: 6 steps straight against 3 + 3.
  const std::vector<std::string> short_run = {"train.max_steps=6", "train.checkpoint_every=3",
                                              "train.seq_len=96", "model.context_length=128"};
  train::testing::check_resume_bit_identical(setup, text, sft_overrides(folder, short_run), folder,
                                             quiet);
}

TEST_CASE(
    "sft: template = \"auto\" is the template beside train.init_from, else refused naming the "
    "choices") {
  const auto folder = train::testing::fresh_folder("sft_auto");
  std::filesystem::create_directories(folder / "run" / "checkpoints");
  std::ofstream(folder / "run" / "chat_template.jinja") << "{{ messages[0].content }}";
  std::ofstream(folder / "run" / "checkpoints" / "step_4.safetensors") << "";
  const std::string run = (folder / "run").string();
  CHECK(train::resolve_chat_template_spec("auto", run) == run);
  CHECK(train::resolve_chat_template_spec(
            "auto", folder / "run" / "checkpoints" / "step_4.safetensors") == run);
  CHECK(train::resolve_chat_template_spec("llama3", "") == "llama3");
  CHECK(error_of([] {
          train::resolve_chat_template_spec("auto", "");
        }).find("train.init_from, which is empty") != std::string::npos);
  CHECK(error_of([&] {
          train::resolve_chat_template_spec("auto", folder / "checkpoints-elsewhere.gguf");
        }).find("\"chatml\", \"llama3\"") != std::string::npos);
}
