// GPU tests of the strided element-wise kernels (strided.hpp) against their CPU twins: a
// permute ([2,3,4,5] -> [2,4,3,5], the attention head split), broadcasts (stride 0), a
// negative stride, every element size of strided_copy, f32 <-> bf16, every binary and unary op
// and the unary backward; outputs NaN-poisoned.
#include <cmath>

#include "gpu_test_harness.hpp"
#include "patchbay/kernels/cuda/math/bf16.hpp"
#include "patchbay/kernels/cuda/strided.hpp"
#include "patchbay/kernels/cuda/strided_reference.hpp"

namespace cuda = patchbay::kernels::cuda;
using cuda::StridedShape;
using cuda::Strides;
using cuda::testing::DeviceBuffer;

namespace {

StridedShape shape_of(std::initializer_list<int64_t> sizes) {
  StridedShape shape;
  for (int64_t size : sizes) shape.sizes[shape.rank++] = size;
  return shape;
}

Strides strides_of(std::initializer_list<int64_t> values) {
  Strides strides;
  int d = 0;
  for (int64_t value : values) strides.values[d++] = value;
  return strides;
}

}  // namespace

GPU_TEST(strided_copy_permute_broadcast_all_element_sizes) {
  // [2,3,4,5] viewed as [2,4,3,5] (dims 1 and 2 swapped), copied to contiguous.
  const StridedShape shape = shape_of({2, 4, 3, 5});
  const Strides src_strides = strides_of({60, 5, 20, 1});
  const Strides dst_strides = cuda::contiguous_strides(shape);
  const auto source = t.uniform(120);
  DeviceBuffer<float> src(source), dst(120);
  t.poison(dst);
  CUDA_CHECK(
      cuda::strided_copy(src.get(), src_strides, dst.get(), dst_strides, shape, 4, t.stream()));
  std::vector<float> expected(120);
  cuda::strided_copy_reference(source.data(), src_strides, expected.data(), dst_strides, shape, 4);
  t.expect_close("permute f32", dst.download(), expected, 0.0);
  // Broadcast a row of 5 over [3,5], and reverse it (stride -1 from the last element).
  const StridedShape rows = shape_of({3, 5});
  std::vector<float> broadcast(15), reversed(15);
  cuda::strided_copy_reference(source.data(), strides_of({0, 1}), broadcast.data(),
                               cuda::contiguous_strides(rows), rows, 4);
  t.poison(dst);
  CUDA_CHECK(cuda::strided_copy(src.get(), strides_of({0, 1}), dst.get(),
                                cuda::contiguous_strides(rows), rows, 4, t.stream()));
  auto result = dst.download();
  result.resize(15);
  t.expect_close("broadcast", result, broadcast, 0.0);
  cuda::strided_copy_reference(source.data() + 4, strides_of({5, -1}), reversed.data(),
                               cuda::contiguous_strides(rows), rows, 4);
  CUDA_CHECK(cuda::strided_copy(src.get() + 4, strides_of({5, -1}), dst.get(),
                                cuda::contiguous_strides(rows), rows, 4, t.stream()));
  result = dst.download();
  result.resize(15);
  t.expect_close("negative stride", result, reversed, 0.0);
  // Element sizes 1, 2, 8 on the permute (bytes compared as floats would not be: use uint64).
  for (const int bytes : {1, 2, 8}) {
    std::vector<uint64_t> words(120);
    for (auto& w : words) w = t.random()();
    DeviceBuffer<uint64_t> wsrc(words), wdst(120);
    CUDA_CHECK(cudaMemset(wdst.get(), 0xFF, 120 * 8));
    CUDA_CHECK(cuda::strided_copy(wsrc.get(), src_strides, wdst.get(), dst_strides, shape, bytes,
                                  t.stream()));
    std::vector<uint64_t> want(120, ~uint64_t{0});
    cuda::strided_copy_reference(words.data(), src_strides, want.data(), dst_strides, shape, bytes);
    t.expect_true("strided_copy of " + std::to_string(bytes) + "-byte elements",
                  wdst.download() == want);
  }
  t.expect_true("element size 3 is refused",
                cuda::strided_copy(src.get(), src_strides, dst.get(), dst_strides, shape, 3,
                                   t.stream()) == cudaErrorInvalidValue);
}

GPU_TEST(strided_bf16_conversions) {
  const StridedShape shape = shape_of({7, 9});
  const Strides transposed = strides_of({1, 7});
  const auto values = t.normal(63, 50.0f);
  DeviceBuffer<float> src(values), back(63);
  DeviceBuffer<uint16_t> bits(63);
  t.poison(bits);
  t.poison(back);
  CUDA_CHECK(cuda::strided_f32_to_bf16(src.get(), transposed, bits.get(),
                                       cuda::contiguous_strides(shape), shape, t.stream()));
  std::vector<uint16_t> expected(63);
  cuda::strided_f32_to_bf16_reference(values.data(), transposed, expected.data(),
                                      cuda::contiguous_strides(shape), shape);
  t.expect_equal_bits("f32 -> bf16, transposed read", bits.download(), expected);
  CUDA_CHECK(cuda::strided_bf16_to_f32(bits.get(), cuda::contiguous_strides(shape), back.get(),
                                       transposed, shape, t.stream()));
  std::vector<float> widened(63);
  for (int64_t i = 0; i < 63; ++i)
    widened[size_t(cuda::strided_offset(shape, transposed, i))] =
        cuda::math::float_from_bf16(expected[size_t(i)]);
  t.expect_close("bf16 -> f32, transposed write", back.download(), widened, 0.0);
}

GPU_TEST(binary_and_unary_ops_with_broadcast) {
  const StridedShape shape = shape_of({4, 33, 65});
  const size_t n = 4 * 33 * 65;
  const auto a = t.uniform(n, 0.1f, 3.0f), b = t.uniform(65, 0.5f, 2.0f), dy = t.normal(n);
  DeviceBuffer<float> da(a), db(b), ddy(dy), out(n);
  const Strides dense = cuda::contiguous_strides(shape), row = strides_of({0, 0, 1});
  for (const auto op : {cuda::BinaryOp::kAdd, cuda::BinaryOp::kSub, cuda::BinaryOp::kMul,
                        cuda::BinaryOp::kDiv, cuda::BinaryOp::kMaximum, cuda::BinaryOp::kMinimum}) {
    t.poison(out);
    CUDA_CHECK(cuda::binary_strided_f32(op, da.get(), dense, db.get(), row, out.get(), dense, shape,
                                        t.stream()));
    std::vector<float> expected(n);
    cuda::binary_strided_f32_reference(op, a.data(), dense, b.data(), row, expected.data(), dense,
                                       shape);
    t.expect_close("binary op " + std::to_string(int(op)) + " (b broadcast)", out.download(),
                   expected, 1e-7);
  }
  for (int op = 0; op <= int(cuda::math::UnaryOp::kPowScalar); ++op) {
    const auto unary = static_cast<cuda::math::UnaryOp>(op);
    t.poison(out);
    CUDA_CHECK(
        cuda::unary_strided_f32(unary, 1.5f, da.get(), dense, out.get(), dense, shape, t.stream()));
    std::vector<float> expected(n);
    cuda::unary_strided_f32_reference(unary, 1.5f, a.data(), dense, expected.data(), dense, shape);
    t.expect_close("unary op " + std::to_string(op), out.download(), expected, 1e-6);
    t.poison(out);
    CUDA_CHECK(cuda::unary_backward_f32(unary, 1.5f, da.get(), ddy.get(), out.get(), int64_t(n),
                                        t.stream()));
    cuda::unary_backward_f32_reference(unary, 1.5f, a.data(), dy.data(), expected.data(),
                                       int64_t(n));
    t.expect_close("unary backward op " + std::to_string(op), out.download(), expected, 1e-6);
  }
}

GPU_TEST(masked_fill_every_mask_type_with_broadcast) {
  const StridedShape shape = shape_of({6, 7, 9});
  const size_t n = 6 * 7 * 9;
  const auto x = t.normal(n);
  DeviceBuffer<float> dx(x), out(n);
  const Strides dense = cuda::contiguous_strides(shape), causal = strides_of({0, 9, 1});
  // A [7, 9] mask broadcast over the leading dim: j > i masked, plus -0.0 (not masked) and
  // NaN (masked) in the float masks.
  std::vector<float> mask_values(63);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 9; ++j) mask_values[size_t(i * 9 + j)] = j > i ? 1.0f : 0.0f;
  mask_values[0] = -0.0f;
  mask_values[1] = NAN;
  for (const auto type : {cuda::MaskType::kU8, cuda::MaskType::kI32, cuda::MaskType::kI64,
                          cuda::MaskType::kF32, cuda::MaskType::kBF16}) {
    std::vector<uint64_t> storage(63);  // big enough for any element type
    void* raw = storage.data();
    for (size_t i = 0; i < 63; ++i) {
      const float v = mask_values[i];
      const bool on = v != 0.0f;  // NaN: on
      switch (type) {
        case cuda::MaskType::kU8:
          static_cast<uint8_t*>(raw)[i] = on;
          break;
        case cuda::MaskType::kI32:
          static_cast<int32_t*>(raw)[i] = on;
          break;
        case cuda::MaskType::kI64:
          static_cast<int64_t*>(raw)[i] = on;
          break;
        case cuda::MaskType::kF32:
          static_cast<float*>(raw)[i] = v;
          break;
        case cuda::MaskType::kBF16:
          static_cast<uint16_t*>(raw)[i] = cuda::math::bf16_from_float(v);
          break;
      }
    }
    DeviceBuffer<uint64_t> mask(storage);
    t.poison(out);
    CUDA_CHECK(cuda::masked_fill_strided_f32(dx.get(), dense, mask.get(), type, causal, -1e9f,
                                             out.get(), dense, shape, t.stream()));
    std::vector<float> expected(n);
    cuda::masked_fill_strided_f32_reference(x.data(), dense, storage.data(), type, causal, -1e9f,
                                            expected.data(), dense, shape);
    t.expect_close("masked_fill, mask type " + std::to_string(int(type)), out.download(), expected,
                   0.0);
  }
}
