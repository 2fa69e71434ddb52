// Block layouts of the Sparse Transformer patterns (see sparse_patterns.hpp for the sets).
#include "sparse_patterns.hpp"

#include <patchbay/component.hpp>

namespace patchbay_sparse {

Pattern parse_pattern(const std::string& name) {
  if (name == "strided") return Pattern::strided;
  if (name == "fixed") return Pattern::fixed;
  if (name == "local") return Pattern::local;
  throw patchbay::PluginError(
      PB_STATUS_INVALID_ARGUMENT,
      "mode must be \"strided\", \"fixed\" or \"local\", found \"" + name + "\"");
}

Combine parse_combine(const std::string& name) {
  if (name == "union") return Combine::union_of_sets;
  if (name == "heads") return Combine::separate_heads;
  if (name == "alternate") return Combine::alternate_layers;
  throw patchbay::PluginError(
      PB_STATUS_INVALID_ARGUMENT,
      "combine must be \"union\", \"heads\" or \"alternate\", found \"" + name + "\"");
}

std::string pattern_spec_error(const PatternSpec& s) {
  if (s.block_size < 1) return "block_size must be >= 1, found " + std::to_string(s.block_size);
  if (s.stride < s.block_size || s.stride % s.block_size != 0)
    return "stride (" + std::to_string(s.stride) + ") must be a positive multiple of block_size (" +
           std::to_string(s.block_size) + ")";
  if (s.pattern == Pattern::fixed &&
      (s.summary < s.block_size || s.summary % s.block_size != 0 || s.summary > s.stride))
    return "summary (" + std::to_string(s.summary) +
           ") must be a positive multiple of block_size (" + std::to_string(s.block_size) +
           ") and at most stride (" + std::to_string(s.stride) + ")";
  return {};
}

int set_of_head(const PatternSpec& s, int64_t layer_index, int64_t head) {
  if (s.pattern == Pattern::local) return 0;
  switch (s.combine) {
    case Combine::union_of_sets:
      return 2;
    case Combine::separate_heads:
      return static_cast<int>(head % 2);
    case Combine::alternate_layers:
      return static_cast<int>(layer_index % 2);
  }
  return 2;
}

bool block_allowed(const PatternSpec& s, int set, int64_t qb, int64_t kb) {
  if (kb > qb) return false;
  const int64_t l = s.stride / s.block_size;
  bool a1 = false, a2 = false;
  if (s.pattern == Pattern::fixed) {
    const int64_t c = s.summary / s.block_size;
    a1 = kb / l == qb / l;
    a2 = kb % l >= l - c;
  } else {
    a1 = qb - kb <= l;
    a2 = s.pattern == Pattern::strided && (qb - kb) % l == 0;
  }
  return set == 0 ? a1 : set == 1 ? a2 : (a1 || a2);
}

std::vector<int32_t> build_layout(const PatternSpec& s, int64_t layer_index, int64_t heads,
                                  int64_t length) {
  const int64_t nb = (length + s.block_size - 1) / s.block_size;
  std::vector<int32_t> layout(static_cast<size_t>(heads * nb * nb), 0);
  for (int64_t h = 0; h < heads; ++h) {
    const int set = set_of_head(s, layer_index, h);
    for (int64_t qb = 0; qb < nb; ++qb)
      for (int64_t kb = 0; kb <= qb; ++kb)
        layout[static_cast<size_t>((h * nb + qb) * nb + kb)] = block_allowed(s, set, qb, kb);
  }
  return layout;
}

std::vector<int64_t> allowed_keys(const PatternSpec& s, int set, int64_t i) {
  std::vector<int64_t> keys;
  for (int64_t j = 0; j <= i; ++j)
    if (block_allowed(s, set, i / s.block_size, j / s.block_size)) keys.push_back(j);
  return keys;
}

}  // namespace patchbay_sparse
