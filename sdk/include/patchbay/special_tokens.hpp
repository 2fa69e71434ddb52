// Patchbay SDK, header-only C++ helper for tokenizer authors: splitting text at special-token
// strings ("<|endoftext|>") so a tokenizer can encode ordinary text and specials separately.
// Not part of the ABI.
//
// Matching rule: scanning left to right, at each position the longest special token that
// starts there wins; text between matches is ordinary text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace patchbay {

struct TextSegment {
  std::string_view text;  // ordinary text, or the special token's text
  int special_index = -1;  // index into the special-token list, -1 for ordinary text
};

inline std::vector<TextSegment> split_at_special_tokens(
    std::string_view text, const std::vector<std::string>& specials) {
  std::vector<TextSegment> segments;
  if (specials.empty()) {
    if (!text.empty()) segments.push_back({text, -1});
    return segments;
  }
  // next_at[s]: the next occurrence of special s at or after the scan position (npos when
  // none); refreshed only when the scan passes it, so each special is searched O(matches).
  std::vector<size_t> next_at(specials.size(), 0);
  for (size_t s = 0; s < specials.size(); ++s) {
    next_at[s] = specials[s].empty() ? std::string_view::npos : text.find(specials[s]);
  }
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best_at = std::string_view::npos;
    int best_index = -1;
    for (size_t s = 0; s < specials.size(); ++s) {
      if (next_at[s] != std::string_view::npos && next_at[s] < pos) {
        next_at[s] = text.find(specials[s], pos);
      }
      const size_t at = next_at[s];
      if (at == std::string_view::npos) continue;
      if (at < best_at ||
          (at == best_at && specials[s].size() > specials[static_cast<size_t>(best_index)].size())) {
        best_at = at;
        best_index = static_cast<int>(s);
      }
    }
    if (best_index < 0) break;
    if (best_at > pos) segments.push_back({text.substr(pos, best_at - pos), -1});
    const size_t length = specials[static_cast<size_t>(best_index)].size();
    segments.push_back({text.substr(best_at, length), best_index});
    pos = best_at + length;
  }
  if (pos < text.size()) segments.push_back({text.substr(pos), -1});
  return segments;
}

}  // namespace patchbay
