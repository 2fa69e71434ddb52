// bf16 matmul and eltwise on CPUs where Debian's oneDNN has no bf16 kernels (no AVX-512:
// oneDNN 2.7 implements bf16 matmul and eltwise only from avx512_core up, and refuses them
// on an AVX2-only CPU with "could not create a primitive descriptor iterator").
//
// There the operands are widened to f32 (exact: bf16 is the upper half of an f32) and the
// f32 primitive runs. Every product of two bf16 values is exact in f32 (8-bit significands
// give a 16-bit product), and the sums accumulate in f32, so the result is what a bf16
// kernel with f32 accumulation computes, up to the order of the sums. A bf16 output is
// rounded to nearest even from the f32 result, as oneDNN's bf16 kernels round.
// Slower than a native bf16 kernel (each operand is read once more and stored as f32), but
// it keeps bf16 training, its tests and its benchmarks meaningful on every x86-64 CPU.
#include "onednn/bf16_through_f32.hpp"

#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "onednn/primitive_cache.hpp"

namespace patchbay::onednn {
namespace {

float bf16_to_f32(std::uint16_t bits) {
  const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float value = 0.0f;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// Round to nearest, ties to even; NaN stays a (quiet) NaN.
std::uint16_t f32_to_bf16(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

bool probe_bf16_matmul() {
  try {
    const dnnl::memory::desc desc({16, 16}, dnnl::memory::data_type::bf16,
                                  dnnl::memory::format_tag::ab);
    const dnnl::memory::desc out({16, 16}, dnnl::memory::data_type::f32,
                                 dnnl::memory::format_tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(desc, desc, out), detail::cpu_engine());
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

// A [batch, rows, cols] bf16 operand (batch_stride 0 broadcasts) copied to dense f32.
struct WideOperand {
  std::vector<float> values;
  MatrixOperand operand;
};

WideOperand widen(const MatrixOperand& given, std::int64_t batch, std::int64_t rows,
                  std::int64_t cols) {
  const std::int64_t copies = given.batch_stride == 0 ? 1 : batch;
  WideOperand wide;
  wide.values.resize(static_cast<std::size_t>(copies * rows * cols));
  const auto* source = static_cast<const std::uint16_t*>(given.data);
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t b = 0; b < copies; ++b) {
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::uint16_t* row = source + b * given.batch_stride + i * given.row_stride;
      float* out = wide.values.data() + (b * rows + i) * cols;
      for (std::int64_t j = 0; j < cols; ++j) out[j] = bf16_to_f32(row[j * given.col_stride]);
    }
  }
  wide.operand = {wide.values.data(), DType::kF32, given.batch_stride == 0 ? 0 : rows * cols, cols,
                  1};
  return wide;
}

}  // namespace

bool bf16_kernels_available() {
  static const bool available = probe_bf16_matmul();
  return available;
}

void matmul_bf16_through_f32(const MatmulArgs& args) {
  WideOperand a = widen(args.a, args.batch, args.m, args.k);
  WideOperand b = widen(args.b, args.batch, args.k, args.n);
  MatmulArgs wide = args;
  wide.a = a.operand;
  wide.b = b.operand;
  if (args.c.dtype == DType::kF32) {
    matmul(wide);
    return;
  }
  // bf16 C: the f32 result (C read in f32 when beta != 0), then rounded into C's strides.
  std::vector<float> c(static_cast<std::size_t>(args.batch * args.m * args.n));
  auto* out = static_cast<std::uint16_t*>(args.c.data);
  auto at = [&](std::int64_t b, std::int64_t i, std::int64_t j) {
    return b * args.c.batch_stride + i * args.c.row_stride + j * args.c.col_stride;
  };
  if (args.beta != 0.0f) {
    for (std::int64_t b = 0; b < args.batch; ++b)
      for (std::int64_t i = 0; i < args.m; ++i)
        for (std::int64_t j = 0; j < args.n; ++j)
          c[static_cast<std::size_t>((b * args.m + i) * args.n + j)] =
              bf16_to_f32(out[at(b, i, j)]);
  }
  wide.c = {c.data(), DType::kF32, args.m * args.n, args.n, 1};
  matmul(wide);
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t b = 0; b < args.batch; ++b)
    for (std::int64_t i = 0; i < args.m; ++i)
      for (std::int64_t j = 0; j < args.n; ++j)
        out[at(b, i, j)] = f32_to_bf16(c[static_cast<std::size_t>((b * args.m + i) * args.n + j)]);
}

void eltwise_forward_bf16_through_f32(EltwiseKind kind, const void* src, void* dst,
                                      std::int64_t count) {
  std::vector<float> values(static_cast<std::size_t>(count));
  const auto* in = static_cast<const std::uint16_t*>(src);
  for (std::int64_t i = 0; i < count; ++i) values[static_cast<std::size_t>(i)] = bf16_to_f32(in[i]);
  eltwise_forward(kind, DType::kF32, values.data(), values.data(), count);
  auto* out = static_cast<std::uint16_t*>(dst);
  for (std::int64_t i = 0; i < count; ++i)
    out[i] = f32_to_bf16(values[static_cast<std::size_t>(i)]);
}

}  // namespace patchbay::onednn
