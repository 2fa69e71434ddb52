// `patchbay chat RUN`: a conversation with a run's model over stdin and stdout, in the run's
// chat template (cli/checkpoint_model.hpp says which).
//
// Each line read from stdin is one user message (an empty line is skipped; "/reset" forgets
// the history, "/exit" ends). The whole conversation so far (--system first) is rendered with
// the generation prompt opened, prefilled, and the reply decoded by the same path as
// `patchbay generate` (generate/generate.hpp: KV cache, sampler chain) and streamed to stdout
// token by token; it ends at a special token (the template's <|im_end|> / <|eot_id|> when the
// tokenizer has them as such), at the template's end-of-turn text (chat_stop_strings) or at
// --max-new-tokens. The reply joins the history. End of input ends the session with a line on
// stderr; prompts and statistics go to stderr, so stdout holds the replies only.
#include <boost/program_options.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/checkpoint_model.hpp"
#include "cli/command.hpp"
#include "cli/device_option.hpp"
#include "common/error.hpp"
#include "eval/chat_template.hpp"
#include "generate/generate.hpp"
#include "generate/sampler_config.hpp"
#include "generate/sampler_vocabulary.hpp"
#include "runtime/registry.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;

// One reply to the conversation so far; streamed to stdout, returned for the history.
std::string reply(CheckpointModel& run, const eval::ChatTemplate& chat,
                  const std::vector<eval::ChatMessage>& history,
                  const std::vector<std::string>& stops, int64_t max_new_tokens,
                  runtime::SamplerChain& chain) {
  const std::string prompt = eval::render_chat(chat, history, true);
  generate::GenerateOptions options;
  options.max_new_tokens = max_new_tokens;
  options.stop_strings = stops;
  options.on_text = [](std::string_view piece) { std::cout << piece << std::flush; };
  const generate::GenerateResult r =
      generate::generate(*run.model, run.tokenizer, prompt, options, chain);
  std::cout << "\n" << std::flush;
  std::cerr << "(" << r.tokens.size() << " tokens, prompt " << r.prompt_tokens << " tokens"
            << (r.stop_reason == generate::StopReason::kMaxNewTokens ? ", cut at --max-new-tokens"
                                                                     : "")
            << (r.prompt_tokens_dropped > 0
                    ? ", the conversation's first " + std::to_string(r.prompt_tokens_dropped) +
                          " tokens no longer fit the context"
                    : std::string())
            << ")\n";
  return r.text;
}

int run_chat(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string checkpoint_path, system, template_spec, device, weights_dtype = "f32";
  int64_t max_new_tokens = 256;
  double temperature = 0, top_p = 0;
  int64_t top_k = 0;
  uint64_t seed = 0;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")(
      "run", po::value(&checkpoint_path),
      "run directory (its latest checkpoint) or checkpoint file")(
      "system", po::value(&system), "a system message opening the conversation")(
      "template", po::value(&template_spec),
      "chat template: chatml, llama3, a .jinja file or a model directory (default: the run's own)")(
      "max-new-tokens,n", po::value(&max_new_tokens), "longest reply in tokens (default 256)")(
      "temperature", po::value(&temperature),
      "divide logits by T; 0 = greedy (default 0.8 with top-k 40)")(
      "top-k", po::value(&top_k), "keep the k most likely tokens")(
      "top-p", po::value(&top_p), "nucleus: keep the smallest set with probability >= p")(
      "seed", po::value(&seed), "seed of the random selector (default 0)")(
      "weights-dtype", po::value(&weights_dtype), "f32 (default) or bf16 weight matrices");
  add_device_option(options, device);
  po::positional_options_description positional;
  positional.add("run", 1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), values);
  const bool help = values.count("help") != 0;
  if (help || values.count("run") == 0) {
    std::cout
        << "Usage: patchbay chat RUN [--system TEXT] [--template NAME|FILE] [--max-new-tokens N]\n"
           "                     [--temperature T] [--top-k K] [--top-p P] [--seed S]\n\n"
           "Talks with the run's model: each line on stdin is a user message, the reply is "
           "streamed to\n"
           "stdout in the run's chat template (docs/finetuning.md). /reset forgets the "
           "conversation,\n"
           "/exit or the end of input ends it.\n\n"
        << options;
    return help ? kExitOk : kExitUsage;
  }
  po::notify(values);
  if (max_new_tokens < 1)
    throw Error(ErrorKind::kInvalidArgument, "chat: --max-new-tokens must be at least 1");
  generate::SamplerOverrides overrides;
  if (values.count("temperature") != 0) overrides.temperature = temperature;
  if (values.count("top-k") != 0) overrides.top_k = top_k;
  if (values.count("top-p") != 0) overrides.top_p = top_p;
  if (values.count("seed") != 0) overrides.seed = seed;

  CheckpointModel run = load_checkpoint_model(checkpoint_path, global, device, weights_dtype);
  const eval::ChatTemplate chat = chat_template_of_run(run, template_spec);
  const std::vector<std::string> stops = eval::chat_stop_strings(chat);
  toml::array entries = generate::default_chain_entries(overrides.seed.value_or(0));
  generate::apply_overrides(entries, overrides);
  runtime::SamplerChain chain = generate::build_sampler_chain(entries, *run.components.registry);
  generate::give_vocabulary_if_needed(chain, run.tokenizer);
  std::string stop_list;
  for (const std::string& s : stops) stop_list += (stop_list.empty() ? "" : ", ") + s;
  std::cerr << "chat with " << run.checkpoint.path().string() << " (step " << run.checkpoint.step()
            << "), template " << chat.name << ", replies end at special tokens"
            << (stop_list.empty() ? "" : " and " + stop_list) << "; sampler " << chain.describe()
            << "\n";

  std::vector<eval::ChatMessage> history;
  if (!system.empty()) history.push_back({"system", system});
  const size_t opening = history.size();
  int64_t turns = 0;
  std::string line;
  while (true) {
    std::cerr << "> " << std::flush;
    if (!std::getline(std::cin, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line == "/exit") break;
    if (line == "/reset") {
      history.resize(opening);
      std::cerr << "(conversation forgotten)\n";
      continue;
    }
    history.push_back({"user", line});
    history.push_back({"assistant", reply(run, chat, history, stops, max_new_tokens, chain)});
    ++turns;
  }
  std::cerr << "\n(end of the conversation: " << turns << (turns == 1 ? " reply" : " replies")
            << ")\n";
  return kExitOk;
}

// `patchbay chat-template TEMPLATE CONVERSATIONS.jsonl`: each conversation ({"messages": [...]}
// per line) rendered, as one JSON line {"text", "prompt", "segments"}: the text without and
// with the generation prompt, and the assistant spans (eval::assistant_segments; null when the
// template refuses them). For checking templates by eye and against jinja2
// (scripts/finetune/check_chat_templates.py).
int run_chat_template(const std::vector<std::string>& args, const GlobalOptions&) {
  std::string spec, file;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")(
      "template", po::value(&spec), "chatml, llama3, a .jinja file or a model directory")(
      "conversations", po::value(&file),
      "JSON Lines: {\"messages\": [{\"role\", \"content\"}, ...]} per line");
  po::positional_options_description positional;
  positional.add("template", 1).add("conversations", 1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), values);
  if (values.count("help") != 0 || values.count("template") == 0 ||
      values.count("conversations") == 0) {
    std::cout
        << "Usage: patchbay chat-template TEMPLATE CONVERSATIONS.jsonl\n\n"
           "Renders each conversation with the chat template: one JSON line per conversation with\n"
           "\"text\" (the conversation), \"prompt\" (with the generation prompt) and \"segments\"\n"
           "([text, is_assistant] pairs: which text carries loss in instruction tuning).\n\n"
        << options;
    return values.count("help") != 0 ? kExitOk : kExitUsage;
  }
  po::notify(values);
  const eval::ChatTemplate chat = eval::find_chat_template(spec);
  std::ifstream in(file);
  if (!in) throw Error(ErrorKind::kNotFound, "chat-template: cannot read '" + file + "'");
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = file + ":" + std::to_string(number) + ": ";
    std::vector<eval::ChatMessage> messages;
    try {
      const nlohmann::json conversation = nlohmann::json::parse(line);  // outlives the loop
      for (const nlohmann::json& m : conversation.at("messages"))
        messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
    } catch (const nlohmann::json::exception& e) {
      throw Error(
          ErrorKind::kInvalidArgument,
          where + "expected {\"messages\": [{\"role\", \"content\"}, ...]} (" + e.what() + ")");
    }
    nlohmann::json out;
    try {
      out["text"] = eval::render_chat(chat, messages, false);
      out["prompt"] = eval::render_chat(chat, messages, true);
      try {
        out["segments"] = nlohmann::json::array();
        for (const eval::ChatSegment& s : eval::assistant_segments(chat, messages))
          out["segments"].push_back(nlohmann::json::array({s.text, s.assistant}));
      } catch (const Error&) {
        out["segments"] = nullptr;
      }
    } catch (const Error& e) {
      out = {{"error", e.what()}};
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"chat-template",
                           "Render conversations with a chat template (JSON lines)",
                           run_chat_template});

PATCHBAY_REGISTER_COMMAND({"chat",
                           "Talk with a run's model in its chat template (stdin, streamed replies)",
                           run_chat});

}  // namespace patchbay::cli
