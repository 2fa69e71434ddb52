// Edit-distance suggestions; see closest_names.hpp.
#include "config/closest_names.hpp"

#include <algorithm>
#include <cctype>
#include <numeric>

namespace patchbay::config {

size_t edit_distance(std::string_view a, std::string_view b) {
  // One row of the DP table: row[j] = distance(a[0..i), b[0..j)).
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      const size_t replaced = diagonal + (same ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({replaced, row[j] + 1, row[j - 1] + 1});
    }
  }
  return row[b.size()];
}

std::vector<std::string> closest_names(std::string_view name,
                                       const std::vector<std::string>& candidates,
                                       size_t max_results) {
  const size_t threshold = std::max<size_t>(2, name.size() / 3);
  std::vector<std::pair<size_t, std::string>> scored;
  for (const std::string& candidate : candidates) {
    const size_t distance = edit_distance(name, candidate);
    if (distance <= threshold) scored.emplace_back(distance, candidate);
  }
  std::sort(scored.begin(), scored.end());
  scored.erase(std::unique(scored.begin(), scored.end()), scored.end());
  std::vector<std::string> result;
  for (size_t i = 0; i < scored.size() && i < max_results; ++i) result.push_back(scored[i].second);
  return result;
}

std::string quote_alternatives(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += (i + 1 == names.size()) ? " or " : ", ";
    text += "'" + names[i] + "'";
  }
  return text;
}

std::string join_names(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += ", ";
    text += names[i];
  }
  return text;
}

}  // namespace patchbay::config
