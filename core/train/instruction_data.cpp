// Reading, tokenising, fitting and batching instruction data; see instruction_data.hpp.
#include "train/instruction_data.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "train/objective.hpp"

namespace patchbay::train {
namespace {

using json = nlohmann::json;

[[noreturn]] void refuse(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, where + ": " + what);
}

std::string keys_of(const json& object) {
  std::string keys;
  for (const auto& [k, unused] : object.items()) keys += (keys.empty() ? "\"" : ", \"") + k + "\"";
  return keys.empty() ? "none" : keys;
}

const std::string& string_field(const json& object, const char* key, const std::string& where,
                                const std::string& what) {
  if (!object.contains(key) || !object.at(key).is_string())
    refuse(where, what + " needs a string \"" + key + "\", found " +
                      (object.contains(key) ? std::string(object.at(key).type_name())
                                            : std::string("none")));
  return object.at(key).get_ref<const std::string&>();
}

Conversation parse_line(const json& line, const std::string& where) {
  const std::string expected =
      "expected {\"messages\": [{\"role\": \"user\", \"content\": \"...\"}, ...]} or {\"prompt\": "
      "\"...\", "
      "\"response\": \"...\"}";
  if (!line.is_object()) refuse(where, expected + ", found a JSON " + line.type_name());
  Conversation conversation{{}, where};
  if (line.contains("messages")) {
    const json& messages = line.at("messages");
    if (!messages.is_array() || messages.empty())
      refuse(where, "\"messages\" must be a non-empty list of {\"role\", \"content\"}");
    for (size_t i = 0; i < messages.size(); ++i) {
      const std::string which = "message " + std::to_string(i + 1);
      if (!messages[i].is_object())
        refuse(where, which + " is not an object {\"role\", \"content\"}");
      const std::string& role = string_field(messages[i], "role", where, which);
      if (!eval::is_chat_role(role))
        refuse(where, which + " has role \"" + role +
                          "\"; expected \"system\", \"user\" or \"assistant\"");
      conversation.messages.push_back({role, string_field(messages[i], "content", where, which)});
    }
  } else if (line.contains("prompt") || line.contains("response")) {
    conversation.messages.push_back(
        {"user", string_field(line, "prompt", where, "a prompt/response line")});
    conversation.messages.push_back(
        {"assistant", string_field(line, "response", where, "a prompt/response line")});
  } else {
    refuse(where, expected + "; the line has keys " + keys_of(line));
  }
  bool answered = false;
  for (const eval::ChatMessage& m : conversation.messages)
    answered = answered || m.role == "assistant";
  if (!answered)
    refuse(where, "the conversation has no assistant message, so no token would carry loss");
  return conversation;
}

}  // namespace

std::vector<Conversation> read_conversations(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw Error(ErrorKind::kNotFound, "cannot read the instruction data '" + file.string() +
                                          "' (a JSON Lines file was expected)");
  std::vector<Conversation> conversations;
  std::string text;
  for (int64_t number = 1; std::getline(in, text); ++number) {
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = file.string() + ":" + std::to_string(number);
    json line;
    try {
      line = json::parse(text);
    } catch (const json::exception& e) {
      refuse(where, std::string("not a JSON value (") + e.what() + ")");
    }
    conversations.push_back(parse_line(line, where));
  }
  if (conversations.empty())
    throw Error(ErrorKind::kInvalidArgument,
                file.string() + " holds no conversations (one JSON object per line)");
  return conversations;
}

InstructionExample tokenize_conversation(const Conversation& conversation,
                                         const eval::ChatTemplate& chat,
                                         const runtime::TokenizerHandle& tokenizer) {
  std::vector<eval::ChatSegment> segments;
  try {
    segments = eval::assistant_segments(chat, conversation.messages);
  } catch (const Error& e) {
    refuse(conversation.where, std::string("the chat template ") + chat.name +
                                   " cannot render this conversation: " + e.what());
  }
  InstructionExample example{{}, {}, conversation.where};
  for (const eval::ChatSegment& segment : segments) {
    const std::vector<int32_t> ids = tokenizer.encode(segment.text, /*allow_special=*/true);
    example.ids.insert(example.ids.end(), ids.begin(), ids.end());
    example.assistant.insert(example.assistant.end(), ids.size(), segment.assistant ? 1 : 0);
  }
  return example;
}

InstructionSet fit_to_context(std::vector<InstructionExample> examples, int64_t seq_len,
                              Overlong rule) {
  InstructionSet set;
  set.read = static_cast<int64_t>(examples.size());
  const size_t limit = static_cast<size_t>(seq_len + 1);
  for (InstructionExample& example : examples) {
    if (example.ids.size() > limit) {
      if (rule == Overlong::kRefuse)
        refuse(example.where,
               "the conversation is " + std::to_string(example.ids.size()) +
                   " tokens, longer than train.seq_len + 1 = " + std::to_string(limit) +
                   "; raise train.seq_len (within model.context_length), shorten it, or set "
                   "train.sft.overlong = \"truncate\"");
      ++set.truncated;
      set.ids_cut += static_cast<int64_t>(example.ids.size() - limit);
      example.ids.resize(limit);
      example.assistant.resize(limit);
    }
    // A target carries loss at t >= 1 (the first id is never a target).
    bool any = false;
    for (size_t t = 1; t < example.assistant.size(); ++t) any = any || example.assistant[t] != 0;
    if (!any) {
      ++set.dropped;
      continue;
    }
    set.examples.push_back(std::move(example));
  }
  return set;
}

Batch instruction_batch(const std::vector<const InstructionExample*>& rows, int64_t seq_len,
                        int32_t pad_id) {
  const int64_t n = static_cast<int64_t>(rows.size());
  std::vector<int32_t> inputs(static_cast<size_t>(n * seq_len), pad_id);
  std::vector<int32_t> targets(static_cast<size_t>(n * seq_len),
                               static_cast<int32_t>(kIgnoreTarget));
  for (int64_t r = 0; r < n; ++r) {
    const InstructionExample* example = rows[static_cast<size_t>(r)];
    if (example == nullptr) continue;
    const int64_t length =
        std::min<int64_t>(static_cast<int64_t>(example->ids.size()), seq_len + 1);
    for (int64_t t = 0; t + 1 <= length && t < seq_len; ++t) {
      inputs[static_cast<size_t>(r * seq_len + t)] = example->ids[static_cast<size_t>(t)];
      if (t + 1 < length && example->assistant[static_cast<size_t>(t + 1)] != 0)
        targets[static_cast<size_t>(r * seq_len + t)] = example->ids[static_cast<size_t>(t + 1)];
    }
  }
  return Batch{engine::Tensor::from_data(inputs.data(), {n, seq_len}, engine::DType::kI32),
               engine::Tensor::from_data(targets.data(), {n, seq_len}, engine::DType::kI32)};
}

}  // namespace patchbay::train
