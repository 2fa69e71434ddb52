// temperature: divides every finite logit by T > 0 (HF TemperatureLogitsWarper; llama.cpp's
// "T <= 0 means greedy" is not copied: greedy is its own selector, and T <= 0 is refused).
#ifndef PATCHBAY_PLUGINS_SAMPLER_BASIC_TEMPERATURE_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_BASIC_TEMPERATURE_HPP_

#include "patchbay/sampler.hpp"

namespace sampler_basic {

class Temperature : public patchbay::Sampler {
 public:
  static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_PROCESSOR;
  Temperature(const patchbay::Host&, const patchbay::ConfigView& config)
      : Temperature(config.get_float("temperature")) {}
  explicit Temperature(double temperature);  // throws patchbay::PluginError
                                             // (PB_STATUS_INVALID_ARGUMENT) unless T > 0
  void apply(std::span<float> logits, std::span<const int32_t> history, size_t prompt_len) override;

 private:
  float temperature_;
};

inline constexpr pb_config_field kTemperatureFields[] = {
    patchbay::Field::real(
        "temperature", "1.0",
        "divide every logit by T; T must be > 0 (argmax decoding is the greedy selector)"),
};
inline constexpr pb_component_descriptor kTemperature =
    patchbay::make_sampler_component<Temperature>(
        "temperature", "1.0.0", "divides logits by a temperature T > 0", kTemperatureFields);

}  // namespace sampler_basic

#endif  // PATCHBAY_PLUGINS_SAMPLER_BASIC_TEMPERATURE_HPP_
