// Parameter groups: which parameters get weight decay, as pb_param_options for the optimizer.
//
// Default rule (GPT-2 / nanoGPT practice, the lead's "no weight decay on biases and norm
// gains"): a parameter goes to group "no_decay" (weight_decay_scale 0) when
//   - it has fewer than 2 dims (biases, norm gains and biases, scalars), or
//   - its name ends with ".bias", or
//   - its name contains "norm" (norm1.gain, norm_f.gain, ... whatever their shape);
// every other parameter — every 2-D or larger weight, token and position embeddings included
// (as nanoGPT: all 2-D weights decay) — goes to "decay" (weight_decay_scale 1). The decay
// coefficient itself is the optimizer component's `weight_decay` key; groups only scale it.
// A researcher who wants embeddings undecayed adds their names to extra_no_decay.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "patchbay/optimizer.h"

namespace patchbay::train {

struct ParamGroupRule {
  int64_t min_decay_ndim = 2;  // fewer dims: no decay
  std::vector<std::string> no_decay_suffixes = {".bias"};
  std::vector<std::string> no_decay_substrings = {"norm"};
  std::vector<std::string> extra_no_decay;  // exact names, e.g. {"wte.weight"}
  double lr_scale = 1.0;                    // for every parameter
};

inline constexpr const char* kDecayGroup = "decay";
inline constexpr const char* kNoDecayGroup = "no_decay";

// True when `rule` exempts the parameter from weight decay.
bool is_no_decay(std::string_view name, const std::vector<int64_t>& shape,
                 const ParamGroupRule& rule = {});

// The options of one parameter: struct_size set, group a static string ("decay" / "no_decay").
pb_param_options param_options(std::string_view name, const std::vector<int64_t>& shape,
                               const ParamGroupRule& rule = {});

struct ParamShape {
  std::string name;
  std::vector<int64_t> shape;
};
// param_options for each parameter, in order.
std::vector<pb_param_options> param_groups(const std::vector<ParamShape>& params,
                                           const ParamGroupRule& rule = {});

}  // namespace patchbay::train
