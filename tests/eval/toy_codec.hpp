// A toy tokenizer for boundary tests: greedy longest match over a fixed vocabulary in which
// a space merges with the letter after it (" a") and "ab" is one token, the two ways a real
// BPE vocabulary makes the context/continuation split matter. 11 tokens (the tiny model's V).
#pragma once

#include <string>
#include <vector>

#include "eval/token_requests.hpp"

namespace eval_test {

inline const std::vector<std::string>& toy_vocab() {
  static const std::vector<std::string> v = {"<eos>", " ",  "a", "b", "c", " a",
                                             " b",    "ab", "x", ":", "\n"};
  return v;
}

inline patchbay::eval::TextCodec toy_codec() {
  patchbay::eval::TextCodec codec;
  codec.encode = [](std::string_view text) {
    std::vector<int32_t> ids;
    size_t i = 0;
    while (i < text.size()) {
      int32_t best = -1;
      size_t best_len = 0;
      for (size_t t = 1; t < toy_vocab().size(); ++t) {
        const std::string& piece = toy_vocab()[t];
        if (piece.size() > best_len && text.substr(i, piece.size()) == piece) {
          best = static_cast<int32_t>(t);
          best_len = piece.size();
        }
      }
      if (best < 0) best = 8, best_len = 1;  // unknown characters read as "x"
      ids.push_back(best);
      i += best_len;
    }
    return ids;
  };
  codec.decode = [](const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += id == 0 ? "" : toy_vocab()[static_cast<size_t>(id)];
    return s;
  };
  codec.prefix_token = 0;
  codec.stop_tokens = {0};
  return codec;
}

}  // namespace eval_test
