// Tensor creation: zeros/ones/full, arange and the seeded random fills (randn, uniform).
// Random values come from Philox blocks indexed by element, so the result depends only on
// the generator's state, never on the thread count.
#include <cmath>

#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops/op_helpers.hpp"

namespace patchbay::engine {
namespace {

using kernel::RandomKernel;

void random_cpu(float* out, int64_t count, uint64_t first_block, uint64_t seed, bool normal,
                double low, double high) {
  const int64_t blocks = (count + 3) / 4;
#pragma omp parallel for schedule(static) if (count > 65536)
  for (int64_t b = 0; b < blocks; ++b) {
    uint32_t w[4];
    Philox4x32::generate(first_block + static_cast<uint64_t>(b), seed, w);
    float v[4];
    if (normal) {
      for (int pair = 0; pair < 2; ++pair) {
        // u1 in (0, 1] so log(u1) is finite.
        float u1 = (static_cast<float>(w[2 * pair] >> 8) + 1.0f) * (1.0f / 16777216.0f);
        float u2 = uint32_to_unit_float(w[2 * pair + 1]);
        float r = std::sqrt(-2.0f * std::log(u1));
        float theta = 6.2831853071795864f * u2;
        v[2 * pair] = r * std::cos(theta);
        v[2 * pair + 1] = r * std::sin(theta);
      }
    } else {
      for (int j = 0; j < 4; ++j)
        v[j] = static_cast<float>(low +
                                  (high - low) * static_cast<double>(uint32_to_unit_float(w[j])));
    }
    for (int j = 0; j < 4; ++j) {
      int64_t i = b * 4 + j;
      if (i < count) out[i] = v[j];
    }
  }
}
PATCHBAY_REGISTER_KERNEL(RandomKernel, "random", DeviceType::kCpu, random_cpu);

Tensor random_tensor(const Shape& shape, Generator& gen, bool normal, double low, double high,
                     DType dtype, Device device) {
  if (!is_floating(dtype))
    throw Error(ErrorKind::kInvalidArgument,
                std::string("random: expected a float dtype, found ") + dtype_name(dtype));
  Tensor out = Tensor::empty(shape, DType::kF32, device);
  uint64_t first = gen.reserve(static_cast<uint64_t>(out.numel()));
  find_kernel<RandomKernel>("random", device.type)(out.data<float>(), out.numel(), first,
                                                   gen.seed(), normal, low, high);
  return detail::from_f32(out, dtype);
}

}  // namespace

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = Tensor::empty(shape, dtype, device);
  fill_(t, value);
  return t;
}
Tensor zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}
Tensor ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}
Tensor zeros_like(const Tensor& x) { return zeros(x.shape(), x.dtype(), x.device()); }
Tensor ones_like(const Tensor& x) { return ones(x.shape(), x.dtype(), x.device()); }

Tensor arange(double start, double end, double step, DType dtype, Device device) {
  if (step == 0.0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    throw Error(ErrorKind::kInvalidArgument, "arange: expected finite start/end and non-zero step");
  double n = std::ceil((end - start) / step);
  auto count = static_cast<int64_t>(std::max(0.0, n));
  Tensor host = Tensor::empty({count}, dtype, cpu());
  for (int64_t i = 0; i < count; ++i)
    store_from_f64(host.data_ptr(), i, dtype, start + static_cast<double>(i) * step);
  if (device.type == DeviceType::kCpu) return host;
  return Tensor::from_data(host.data_ptr(), {count}, dtype, device);
}

Tensor randn(const Shape& shape, Generator& gen, DType dtype, Device device) {
  return random_tensor(shape, gen, true, 0.0, 1.0, dtype, device);
}
Tensor uniform(const Shape& shape, Generator& gen, double low, double high, DType dtype,
               Device device) {
  return random_tensor(shape, gen, false, low, high, dtype, device);
}

}  // namespace patchbay::engine
