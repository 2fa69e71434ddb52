// Per-parameter learning-rate factors: `[train] lr_scale = ["PATTERN=FACTOR", ...]`.
//
// A parameter whose name one entry's pattern selects trains at lr * FACTOR (the schedule's lr
// of each step, times the factor); every other parameter at lr. Patterns are those of
// `[train] freeze` (fine_tuning.hpp: '*', '?', "0-3", a pattern may stop at a dot).
// Why: a few parameters need more than Adam's per-step bound of about lr to reach their
// working range in a short run — T5's relative position bias is a handful of scalars that must
// grow to several nats before an attention head can single out one offset (a table initialised
// near 0 moves at most ~lr per step under Adam), as a muP-style embedding factor does for
// embeddings. The optimizer sees the factor as pb_param_options.lr_scale.
//
// Checked when the run is built: an entry that is not PATTERN=FACTOR, a factor that is not a
// finite number > 0 (use `freeze` to stop a parameter), a pattern that selects no parameter
// (the error lists the model's names), and a parameter that two entries select.
#pragma once

#include <string>
#include <vector>

#include "model/language_model.hpp"

namespace patchbay::train {

struct LrScale {
  std::string pattern;  // a parameter name pattern (fine_tuning.hpp name_matches)
  double factor = 1.0;  // > 0
};

// Parses the entries of `[train] lr_scale`. Throws Error(kInvalidArgument) naming the entry.
std::vector<LrScale> parse_lr_scales(const std::vector<std::string>& entries);

// The factor of each parameter, in parameter order (1 where no entry selects it). Throws
// Error(kInvalidArgument) for a pattern selecting nothing or a parameter selected twice.
std::vector<double> lr_scale_per_parameter(const std::vector<LrScale>& scales,
                                           const std::vector<model::NamedParameter>& parameters);

}  // namespace patchbay::train
