// rotary_embedding (engine/ops_positional.hpp): the CPU kernel and the op. The kernel reads
// a contiguous f32 x viewed as [rows, T, D] and writes out of the same shape; cos/sin are
// tabulated once per call for the T positions ([T, D/2], angles in double, stored f32). The
// backward is the same kernel with the sign of sin flipped (a rotation's inverse is its
// transpose), so it is itself differentiable through the op.
#include <cmath>
#include <string>
#include <vector>

#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops/op_helpers.hpp"
#include "engine/ops_positional.hpp"

namespace patchbay::engine {
namespace {

using kernel::RotaryKernel;

void rotary_cpu(const Tensor& x, int64_t position_offset, double theta, bool inverse, Tensor& out) {
  const int64_t dim = x.size(-1), steps = x.size(-2);
  const int64_t half = dim / 2;
  const int64_t rows = steps * dim == 0 ? 0 : x.numel() / (steps * dim);
  std::vector<float> cos_table(static_cast<size_t>(steps * half)), sin_table(cos_table.size());
  for (int64_t t = 0; t < steps; ++t) {
    const double position = static_cast<double>(position_offset + t);
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          position * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
      cos_table[static_cast<size_t>(t * half + i)] = static_cast<float>(std::cos(angle));
      sin_table[static_cast<size_t>(t * half + i)] =
          static_cast<float>(inverse ? -std::sin(angle) : std::sin(angle));
    }
  }
  const float* src = x.data<float>();
  float* dst = out.data<float>();
#pragma omp parallel for schedule(static) if (rows * steps * dim > (1 << 15))
  for (int64_t r = 0; r < rows * steps; ++r) {
    const int64_t t = r % steps;
    const float* in = src + r * dim;
    float* o = dst + r * dim;
    const float* c = cos_table.data() + t * half;
    const float* s = sin_table.data() + t * half;
    for (int64_t i = 0; i < half; ++i) {
      const float x1 = in[i], x2 = in[i + half];
      o[i] = x1 * c[i] - x2 * s[i];
      o[i + half] = x2 * c[i] + x1 * s[i];
    }
  }
}
PATCHBAY_REGISTER_KERNEL(RotaryKernel, "rotary_embedding", DeviceType::kCpu, rotary_cpu);

Tensor rotate(const Tensor& x, int64_t position_offset, double theta, bool inverse) {
  Tensor x32 = detail::as_f32_contiguous(x);
  Tensor out = Tensor::empty(x.shape(), DType::kF32, x.device());
  if (out.numel() > 0)
    find_kernel<RotaryKernel>("rotary_embedding", x.device().type)(x32, position_offset, theta,
                                                                   inverse, out);
  Tensor result = detail::from_f32(out, x.dtype());
  record_op(inverse ? "rotary_embedding_inverse" : "rotary_embedding", {x}, {&result},
            [position_offset, theta, inverse](const std::vector<Tensor>& g) {
              return std::vector<Tensor>{rotate(g[0], position_offset, theta, !inverse)};
            });
  return result;
}

}  // namespace

Tensor rotary_embedding(const Tensor& x, int64_t position_offset, double theta) {
  const char* op = "rotary_embedding";
  detail::check_float(x, op);
  if (x.dim() < 2 || x.size(-1) % 2 != 0)
    throw Error(ErrorKind::kInvalidArgument,
                detail::shape_message(op, "x [..., T, D] with an even head dim D", x));
  if (position_offset < 0)
    throw Error(ErrorKind::kInvalidArgument, std::string(op) +
                                                 ": position_offset must be >= 0, found " +
                                                 std::to_string(position_offset));
  if (!(theta > 0.0) || !std::isfinite(theta))
    throw Error(
        ErrorKind::kInvalidArgument,
        std::string(op) + ": theta must be a finite number > 0, found " + std::to_string(theta));
  return rotate(x, position_offset, theta, false);
}

}  // namespace patchbay::engine
