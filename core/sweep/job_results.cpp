// A finished job's last evaluation (job_results.hpp).
#include "sweep/job_results.hpp"

#include <cstdint>
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
  double speed_sum = 0;
  int64_t speeds = 0;
  bool first_speed = true;
  for (const nlohmann::json& record : run::read_metrics(file)) {
    if (!record.is_object()) continue;
    if (record.contains("tokens_per_second") && record["tokens_per_second"].is_number()) {
      // The first window pays the warm-up (as patchbay compare reads it): left out.
      if (!first_speed) speed_sum += record["tokens_per_second"].get<double>(), ++speeds;
      first_speed = false;
    }
    if (!record.contains("val_loss")) continue;
    out = nlohmann::json::object();
    for (const auto& [key, value] : record.items())
      if (value.is_number() && recorded_field(key)) out[key] = value;
  }
  if (!out.empty() && speeds > 0) out["tokens_per_second"] = speed_sum / double(speeds);
  return out;
}

std::string final_evaluation_summary(const nlohmann::json& final) {
  std::string text;
  for (const auto& [key, value] : final.items()) {
    const bool speed = key == "tokens_per_second";
    const bool shown =
        key == "val_loss" || key == "val_bpb" || speed ||
        (key.rfind("task.", 0) == 0 && !ends_with(key, "_stderr") && !ends_with(key, ".items"));
    if (!shown || !value.is_number()) continue;
    char number[32];
    std::snprintf(number, sizeof number, speed ? "%.0f" : "%.4f", value.get<double>());
    text += (text.empty() ? "" : ", ") + (speed ? std::string("tokens/s") : key) + " " + number;
  }
  return text;
}

}  // namespace patchbay::sweep
