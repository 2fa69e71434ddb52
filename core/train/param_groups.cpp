// Parameter groups (rule in param_groups.hpp).
#include "train/param_groups.hpp"

#include <algorithm>

namespace patchbay::train {

bool is_no_decay(std::string_view name, const std::vector<int64_t>& shape,
                 const ParamGroupRule& rule) {
  if (static_cast<int64_t>(shape.size()) < rule.min_decay_ndim) return true;
  for (const std::string& suffix : rule.no_decay_suffixes) {
    if (name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix)
      return true;
  }
  for (const std::string& part : rule.no_decay_substrings) {
    if (name.find(part) != std::string_view::npos) return true;
  }
  return std::find(rule.extra_no_decay.begin(), rule.extra_no_decay.end(), name) !=
         rule.extra_no_decay.end();
}

pb_param_options param_options(std::string_view name, const std::vector<int64_t>& shape,
                               const ParamGroupRule& rule) {
  const bool no_decay = is_no_decay(name, shape, rule);
  return pb_param_options{sizeof(pb_param_options), no_decay ? 0.0 : 1.0, rule.lr_scale,
                          no_decay ? kNoDecayGroup : kDecayGroup};
}

std::vector<pb_param_options> param_groups(const std::vector<ParamShape>& params,
                                           const ParamGroupRule& rule) {
  std::vector<pb_param_options> out;
  out.reserve(params.size());
  for (const ParamShape& p : params) out.push_back(param_options(p.name, p.shape, rule));
  return out;
}

}  // namespace patchbay::train
