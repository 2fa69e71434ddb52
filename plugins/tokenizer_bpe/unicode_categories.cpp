// Lookups over the generated general-category runs; see the header.
#include "unicode_categories.hpp"

#include <algorithm>
#include <array>

namespace patchbay_bpe::unicode {
namespace {

constexpr std::array<std::string_view, 30> kNames = {
    "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
    "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"};

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Whether `category` belongs to `property` (already known to be a category name).
bool in_property(GeneralCategory category, std::string_view property) {
  const std::string_view name = category_name(category);
  if (property == "LC" || property == "L&") return name == "Lu" || name == "Ll" || name == "Lt";
  if (property.size() == 1) return name[0] == property[0];
  return name == property;
}

bool is_category_property(std::string_view property) {
  if (property == "LC" || property == "L&") return true;
  if (property.size() == 1)
    return std::string_view("LMNPSZC").find(property[0]) != std::string_view::npos;
  return std::find(kNames.begin(), kNames.end(), property) != kNames.end();
}

}  // namespace

std::string_view category_name(GeneralCategory category) {
  return kNames[static_cast<size_t>(category)];
}

GeneralCategory general_category(uint32_t code_point) {
  if (code_point > kMaxCodePoint) return GeneralCategory::Cn;
  const CategoryRun* begin = kCategoryRuns;
  const CategoryRun* end = kCategoryRuns + kCategoryRunCount;
  // The last run whose first <= code_point (the first run starts at 0).
  const CategoryRun* after = std::upper_bound(
      begin, end, code_point, [](uint32_t cp, const CategoryRun& run) { return cp < run.first; });
  return (after - 1)->category;
}

std::optional<std::vector<CodePointRange>> category_ranges(std::string_view property) {
  if (!is_category_property(property)) return std::nullopt;
  std::vector<CodePointRange> ranges;
  for (size_t i = 0; i < kCategoryRunCount; ++i) {
    if (!in_property(kCategoryRuns[i].category, property)) continue;
    const uint32_t first = kCategoryRuns[i].first;
    const uint32_t last =
        i + 1 < kCategoryRunCount ? kCategoryRuns[i + 1].first - 1 : kMaxCodePoint;
    if (!ranges.empty() && ranges.back().last + 1 == first)
      ranges.back().last = last;  // e.g. Lu then Ll inside \p{L}
    else
      ranges.push_back({first, last});
  }
  return ranges;
}

std::optional<BaselineDelta> delta_since_baseline(std::string_view property) {
  if (!is_category_property(property)) return std::nullopt;
  BaselineDelta delta;
  for (size_t i = 0; i < kChangedSinceBaselineCount; ++i) {
    const ChangedRange& change = kChangedSinceBaseline[i];
    const bool now = in_property(change.now, property);
    const bool before = in_property(change.before, property);
    if (before && !now) delta.any_removed = true;
    if (now && !before) {
      if (!delta.added.empty() && delta.added.back().last + 1 == change.first)
        delta.added.back().last = change.last;
      else
        delta.added.push_back({change.first, change.last});
    }
  }
  return delta;
}

std::vector<CodePointRange> complement(const std::vector<CodePointRange>& ranges) {
  std::vector<CodePointRange> out;
  uint32_t next = 0;
  for (const CodePointRange& r : ranges) {
    if (r.first > next) out.push_back({next, r.first - 1});
    next = r.last + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

}  // namespace patchbay_bpe::unicode
