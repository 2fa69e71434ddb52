// Rotary frequencies (plain and LLaMA 3.1-scaled) and rotary embedding by a frequency list;
// see rotary_frequencies.hpp.
#include "rotary_frequencies.hpp"

#include <cmath>
#include <numbers>
#include <patchbay/component.hpp>

namespace patchbay_dense {

std::vector<double> rope_frequencies(int64_t head_dim, double theta, const RopeScaling& scaling) {
  std::vector<double> f(static_cast<size_t>(head_dim / 2));
  for (size_t i = 0; i < f.size(); ++i)
    f[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  if (scaling.type == "none") return f;
  if (scaling.type != "llama3")
    throw patchbay::PluginError(
        PB_STATUS_INVALID_ARGUMENT,
        "rope_scaling must be \"none\" or \"llama3\", found \"" + scaling.type + "\"");
  if (!(scaling.high_freq_factor > scaling.low_freq_factor))
    throw patchbay::PluginError(
        PB_STATUS_INVALID_ARGUMENT,
        "rope_scaling = \"llama3\" needs rope_high_freq_factor > rope_low_freq_factor, found " +
            std::to_string(scaling.high_freq_factor) + " and " +
            std::to_string(scaling.low_freq_factor));
  const auto context = static_cast<double>(scaling.original_context);
  const double low_wavelength = context / scaling.low_freq_factor;
  const double high_wavelength = context / scaling.high_freq_factor;
  for (double& frequency : f) {
    const double wavelength = 2.0 * std::numbers::pi / frequency;
    if (wavelength > low_wavelength) {
      frequency /= scaling.factor;
    } else if (wavelength >= high_wavelength) {
      const double smooth = (context / wavelength - scaling.low_freq_factor) /
                            (scaling.high_freq_factor - scaling.low_freq_factor);
      frequency = (1.0 - smooth) * frequency / scaling.factor + smooth * frequency;
    }
  }
  return f;
}

patchbay::Tensor rotary_with_frequencies(const patchbay::Ops& ops, const patchbay::Tensor& x,
                                         int64_t position_offset,
                                         const std::vector<double>& frequencies,
                                         pb_device_type device_type, int32_t device_index) {
  const int64_t t = x.size(x.dim() - 2), d = x.size(x.dim() - 1), half = d / 2;
  if (half != static_cast<int64_t>(frequencies.size()))
    throw patchbay::PluginError(PB_STATUS_INTERNAL,
                                "rotary: head dim " + std::to_string(d) + " does not match " +
                                    std::to_string(frequencies.size()) + " frequencies");
  std::vector<float> cos_table(static_cast<size_t>(t * half)), sin_table(cos_table.size());
  for (int64_t p = 0; p < t; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(position_offset + p) * frequencies[static_cast<size_t>(i)];
      cos_table[static_cast<size_t>(p * half + i)] = static_cast<float>(std::cos(angle));
      sin_table[static_cast<size_t>(p * half + i)] = static_cast<float>(std::sin(angle));
    }
  const pb_dtype dtype = x.dtype();
  const patchbay::Tensor cos = patchbay::to_device(  // [T, D/2]
      ops.from_vector(cos_table, {t, half}).to(dtype), device_type, device_index);
  const patchbay::Tensor sin = patchbay::to_device(ops.from_vector(sin_table, {t, half}).to(dtype),
                                                   device_type, device_index);
  const int64_t last = x.dim() - 1;
  const patchbay::Tensor x1 = x.slice(last, 0, half), x2 = x.slice(last, half, d);
  return ops.concat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, last);
}

patchbay::Tensor rotary_at_positions(const patchbay::Ops& ops, const patchbay::Tensor& x,
                                     const std::vector<int64_t>& positions,
                                     const std::vector<double>& frequencies,
                                     pb_device_type device_type, int32_t device_index) {
  const int64_t b = x.size(0), t = x.size(2), d = x.size(3), half = d / 2;
  if (x.dim() != 4 || half != static_cast<int64_t>(frequencies.size()) ||
      static_cast<int64_t>(positions.size()) != b * t)
    throw patchbay::PluginError(
        PB_STATUS_INTERNAL,
        "rotary at positions: x [B, H, T, D] with D/2 = " + std::to_string(frequencies.size()) +
            " and " + std::to_string(positions.size()) + " positions expected");
  std::vector<float> cos_table(static_cast<size_t>(b * t * half)), sin_table(cos_table.size());
  for (int64_t row = 0; row < b * t; ++row)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(positions[static_cast<size_t>(row)]) *
                           frequencies[static_cast<size_t>(i)];
      cos_table[static_cast<size_t>(row * half + i)] = static_cast<float>(std::cos(angle));
      sin_table[static_cast<size_t>(row * half + i)] = static_cast<float>(std::sin(angle));
    }
  const pb_dtype dtype = x.dtype();
  const patchbay::Tensor cos = patchbay::to_device(  // [B, 1, T, D/2], broadcast over heads
      ops.from_vector(cos_table, {b, 1, t, half}).to(dtype), device_type, device_index);
  const patchbay::Tensor sin = patchbay::to_device(
      ops.from_vector(sin_table, {b, 1, t, half}).to(dtype), device_type, device_index);
  const patchbay::Tensor x1 = x.slice(3, 0, half), x2 = x.slice(3, half, d);
  return ops.concat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, 3);
}

}  // namespace patchbay_dense
