// matmul against a double-accumulation loop: odd sizes, transposed and padded (strided)
// operands, batch broadcast of either operand, alpha/beta, bf16 inputs with f32 or bf16
// output, and argument errors.
//
// Tolerances. f32: any summation order obeys |c - ref| <= k * u * sum_k |a||b| with
// u = 2^-24; we allow 2k * u * that sum. bf16 inputs: the reference uses the same
// bf16-rounded inputs, so only f32 accumulation error remains, plus for a bf16 output one
// rounding of the result (2^-8 relative; oneDNN rounds to nearest, allow 1 ulp = 2^-7).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <oneapi/dnnl/dnnl.hpp>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "onednn/bf16_through_f32.hpp"
#include "onednn/onednn_ops.hpp"
#include "onednn/packed_weights.hpp"
#include "reference_math.hpp"

namespace patchbay::onednn {
namespace {

using testing::check_close;

// How one operand is laid out in memory: logical [rows, cols] per batch.
struct Layout {
  bool transposed = false;  // stored as [cols, rows]
  std::int64_t pad = 0;     // extra elements per stored row (leading dimension padding)
  bool broadcast = false;   // batch_stride 0: one matrix for every batch
};

struct Placed {
  std::int64_t batch_stride, row_stride, col_stride, size;
};

Placed place(std::int64_t batch, std::int64_t rows, std::int64_t cols, const Layout& layout) {
  const std::int64_t stored_rows = layout.transposed ? cols : rows;
  const std::int64_t stored_cols = layout.transposed ? rows : cols;
  const std::int64_t leading = stored_cols + layout.pad;
  const std::int64_t matrix = stored_rows * leading;
  Placed placed{layout.broadcast ? 0 : matrix, layout.transposed ? 1 : leading,
                layout.transposed ? leading : 1, (layout.broadcast ? 1 : batch) * matrix};
  return placed;
}

struct Case {
  std::int64_t batch = 1, m = 1, n = 1, k = 1;
  Layout a, b, c;
  DType input = DType::kF32;
  DType output = DType::kF32;
  float alpha = 1.0f, beta = 0.0f;
  bool through_f32 = false;  // call matmul_bf16_through_f32 directly (bf16 inputs)
};

void run_case(const Case& cs) {
  const Placed pa = place(cs.batch, cs.m, cs.k, cs.a);
  const Placed pb = place(cs.batch, cs.k, cs.n, cs.b);
  const Placed pc = place(cs.batch, cs.m, cs.n, cs.c);
  const bool bf16_in = cs.input == DType::kBF16;
  // Inputs rounded to bf16 when the kernel sees bf16, so the reference sees the same values.
  std::vector<float> a = testing::random_floats(static_cast<std::size_t>(pa.size), 11);
  std::vector<float> b = testing::random_floats(static_cast<std::size_t>(pb.size), 12);
  std::vector<float> c0 = testing::random_floats(static_cast<std::size_t>(pc.size), 13);
  if (bf16_in) {
    a = testing::from_bf16(testing::to_bf16(a));
    b = testing::from_bf16(testing::to_bf16(b));
  }
  if (cs.output == DType::kBF16) c0 = testing::from_bf16(testing::to_bf16(c0));
  std::vector<std::uint16_t> a16 = testing::to_bf16(a), b16 = testing::to_bf16(b);
  std::vector<std::uint16_t> c16 = testing::to_bf16(c0);
  std::vector<float> c = c0;

  MatmulArgs args;
  args.batch = cs.batch;
  args.m = cs.m;
  args.n = cs.n;
  args.k = cs.k;
  args.a = {bf16_in ? static_cast<const void*>(a16.data()) : a.data(), cs.input, pa.batch_stride,
            pa.row_stride, pa.col_stride};
  args.b = {bf16_in ? static_cast<const void*>(b16.data()) : b.data(), cs.input, pb.batch_stride,
            pb.row_stride, pb.col_stride};
  args.c = {cs.output == DType::kBF16 ? static_cast<void*>(c16.data()) : c.data(), cs.output,
            pc.batch_stride, pc.row_stride, pc.col_stride};
  args.alpha = cs.alpha;
  args.beta = cs.beta;
  if (cs.through_f32) {
    matmul_bf16_through_f32(args);
  } else {
    matmul(args);
  }
  if (cs.output == DType::kBF16) c = testing::from_bf16(c16);

  // Compare only the addressed elements of C (padding must stay untouched).
  std::vector<float> actual;
  std::vector<double> expected, tolerance;
  std::vector<bool> addressed(c.size(), false);
  const double u = 1.0 / (1 << 24);
  for (std::int64_t bi = 0; bi < cs.batch; ++bi) {
    for (std::int64_t i = 0; i < cs.m; ++i) {
      for (std::int64_t j = 0; j < cs.n; ++j) {
        double sum = 0.0, abs_sum = 0.0;
        for (std::int64_t p = 0; p < cs.k; ++p) {
          const double x = a[static_cast<std::size_t>(bi * pa.batch_stride + i * pa.row_stride +
                                                      p * pa.col_stride)];
          const double y = b[static_cast<std::size_t>(bi * pb.batch_stride + p * pb.row_stride +
                                                      j * pb.col_stride)];
          sum += x * y;
          abs_sum += std::fabs(x * y);
        }
        const auto at =
            static_cast<std::size_t>(bi * pc.batch_stride + i * pc.row_stride + j * pc.col_stride);
        addressed[at] = true;
        const double ref = cs.alpha * sum + cs.beta * c0[at];
        double tol = 2.0 * static_cast<double>(cs.k + 2) * u *
                         (std::fabs(cs.alpha) * abs_sum + std::fabs(cs.beta * c0[at])) +
                     1e-30;
        if (cs.output == DType::kBF16) tol += std::fabs(ref) / 128.0;
        actual.push_back(c[at]);
        expected.push_back(ref);
        tolerance.push_back(tol);
      }
    }
  }
  check_close(actual, expected, tolerance, "matmul values");
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (!addressed[i]) {
      INFO("padding element " << i << " of C was written");
      REQUIRE(c[i] == c0[i]);
    }
  }
}

TEST_CASE("matmul f32 matches the reference on odd shapes and every transpose") {
  for (std::int64_t m : {1, 3, 17, 65}) {
    for (std::int64_t n : {1, 17, 33}) {
      for (std::int64_t k : {1, 3, 65}) {
        for (int transposes = 0; transposes < 4; ++transposes) {
          Case cs;
          cs.m = m;
          cs.n = n;
          cs.k = k;
          cs.a.transposed = (transposes & 1) != 0;
          cs.b.transposed = (transposes & 2) != 0;
          CAPTURE(m);
          CAPTURE(n);
          CAPTURE(k);
          CAPTURE(transposes);
          run_case(cs);
        }
      }
    }
  }
}

TEST_CASE("matmul handles padded leading dimensions, alpha and beta") {
  Case cs;
  cs.m = 17;
  cs.n = 31;
  cs.k = 45;
  cs.a.pad = 3;
  cs.b.pad = 5;
  cs.b.transposed = true;
  cs.c.pad = 7;
  cs.alpha = 0.5f;
  cs.beta = -1.25f;
  run_case(cs);
  cs.c.transposed = true;  // column-major C
  run_case(cs);
}

TEST_CASE("batched matmul, with B or A broadcast over the batch") {
  for (bool broadcast_b : {false, true}) {
    for (bool transposed_b : {false, true}) {
      Case cs;
      cs.batch = 5;
      cs.m = 7;
      cs.n = 19;
      cs.k = 33;
      cs.b.broadcast = broadcast_b;
      cs.b.transposed = transposed_b;
      CAPTURE(broadcast_b);
      CAPTURE(transposed_b);
      run_case(cs);
      cs.c.pad = 2;  // A stacks densely but C does not: no folding into rows
      run_case(cs);
    }
  }
  Case cs;
  cs.batch = 3;
  cs.m = 9;
  cs.n = 5;
  cs.k = 17;
  cs.a.broadcast = true;
  cs.a.transposed = true;
  run_case(cs);
}

// f32 B that matmul.cpp packs before the GEMM: a 4 KiB row pitch (any depth), and a 3 KiB
// pitch once the product is deep (k >= 1536, m >= 128); each dense and with padded rows.
TEST_CASE("f32 B with a row pitch that aliases in the cache (packed first) stays correct") {
  struct Packed {
    std::int64_t pitch, m, k;
    std::int64_t widths[2];
  };
  for (const Packed& shape : {Packed{1024, 40, 67, {1024, 1000}}, Packed{768, 130, 1600, {768, 700}}}) {
    for (std::int64_t n : shape.widths) {
      Case cs;
      cs.m = shape.m;
      cs.n = n;
      cs.k = shape.k;
      cs.b.pad = shape.pitch - n;
      cs.beta = 0.5f;
      CAPTURE(shape.pitch);
      CAPTURE(n);
      run_case(cs);
      cs.batch = 3;  // x @ W with W broadcast folds into one 2-D GEMM: same packed path
      cs.b.broadcast = true;
      run_case(cs);
    }
  }
}

TEST_CASE("matmul bf16 inputs with f32 and bf16 outputs") {
  for (DType output : {DType::kF32, DType::kBF16}) {
    for (int transposes = 0; transposes < 4; ++transposes) {
      Case cs;
      cs.batch = 2;
      cs.m = 33;
      cs.n = 47;
      cs.k = 129;
      cs.input = DType::kBF16;
      cs.output = output;
      cs.a.transposed = (transposes & 1) != 0;
      cs.b.transposed = (transposes & 2) != 0;
      cs.b.broadcast = transposes == 3;
      CAPTURE(transposes);
      CAPTURE(static_cast<int>(output));
      run_case(cs);
    }
  }
}

// The path matmul() takes for bf16 where oneDNN has no bf16 kernels (AVX2-only CPUs), called
// directly so that it is tested on every CPU: transposes, a broadcast B, padded pitches,
// alpha and beta into a bf16 C.
TEST_CASE("bf16 through f32 matches the reference on every layout") {
  for (DType output : {DType::kF32, DType::kBF16}) {
    for (int variant = 0; variant < 6; ++variant) {
      Case cs;
      cs.batch = 3;
      cs.m = 17;
      cs.n = 29;
      cs.k = 65;
      cs.input = DType::kBF16;
      cs.output = output;
      cs.through_f32 = true;
      cs.a.transposed = (variant & 1) != 0;
      cs.b.transposed = (variant & 2) != 0;
      cs.b.broadcast = variant == 3;
      cs.c.pad = variant >= 4 ? 3 : 0;
      cs.a.pad = variant == 5 ? 2 : 0;
      if (variant >= 4) {
        cs.alpha = 0.5f;
        cs.beta = 2.0f;
      }
      CAPTURE(variant);
      CAPTURE(static_cast<int>(output));
      run_case(cs);
    }
  }
}

// bf16 B with m >= 512 rows of A is packed into BA16a64b2a before the GEMM
// (pack_bf16_ba16a64b2a): plain and transposed B, odd k and n (padding in both dims of the
// packed blocks), a padded pitch, beta, a broadcast B folded into rows, and transposed A.
TEST_CASE("bf16 B packed before the GEMM (512 rows and more) stays correct") {
  for (int transposes = 0; transposes < 4; ++transposes) {
    for (auto [m, k, n] :
         {std::array<std::int64_t, 3>{512, 67, 130}, std::array<std::int64_t, 3>{600, 256, 64}}) {
      Case cs;
      cs.m = m;
      cs.n = n;
      cs.k = k;
      cs.input = DType::kBF16;
      cs.a.transposed = (transposes & 1) != 0;
      cs.b.transposed = (transposes & 2) != 0;
      cs.b.pad = 5;
      cs.beta = 0.5f;
      CAPTURE(transposes);
      CAPTURE(m);
      run_case(cs);
      if (!cs.a.transposed) {  // [3, m / 3 rows...]: folds into one [m, k] GEMM
        cs.batch = 3;
        cs.m = m / 3 + 1;
        cs.b.broadcast = true;
        run_case(cs);
      }
    }
  }
}

// Products with >= 16384 rows, or a depth >= 16384 and 4x the output's sides, run as
// slices of at most 8192 (core/onednn/matmul.cpp): every slice boundary, alpha/beta, padded
// and column-major C, transposes, and bf16 inputs (a bf16 C is never sliced in depth).
TEST_CASE("very tall and very deep products run in slices and stay correct") {
  Case tall;
  tall.m = 2 * 8192 + 37;  // 3 row slices
  tall.n = 5;
  tall.k = 7;
  tall.a.transposed = true;  // dW = dY^T X, as at a language-model head
  tall.c.pad = 2;
  tall.alpha = 0.5f;
  tall.beta = -1.25f;
  run_case(tall);
  tall.c.transposed = true;  // column-major C: solved as C^T, sliced along its rows
  tall.c.pad = 0;
  std::swap(tall.m, tall.n);
  run_case(tall);
  Case tall_bf16;  // bf16 inputs, f32 and bf16 outputs, A as stored, B transposed
  tall_bf16.m = 2 * 8192 + 5;
  tall_bf16.n = 3;
  tall_bf16.k = 9;
  tall_bf16.b.transposed = true;
  tall_bf16.input = DType::kBF16;
  for (DType output : {DType::kF32, DType::kBF16}) {
    tall_bf16.output = output;
    CAPTURE(static_cast<int>(output));
    run_case(tall_bf16);
  }

  for (DType input : {DType::kF32, DType::kBF16}) {
    for (DType output : {DType::kF32, DType::kBF16}) {
      if (input == DType::kF32 && output == DType::kBF16) continue;
      Case deep;
      deep.m = 3;
      deep.n = 4;
      deep.k = 2 * 8192 + 101;  // 3 depth slices summed into C
      deep.b.transposed = true;
      deep.a.pad = 3;
      deep.input = input;
      deep.output = output;
      deep.alpha = 0.5f;
      deep.beta = -1.25f;
      CAPTURE(static_cast<int>(input));
      CAPTURE(static_cast<int>(output));
      run_case(deep);
    }
  }
  Case deep_t;  // A transposed, B as stored, beta 0 (the first slice overwrites C)
  deep_t.m = 5;
  deep_t.n = 2;
  deep_t.k = 2 * 8192 + 3;
  deep_t.a.transposed = true;
  deep_t.b.pad = 1;
  run_case(deep_t);
}

TEST_CASE("matmul with k == 0 writes beta * C") {
  Case cs;
  cs.m = 3;
  cs.n = 4;
  cs.k = 0;
  cs.beta = 2.0f;
  run_case(cs);
}

TEST_CASE("matmul rejects bad arguments with an InvalidArgument error naming the shapes") {
  std::vector<float> a(12), b(12), c(12);
  MatmulArgs args;
  args.m = 3;
  args.n = 4;
  args.k = 4;
  args.a = {a.data(), DType::kF32, 0, 4, 1};
  args.b = {b.data(), DType::kF32, 0, 4, 1};
  args.c = {c.data(), DType::kF32, 0, 4, 1};
  args.a.dtype = DType::kBF16;
  try {
    matmul(args);
    FAIL("mixed dtypes accepted");
  } catch (const Error& error) {
    CHECK(error.kind() == ErrorKind::kInvalidArgument);
    CHECK(std::string(error.what()).find("m 3, n 4, k 4") != std::string::npos);
  }
  args.a.dtype = DType::kF32;
  args.a.row_stride = -4;
  CHECK_THROWS_AS(matmul(args), Error);
  args.a.row_stride = 4;
  args.c.row_stride = 2;
  args.c.col_stride = 3;
  CHECK_THROWS_AS(matmul(args), Error);
}

TEST_CASE("matmul_2d_f32 computes op(A) @ op(B) with transposes") {
  const std::vector<float> a{1, 2, 3, 4, 5, 6};     // [2,3]
  const std::vector<float> b{1, 0, 0, 1, 1, 1};     // [3,2]
  std::vector<float> c(4);
  matmul_2d_f32(a.data(), b.data(), c.data(), 2, 2, 3, false, false);
  CHECK(c == std::vector<float>{4, 5, 10, 11});
  const std::vector<float> a_t{1, 4, 2, 5, 3, 6};   // A stored [3,2]
  const std::vector<float> b_t{1, 0, 1, 0, 1, 1};   // B stored [2,3]
  matmul_2d_f32(a_t.data(), b_t.data(), c.data(), 2, 2, 3, true, true);
  CHECK(c == std::vector<float>{4, 5, 10, 11});
}

}  // namespace
}  // namespace patchbay::onednn

namespace {

// src, laid out as `given`, reordered by oneDNN into `packed`: the elements it writes.
template <class T>
std::vector<T> onednn_reorder(const dnnl::memory::desc& given, const dnnl::memory::desc& packed,
                              const T* src) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  dnnl::memory from(given, engine, const_cast<T*>(src));
  dnnl::memory to(packed, engine);
  dnnl::reorder(from, to).execute(stream, from, to);
  stream.wait();
  const T* data = static_cast<const T*>(to.get_data_handle());
  return std::vector<T>(data, data + packed.get_size() / sizeof(T));
}

template <class T>
size_t count_differences(const std::vector<T>& a, const std::vector<T>& b) {
  size_t differ = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) differ += a[i] != b[i];
  return differ;
}

}  // namespace

// The direct BA16a64b copy (packed_weights.hpp) against oneDNN's own reorder into that layout,
// element for element, with padding in both dims and a row pitch wider than n.
TEST_CASE("pack_f32_ba16a64b writes what oneDNN's reorder writes") {
  for (auto [k, n, ldb] : {std::array<std::int64_t, 3>{67, 1000, 1024},
                           std::array<std::int64_t, 3>{768, 3072, 3072},
                           std::array<std::int64_t, 3>{16, 64, 64}}) {
    CAPTURE(k);
    CAPTURE(n);
    std::vector<float> src(static_cast<size_t>(k * ldb));
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i % 1009) - 500.0f;
    const std::vector<float> theirs =
        onednn_reorder(dnnl::memory::desc({k, n}, dnnl::memory::data_type::f32, {ldb, 1}),
                       dnnl::memory::desc({k, n}, dnnl::memory::data_type::f32,
                                          dnnl::memory::format_tag::BA16a64b),
                       src.data());
    CHECK(theirs.size() == static_cast<size_t>((k + 15) / 16 * 16 * ((n + 63) / 64 * 64)));
    std::vector<float> ours(theirs.size(), 1234.0f);
    patchbay::onednn::detail::pack_f32_ba16a64b(src.data(), ldb, k, n, ours.data());
    CHECK(count_differences(ours, theirs) == 0);
  }
}

// The direct BA16a64b2a copy of bf16 B (packed_weights.hpp) against oneDNN's reorder into that
// layout, bit for bit: B stored plain and transposed, k and n that leave padding in both
// dims, pitches wider than the stored rows; the dispatched (AVX-512 where present) and the
// portable copy.
TEST_CASE("pack_bf16_ba16a64b2a writes what oneDNN's reorder writes") {
  for (bool transposed : {false, true}) {
    for (auto [k, n, pitch] :
         {std::array<std::int64_t, 3>{67, 1000, 1030}, std::array<std::int64_t, 3>{768, 3072, 3072},
          std::array<std::int64_t, 3>{33, 64, 70}, std::array<std::int64_t, 3>{32, 65, 66}}) {
      const std::int64_t stored_rows = transposed ? n : k;
      const std::int64_t stored_cols = transposed ? k : n;
      const std::int64_t ld = transposed ? std::max(pitch, k + 3) : pitch;
      CAPTURE(transposed);
      CAPTURE(k);
      CAPTURE(n);
      REQUIRE(ld >= stored_cols);
      std::vector<std::uint16_t> src(static_cast<size_t>(stored_rows * ld));
      for (size_t i = 0; i < src.size(); ++i)
        src[i] = static_cast<std::uint16_t>(0x3f80 + (i * 2654435761u >> 9) % 4001);
      const std::int64_t row_stride = transposed ? 1 : ld, col_stride = transposed ? ld : 1;
      const std::vector<std::uint16_t> theirs = onednn_reorder(
          dnnl::memory::desc({k, n}, dnnl::memory::data_type::bf16, {row_stride, col_stride}),
          dnnl::memory::desc({k, n}, dnnl::memory::data_type::bf16,
                             dnnl::memory::format_tag::BA16a64b2a),
          src.data());
      CHECK(theirs.size() == static_cast<size_t>((k + 31) / 32 * 32 * ((n + 63) / 64 * 64)));
      for (bool portable : {false, true}) {
        CAPTURE(portable);
        std::vector<std::uint16_t> ours(theirs.size(), 0xdead);
        if (portable) {
          patchbay::onednn::detail::pack_bf16_portable(src.data(), row_stride, col_stride, k, n,
                                                       ours.data());
        } else {
          patchbay::onednn::detail::pack_bf16_ba16a64b2a(src.data(), row_stride, col_stride, k, n,
                                                         ours.data());
        }
        CHECK(count_differences(ours, theirs) == 0);
      }
    }
  }
}
