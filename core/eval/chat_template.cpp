// Chat templates: built-ins, finding a model's own, rendering and assistant spans; see
// chat_template.hpp.
#include "eval/chat_template.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.hpp"
#include "eval/jinja_template.hpp"

namespace patchbay::eval {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ChatML as SmolLM2, Qwen and others write it, without a default system message.
constexpr const char* kChatMl =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}"
    "{% endif %}";

// Meta-Llama-3-8B-Instruct's tokenizer_config.json chat_template, verbatim.
constexpr const char* kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
    "trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant"
    "<|end_header_id|>\\n\\n' }}{% endif %}";

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw Error(ErrorKind::kNotFound, "cannot read the chat template file '" + file.string() + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A special token as tokenizer_config.json writes it: a string or {"content": ...}.
std::string token_text(const json& config, const char* key) {
  if (!config.contains(key)) return "";
  const json& v = config.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v.at("content").is_string())
    return v.at("content").get<std::string>();
  return "";
}

json read_json(const fs::path& file) {
  try {
    return json::parse(read_file(file));
  } catch (const json::exception& e) {
    throw Error(ErrorKind::kInvalidArgument, file.string() + " is not valid JSON: " + e.what());
  }
}

// tokenizer_config.json's "chat_template": a string, or a list of {name, template} (the
// "default" one, else the first).
std::string config_template(const json& config) {
  if (!config.contains("chat_template")) return "";
  const json& t = config.at("chat_template");
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array() && !t.empty()) {
    for (const json& entry : t)
      if (entry.value("name", "") == "default") return entry.value("template", "");
    return t.front().value("template", "");
  }
  return "";
}

ChatTemplate from_tokenizer_config(const fs::path& file) {
  const json config = read_json(file);
  ChatTemplate chat{file.string(), config_template(config), token_text(config, "bos_token"),
                    token_text(config, "eos_token")};
  if (chat.source.empty())
    throw Error(ErrorKind::kInvalidArgument, file.string() +
                                                 " has no \"chat_template\"; name a built-in "
                                                 "template instead (chatml or llama3)");
  return chat;
}

ChatTemplate from_directory(const fs::path& dir) {
  if (fs::is_regular_file(dir / "chat_template.jinja")) {
    ChatTemplate chat{(dir / "chat_template.jinja").string(),
                      read_file(dir / "chat_template.jinja"), "", ""};
    if (fs::is_regular_file(dir / "imported_model.json")) {  // patchbay import of a GGUF file
      const json info = read_json(dir / "imported_model.json");
      for (auto [key, slot] :
           {std::pair{"bos_token", &chat.bos_token}, std::pair{"eos_token", &chat.eos_token}})
        if (info.contains(key) && info.at(key).contains("text"))
          *slot = info.at(key).at("text").get<std::string>();
    } else if (fs::is_regular_file(dir / "tokenizer_config.json")) {
      const json config = read_json(dir / "tokenizer_config.json");
      chat.bos_token = token_text(config, "bos_token");
      chat.eos_token = token_text(config, "eos_token");
    }
    return chat;
  }
  if (fs::is_regular_file(dir / "tokenizer_config.json"))
    return from_tokenizer_config(dir / "tokenizer_config.json");
  throw Error(ErrorKind::kNotFound,
              dir.string() +
                  " holds no chat template (looked for chat_template.jinja and "
                  "tokenizer_config.json); name a built-in template instead (chatml or llama3)");
}

json messages_json(const std::vector<ChatMessage>& messages) {
  json list = json::array();
  for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  return list;
}

std::string excerpt(const std::string& text) {
  std::string shown = text.size() > 60 ? "..." + text.substr(text.size() - 60) : text;
  for (char& c : shown)
    if (c == '\n') c = ' ';
  return "\"" + shown + "\"";
}

}  // namespace

bool is_chat_role(const std::string& role) {
  return role == "system" || role == "user" || role == "assistant";
}

ChatTemplate builtin_chat_template(const std::string& name) {
  if (name == "chatml") return {"chatml", kChatMl, "", "<|im_end|>"};
  if (name == "llama3") return {"llama3", kLlama3, "<|begin_of_text|>", "<|eot_id|>"};
  throw Error(
      ErrorKind::kInvalidArgument,
      "'" + name +
          "' is not a built-in chat template (built-ins: chatml, llama3), nor a file or directory");
}

bool directory_has_chat_template(const fs::path& dir) {
  if (fs::is_regular_file(dir / "chat_template.jinja")) return true;
  if (!fs::is_regular_file(dir / "tokenizer_config.json")) return false;
  try {
    return !config_template(read_json(dir / "tokenizer_config.json")).empty();
  } catch (const Error&) {
    return false;
  }
}

ChatTemplate find_chat_template(const std::string& spec) {
  if (spec == "chatml" || spec == "llama3") return builtin_chat_template(spec);
  const fs::path path(spec);
  if (fs::is_directory(path)) return from_directory(path);
  if (fs::is_regular_file(path)) {
    if (path.filename() == "tokenizer_config.json") return from_tokenizer_config(path);
    return ChatTemplate{path.string(), read_file(path), "", ""};
  }
  return builtin_chat_template(spec);  // refuses, listing the built-ins
}

std::string render_chat(const ChatTemplate& chat, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt) {
  const json variables = {{"messages", messages_json(messages)},
                          {"add_generation_prompt", add_generation_prompt},
                          {"bos_token", chat.bos_token},
                          {"eos_token", chat.eos_token}};
  return render_jinja(chat.source, variables).text;
}

std::vector<ChatSegment> assistant_segments(const ChatTemplate& chat,
                                            const std::vector<ChatMessage>& messages) {
  const std::string whole = render_chat(chat, messages, false);
  std::vector<ChatSegment> segments;
  size_t done = 0;  // bytes of `whole` already in segments
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != "assistant") continue;
    const std::vector<ChatMessage> before(messages.begin(),
                                          messages.begin() + static_cast<std::ptrdiff_t>(i));
    const std::vector<ChatMessage> upto(messages.begin(),
                                        messages.begin() + static_cast<std::ptrdiff_t>(i + 1));
    const std::string prompt = render_chat(chat, before, true);
    const std::string turn = render_chat(chat, upto, false);
    const std::string where = "assistant message " + std::to_string(i + 1) + " (of " +
                              std::to_string(messages.size()) + ") with template " + chat.name +
                              ": ";
    if (turn.compare(0, prompt.size(), prompt) != 0 || prompt.size() < done)
      throw Error(ErrorKind::kInvalidArgument,
                  where +
                      "the conversation up to it does not begin with the text the template renders "
                      "to prompt "
                      "for it (" +
                      excerpt(prompt) + "), so the assistant's span cannot be told apart");
    if (whole.compare(0, turn.size(), turn) != 0)
      throw Error(
          ErrorKind::kInvalidArgument,
          where +
              "the template renders the earlier turns differently once later messages follow, so "
              "the prefix rendering is not a prefix of the whole conversation's; use a template "
              "that "
              "renders every turn the same way (chatml, llama3)");
    if (prompt.size() > done) segments.push_back({whole.substr(done, prompt.size() - done), false});
    segments.push_back({whole.substr(prompt.size(), turn.size() - prompt.size()), true});
    done = turn.size();
  }
  if (whole.size() > done) segments.push_back({whole.substr(done), false});
  return segments;
}

std::vector<std::string> chat_stop_strings(const ChatTemplate& chat) {
  const std::string marker = "\x01patchbay-end-of-turn\x01";
  const std::string text = render_chat(chat, {{"user", "u"}, {"assistant", marker}}, false);
  std::vector<std::string> stops;
  const size_t at = text.find(marker);
  if (at != std::string::npos) {
    std::string after = text.substr(at + marker.size());
    const size_t begin = after.find_first_not_of(" \t\r\n");
    const size_t end = after.find_last_not_of(" \t\r\n");
    if (begin != std::string::npos) stops.push_back(after.substr(begin, end - begin + 1));
  }
  if (!chat.eos_token.empty() && (stops.empty() || stops.front() != chat.eos_token))
    stops.push_back(chat.eos_token);
  return stops;
}

}  // namespace patchbay::eval
