// Statistics that feed-forward layers report (model::ForwardResult::stats, named
// "blocks.<i>.ffn.<name>": MoE expert load, dropped fraction, router entropy, aux losses),
// averaged over several forwards (the micro-batches of a step, the batches of an evaluation),
// written into metrics.jsonl records and summarised in one log line.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace patchbay::train {

class LayerStats {
 public:
  // Adds one forward's statistics (a name seen with another length than before is refused).
  void add(const std::vector<std::pair<std::string, std::vector<float>>>& stats);
  bool empty() const { return sums_.empty(); }
  // name -> element-wise mean over the forwards that reported it.
  std::map<std::string, std::vector<double>> means() const;
  // Adds "<prefix><name>": mean (a number for one value, else an array) to `record`.
  void write_to(nlohmann::json& record, const std::string& prefix = "") const;
  // One compact line over all layers, from the MoE names (others appear only in the JSON):
  //   "moe x4 layers: load max 0.31 min 0.05 | dropped 0.021 | entropy 1.93 | balance 0.0102 | z
  //   0.0007"
  // (load: highest/lowest expert share over all layers; dropped and entropy: mean over layers;
  // balance and z: sum over layers, as they enter the loss). Empty when no layer reports them.
  std::string summary() const;

 private:
  std::map<std::string, std::pair<std::vector<double>, int64_t>> sums_;  // name -> (sum, count)
};

}  // namespace patchbay::train
