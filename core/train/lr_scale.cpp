// Per-parameter learning-rate factors; see lr_scale.hpp.
#include "train/lr_scale.hpp"

#include <cmath>
#include <cstdlib>
#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "train/fine_tuning.hpp"

namespace patchbay::train {

namespace {

constexpr const char* kKey = "train.lr_scale";

[[noreturn]] void refuse_entry(const std::string& entry, const std::string& found) {
  throw Error(ErrorKind::kInvalidArgument,
              std::string(kKey) + ": expected entries \"PATTERN=FACTOR\" with FACTOR a number > 0 "
                  "(e.g. \"*relative_bias=10\"), found \"" + entry + "\" (" + found +
                  "). To stop a parameter training, use train.freeze");
}

}  // namespace

std::vector<LrScale> parse_lr_scales(const std::vector<std::string>& entries) {
  std::vector<LrScale> scales;
  for (const std::string& entry : entries) {
    const size_t eq = entry.rfind('=');
    if (eq == std::string::npos) refuse_entry(entry, "no '='");
    LrScale scale;
    scale.pattern = entry.substr(0, eq);
    if (scale.pattern.empty()) refuse_entry(entry, "an empty pattern");
    const std::string number = entry.substr(eq + 1);
    char* end = nullptr;
    scale.factor = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size())
      refuse_entry(entry, "'" + number + "' is not a number");
    if (!std::isfinite(scale.factor) || scale.factor <= 0)
      refuse_entry(entry, "the factor " + number + " is not a finite number > 0");
    scales.push_back(scale);
  }
  return scales;
}

std::vector<double> lr_scale_per_parameter(const std::vector<LrScale>& scales,
                                           const std::vector<model::NamedParameter>& parameters) {
  std::vector<double> factors(parameters.size(), 1.0);
  std::vector<const LrScale*> chosen_by(parameters.size(), nullptr);
  for (const LrScale& scale : scales) {
    names_matching({scale.pattern}, parameters, kKey);  // refuses a pattern selecting nothing
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (!name_matches(scale.pattern, parameters[i].name)) continue;
      if (chosen_by[i] != nullptr)
        throw Error(ErrorKind::kInvalidArgument,
                    std::string(kKey) + ": the parameter " + parameters[i].name +
                        " is selected by both '" + chosen_by[i]->pattern + "' and '" +
                        scale.pattern + "'; make the patterns select disjoint parameters");
      chosen_by[i] = &scale;
      factors[i] = scale.factor;
      spdlog::info("{}: {} trains at {} x lr", kKey, parameters[i].name, scale.factor);
    }
  }
  return factors;
}

}  // namespace patchbay::train
