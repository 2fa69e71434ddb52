// add(a, b): the worked example of the op pattern (engine/README.md, "How to add an op").
//   1. a kernel per device with a signature alias, registered under the op's name;
//   2. the op: validate, compute the output shape, look the kernel up for the device,
//      run it, then record_op() with a backward written in terms of other ops;
//   3. a reference in engine/reference/ and a test comparing the two plus finite differences.
#include <algorithm>

#include "common/error.hpp"
#include "engine/cpu/strided_loop.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops.hpp"

namespace patchbay::engine {
namespace {

using kernel::AddKernel;

// z[i] = x[i] + y[i], i < n, compiled for AVX-512 / AVX2 / baseline (load-time pick).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void add_contiguous(const float* x, const float* y, float* z, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}

// The period P of `t` (expanded to `shape`) when it is a contiguous block of P elements
// repeated over the leading dims (stride 0 there, row-major strides in the trailing dims):
// a bias [N] or a position table [T, C] broadcast over rows. 0 when it is not.
int64_t broadcast_period(const Shape& shape, const Shape& strides) {
  int64_t period = 1;
  size_t d = shape.size();
  for (; d > 0 && (shape[d - 1] == 1 || strides[d - 1] == period); --d) period *= shape[d - 1];
  for (; d > 0; --d)
    if (shape[d - 1] != 1 && strides[d - 1] != 0) return 0;
  return period;
}

void add_cpu(const Tensor& a, const Tensor& b, Tensor& out) {
  // Fast path: contiguous + (contiguous or a row-broadcast block such as a bias), out
  // contiguous: plain rows, no per-row index arithmetic (a bias add over [B*T, N] has
  // B*T rows of N elements).
  if (out.is_contiguous()) {
    for (int swap = 0; swap < 2; ++swap) {
      const Tensor& full = swap ? b : a;
      const Tensor& part = swap ? a : b;
      if (full.strides() != out.strides()) continue;
      const int64_t period = broadcast_period(out.shape(), part.strides());
      if (period == 0) continue;
      const float *x = full.data<float>(), *y = part.data<float>();
      float* z = out.data<float>();
      const int64_t n = out.numel(), rows = n / period;
      // Rows of a large period are split into 16K-element chunks so that a contiguous sum
      // (one row) still spreads over threads; a team only above 64K elements (sized to the
      // work: below that its start-up costs more than it saves).
      const int64_t chunk = std::min<int64_t>(period, 16384),
                    per_row = (period + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (n >= (int64_t{1} << 16))
      for (int64_t t = 0; t < rows * per_row; ++t) {
        const int64_t row = t / per_row, c0 = (t % per_row) * chunk;
        const int64_t start = row * period + c0;
        add_contiguous(x + start, y + c0, z + start, std::min(chunk, period - c0));
      }
      return;
    }
  }
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  loops::for_each_row<3>(
      out.shape(), {a.strides(), b.strides(), out.strides()},
      [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
        const float* x = pa + off[0];
        const float* y = pb + off[1];
        float* z = po + off[2];
        if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
        } else {
          for (int64_t i = 0; i < n; ++i) z[i * st[2]] = x[i * st[0]] + y[i * st[1]];
        }
      });
}
PATCHBAY_REGISTER_KERNEL(AddKernel, "add", DeviceType::kCpu, add_cpu);

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  // Validation: messages name the op and say what was expected and found.
  if (a.dtype() != b.dtype() || !is_floating(a.dtype()))
    throw Error(ErrorKind::kInvalidArgument,
                "add: expected two float tensors of one dtype, found " + a.str() + " and " +
                    b.str() + "; convert with to()");
  if (a.device() != b.device())
    throw Error(ErrorKind::kInvalidArgument,
                "add: operands on different devices: " + a.str() + " and " + b.str());
  Shape out_shape = broadcast_shapes(a.shape(), b.shape());
  // Compute in f32: bf16/f16 inputs are widened, the result rounded once at the end.
  Tensor a32 = a.detach().to(DType::kF32), b32 = b.detach().to(DType::kF32);
  Tensor out = Tensor::empty(out_shape, DType::kF32, a.device());
  find_kernel<AddKernel>("add", a.device().type)(a32.expand(out_shape), b32.expand(out_shape), out);
  if (a.dtype() != DType::kF32) out = out.to(a.dtype());
  // Backward: d(a+b)/da = 1, undone broadcasting by summing over the expanded dims.
  record_op("add", {a, b}, {&out}, [sa = a.shape(), sb = b.shape()](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{sum_to_shape(g[0], sa), sum_to_shape(g[0], sb)};
  });
  return out;
}

}  // namespace patchbay::engine
