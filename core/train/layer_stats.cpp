// Averaging, JSON and the one-line summary of layer statistics; see layer_stats.hpp.
#include "train/layer_stats.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "common/error.hpp"

namespace patchbay::train {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void LayerStats::add(const std::vector<std::pair<std::string, std::vector<float>>>& stats) {
  for (const auto& [name, values] : stats) {
    auto& [sum, count] = sums_[name];
    if (count == 0) sum.assign(values.size(), 0.0);
    if (sum.size() != values.size()) {
      throw Error(ErrorKind::kInternal, "layer statistic '" + name + "' changed length from " +
                                            std::to_string(sum.size()) + " to " +
                                            std::to_string(values.size()));
    }
    for (size_t i = 0; i < values.size(); ++i) sum[i] += values[i];
    ++count;
  }
}

std::map<std::string, std::vector<double>> LayerStats::means() const {
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, entry] : sums_) {
    std::vector<double> mean = entry.first;
    for (double& v : mean) v /= static_cast<double>(entry.second);
    out[name] = std::move(mean);
  }
  return out;
}

void LayerStats::write_to(nlohmann::json& record, const std::string& prefix) const {
  for (const auto& [name, mean] : means()) {
    record[prefix + name] = mean.size() == 1 ? nlohmann::json(mean[0]) : nlohmann::json(mean);
  }
}

std::string LayerStats::summary() const {
  double load_max = 0, load_min = std::numeric_limits<double>::infinity();
  double dropped = 0, entropy = 0, balance = 0, z = 0;
  int64_t layers = 0, dropped_n = 0, entropy_n = 0;
  for (const auto& [name, mean] : means()) {
    if (ends_with(name, ".expert_load")) {
      ++layers;
      for (double v : mean) {
        load_max = std::max(load_max, v);
        load_min = std::min(load_min, v);
      }
    } else if (ends_with(name, ".dropped_fraction") && !mean.empty()) {
      dropped += mean[0];
      ++dropped_n;
    } else if (ends_with(name, ".router_entropy") && !mean.empty()) {
      entropy += mean[0];
      ++entropy_n;
    } else if (ends_with(name, ".balance_loss") && !mean.empty()) {
      balance += mean[0];
    } else if (ends_with(name, ".z_loss") && !mean.empty()) {
      z += mean[0];
    }
  }
  if (layers == 0) return "";
  char line[256];
  std::snprintf(line, sizeof line,
                "moe x%lld layers: load max %.3f min %.3f | dropped %.4f | entropy %.3f | balance "
                "%.5f | z %.5f",
                static_cast<long long>(layers), load_max, load_min,
                dropped_n > 0 ? dropped / static_cast<double>(dropped_n) : 0.0,
                entropy_n > 0 ? entropy / static_cast<double>(entropy_n) : 0.0, balance, z);
  return line;
}

}  // namespace patchbay::train
