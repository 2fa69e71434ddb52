// Instruction data for the "sft" tests: conversations "what is N plus one?" -> "N+1 = M."
// (a system message and a second turn every third one) in chat.jsonl, and the tiny corpus
// with them interleaved, so the character tokenizer trained on it knows every character.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "train_fixture.hpp"

namespace patchbay::train::testing {

// Conversations "what is N plus one?" -> "N+1 = M." (two turns every third line).
inline std::string conversation_line(int i) {
  const std::string n = std::to_string(i % 10), m = std::to_string(i % 10 + 1);
  nlohmann::json messages = nlohmann::json::array();
  if (i % 3 == 0) messages.push_back({{"role", "system"}, {"content", "Be brief."}});
  messages.push_back({{"role", "user"}, {"content", "what is " + n + " plus one?"}});
  messages.push_back({{"role", "assistant"}, {"content", n + "+1 = " + m + "."}});
  if (i % 3 == 0) {
    messages.push_back({{"role", "user"}, {"content", "and twice " + n + "?"}});
    messages.push_back({{"role", "assistant"}, {"content", std::to_string(2 * (i % 10)) + "."}});
  }
  return nlohmann::json{{"messages", messages}}.dump();
}

// The tiny corpus's sentences with a conversation after every 13th (the tokenizer is trained
// on the corpus's training split, so every character of the conversations must be spread over
// it); chat.jsonl holds the 120 conversations.
inline void write_chat_data(const std::filesystem::path& folder) {
  const std::string subjects[] = {"the cat", "a dog", "the bird", "my fish"};
  const std::string verbs[] = {"sat on", "ran to", "looked at", "slept by"};
  const std::string objects[] = {"the mat.", "the door.", "a tree.", "the river."};
  std::ofstream corpus(folder / "corpus.txt"), chat(folder / "chat.jsonl");
  for (int i = 0; i < 1600; ++i) {
    corpus << subjects[i % 4] << " " << verbs[(i / 4) % 4] << " " << objects[(i / 16) % 4] << "\n";
    if (i % 13 == 0)
      corpus << conversation_line(i / 13) << " system user assistant yo hi ok k S <|_>\n";
  }
  for (int i = 0; i < 120; ++i) chat << conversation_line(i) << "\n";
}

}  // namespace patchbay::train::testing
