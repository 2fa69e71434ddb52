// A finished job's last evaluation (job_results.hpp).
#include "sweep/job_results.hpp"

#include <cstdio>

#include "run/metrics_log.hpp"

namespace patchbay::sweep {
namespace {

bool recorded_field(const std::string& key) {
  return key == "step" || key == "task_seconds" || key.rfind("val_", 0) == 0 ||
         key.rfind("task.", 0) == 0;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

nlohmann::json final_evaluation(const std::filesystem::path& run_dir) {
  nlohmann::json out = nlohmann::json::object();
  const std::filesystem::path file = run_dir / "metrics.jsonl";
  if (!std::filesystem::exists(file)) return out;
  for (const nlohmann::json& record : run::read_metrics(file)) {
    if (!record.is_object() || !record.contains("val_loss")) continue;
    out = nlohmann::json::object();
    for (const auto& [key, value] : record.items())
      if (value.is_number() && recorded_field(key)) out[key] = value;
  }
  return out;
}

std::string final_evaluation_summary(const nlohmann::json& final) {
  std::string text;
  for (const auto& [key, value] : final.items()) {
    const bool shown =
        key == "val_loss" || key == "val_bpb" ||
        (key.rfind("task.", 0) == 0 && !ends_with(key, "_stderr") && !ends_with(key, ".items"));
    if (!shown || !value.is_number()) continue;
    char number[32];
    std::snprintf(number, sizeof number, "%.4f", value.get<double>());
    text += (text.empty() ? "" : ", ") + key + " " + number;
  }
  return text;
}

}  // namespace patchbay::sweep
