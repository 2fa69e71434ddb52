// A small deterministic training corpus for tokenizer tests: KJV-like verses plus a little
// non-ASCII text, ~60 KB, so trainers find real merges while tests stay fast.
#pragma once

#include <random>
#include <string>
#include <vector>

namespace patchbay_test {

inline std::string small_training_corpus(size_t bytes = 60000) {
  std::mt19937_64 rng(11);
  static const std::vector<std::string> words = {
      "And", "the", "LORD", "said", "unto", "Moses,", "behold", "I", "will", "give", "thee",
      "land;", "of", "Israel.", "children", "God", "him", "them", "which", "shall", "be",
      "héllo", "wörld", "日本語", "123", "don't", "they're", "(selah)", "—", "👋"};
  std::string text;
  int chapter = 1;
  while (text.size() < bytes) {
    text += "\nBook " + std::to_string(chapter++) + "\n\n";
    for (int verse = 1; verse <= 20; ++verse) {
      text += "  " + std::to_string(verse) + " ";
      const size_t count = 5 + rng() % 15;
      for (size_t i = 0; i < count; ++i) {
        text += words[rng() % words.size()];
        text += i + 1 < count ? " " : ".\n";
      }
    }
  }
  return text;
}

}  // namespace patchbay_test
