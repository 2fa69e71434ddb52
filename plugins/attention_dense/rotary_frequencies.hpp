// Rotary frequencies with optional LLaMA 3.1 scaling, and rotary embedding by an explicit
// frequency list (the host's rotary op takes one theta and computes theta^(-2i/D) itself).
//
// rope_frequencies(D, theta, scaling)[i] = theta^(-2i/D) for i in [0, D/2) ("none"), or, for
// "llama3" (transformers' _compute_llama3_parameters): with wavelength w = 2 pi / f,
// low = original_context / low_freq_factor, high = original_context / high_freq_factor:
//   w > low          -> f / factor          (long wavelengths stretched)
//   w < high         -> f                   (short wavelengths kept)
//   otherwise        -> (1 - s) f / factor + s f,  s = (original_context / w - low_freq_factor)
//                                                  / (high_freq_factor - low_freq_factor)
// rotary_with_frequencies(x [..., T, D], offset, f): the rotate-half convention of the host's
// op (pairs (x[i], x[i + D/2]) rotated by (offset + t) f_i), composed from engine ops
// (slice, mul, sub, add, concat), so autograd gives its backward.
#pragma once

#include <cstdint>
#include <patchbay/tensor.hpp>
#include <string>
#include <vector>

namespace patchbay_dense {

struct RopeScaling {
  std::string type = "none";  // "none" | "llama3"
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_context = 8192;
};

// Throws patchbay::PluginError(INVALID_ARGUMENT) for an unknown type or
// high_freq_factor <= low_freq_factor under llama3.
std::vector<double> rope_frequencies(int64_t head_dim, double theta, const RopeScaling& scaling);

// The cos/sin tables are built on the CPU and moved to (device_type, device_index), x's device.
patchbay::Tensor rotary_with_frequencies(const patchbay::Ops& ops, const patchbay::Tensor& x,
                                         int64_t position_offset,
                                         const std::vector<double>& frequencies,
                                         pb_device_type device_type, int32_t device_index);

// x [B, H, T, D] rotated as above, token (b, t) at positions[b * T + t] (packed sequences:
// positions restart with each segment); the cos/sin tables [B, 1, T, D/2] are built on the
// CPU and moved to x's device.
patchbay::Tensor rotary_at_positions(const patchbay::Ops& ops, const patchbay::Tensor& x,
                                     const std::vector<int64_t>& positions,
                                     const std::vector<double>& frequencies,
                                     pb_device_type device_type, int32_t device_index);

}  // namespace patchbay_dense
