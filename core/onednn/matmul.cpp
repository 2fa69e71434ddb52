// matmul / batched matmul on strided buffers through dnnl::matmul (see onednn_ops.hpp).
//
// Operands become oneDNN memory descriptors with explicit strides, so transposes cost no
// copy. Two shape normalisations keep oneDNN on its fastest (brgemm) path:
//  - x @ W with W broadcast over the batch (b.batch_stride == 0) and A, C stacked densely
//    over the batch folds into one 2-D matmul with m' = batch * m.
//  - batch == 1 uses 2-D descriptors.
// Strides of size-1 dimensions are rewritten to plain values: they address nothing, and
// oneDNN's layout checks would otherwise reject e.g. a [1, k] row with row_stride 0.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>

#include "onednn/bf16_through_f32.hpp"
#include "onednn/gemm_profile.hpp"
#include "onednn/onednn_ops.hpp"
#include "onednn/packed_weights.hpp"
#include "onednn/primitive_cache.hpp"

namespace patchbay::onednn {
namespace {

using detail::CacheKey;
using dims = dnnl::memory::dims;

const char* dtype_name(DType dtype) { return dtype == DType::kBF16 ? "bf16" : "f32"; }

std::string describe(const MatmulArgs& args) {
  std::ostringstream text;
  auto operand = [&](const char* name, DType dtype, std::int64_t bs, std::int64_t rs,
                     std::int64_t cs) {
    text << ' ' << name << '(' << dtype_name(dtype) << ", strides " << bs << ',' << rs << ','
         << cs << ')';
  };
  text << "[batch " << args.batch << ", m " << args.m << ", n " << args.n << ", k " << args.k
       << "]";
  operand("A", args.a.dtype, args.a.batch_stride, args.a.row_stride, args.a.col_stride);
  operand("B", args.b.dtype, args.b.batch_stride, args.b.row_stride, args.b.col_stride);
  operand("C", args.c.dtype, args.c.batch_stride, args.c.row_stride, args.c.col_stride);
  return text.str();
}

// One operand as oneDNN sees it: dims and strides (2 or 3 of each).
struct OperandLayout {
  dims shape;
  dims strides;
};

// Plain strides for size-1 dims of a [rows, cols] matrix (see file comment).
void normalise_matrix_strides(std::int64_t rows, std::int64_t cols, std::int64_t& row_stride,
                              std::int64_t& col_stride) {
  if (cols == 1) col_stride = 1;
  if (rows == 1) row_stride = cols * col_stride;
}

OperandLayout layout_of(std::int64_t batch, std::int64_t rows, std::int64_t cols,
                        std::int64_t batch_stride, std::int64_t row_stride,
                        std::int64_t col_stride, bool batched) {
  normalise_matrix_strides(rows, cols, row_stride, col_stride);
  if (!batched) return {{rows, cols}, {row_stride, col_stride}};
  if (batch == 1) {
    // Unread: any stride past the whole matrix is a valid plain layout.
    batch_stride = std::max(rows * row_stride, cols * col_stride);
  }
  return {{batch, rows, cols}, {batch_stride, row_stride, col_stride}};
}

void validate(const MatmulArgs& args) {
  auto fail = [&](const std::string& what) {
    detail::throw_invalid("matmul", what + " in " + describe(args));
  };
  if (args.batch < 0 || args.m < 0 || args.n < 0 || args.k < 0) fail("negative size");
  const bool has_product = args.batch > 0 && args.m > 0 && args.n > 0;
  if (has_product && args.k > 0 && (!args.a.data || !args.b.data)) fail("null A or B");
  if (has_product && !args.c.data) fail("null C");
  if (args.a.dtype != args.b.dtype) fail("A and B must have the same dtype");
  if (args.a.dtype == DType::kF32 && args.c.dtype != DType::kF32) {
    fail("f32 inputs need an f32 output");
  }
  for (std::int64_t stride : {args.a.batch_stride, args.a.row_stride, args.a.col_stride,
                              args.b.batch_stride, args.b.row_stride, args.b.col_stride,
                              args.c.batch_stride, args.c.row_stride, args.c.col_stride}) {
    if (stride < 0) fail("negative stride");
  }
  if (args.c.col_stride != 1 && args.c.row_stride != 1 && args.m > 1 && args.n > 1) {
    fail("C needs row_stride == 1 or col_stride == 1");
  }
  if (args.batch > 1 && args.c.batch_stride == 0) fail("C batch_stride 0 with batch > 1");
  if ((args.m > 1 && args.k > 1 && (args.a.row_stride == 0 || args.a.col_stride == 0)) ||
      (args.k > 1 && args.n > 1 && (args.b.row_stride == 0 || args.b.col_stride == 0)) ||
      (args.m > 1 && args.n > 1 && (args.c.row_stride == 0 || args.c.col_stride == 0))) {
    fail("zero row/col stride (only batch strides may broadcast)");
  }
}

// Fold [batch, m, k] @ [k, n] into [batch*m, k] @ [k, n] when A and C stack densely.
bool fold_batch_into_rows(const MatmulArgs& args) {
  if (args.batch <= 1 || args.b.batch_stride != 0 || args.m == 0) return false;
  const bool a_stacks = args.a.batch_stride == args.m * args.a.row_stride && args.a.row_stride != 0;
  const bool c_stacks = args.c.batch_stride == args.m * args.c.row_stride && args.c.row_stride != 0;
  return a_stacks && c_stacks;
}

// C = beta * C when k == 0 (no product terms); oneDNN refuses empty reductions.
void scale_output_for_empty_k(const MatmulArgs& args) {
  for (std::int64_t b = 0; b < args.batch; ++b) {
    for (std::int64_t i = 0; i < args.m; ++i) {
      for (std::int64_t j = 0; j < args.n; ++j) {
        const std::int64_t at =
            b * args.c.batch_stride + i * args.c.row_stride + j * args.c.col_stride;
        if (args.c.dtype == DType::kF32) {
          float* c = static_cast<float*>(args.c.data) + at;
          *c = args.beta == 0.0f ? 0.0f : args.beta * *c;
        } else {
          std::uint16_t* c = static_cast<std::uint16_t*>(args.c.data) + at;
          std::uint32_t bits = static_cast<std::uint32_t>(*c) << 16;
          float value = 0.0f;
          std::memcpy(&value, &bits, sizeof value);
          value = args.beta == 0.0f ? 0.0f : args.beta * value;
          std::memcpy(&bits, &value, sizeof value);
          *c = static_cast<std::uint16_t>(bits >> 16);  // exact for 0; truncation otherwise
        }
      }
    }
  }
}

// f32 B read in place with a row pitch that is a multiple of 4 KiB (e.g. n = 3072, the
// GPT-2 FFN up-projection x @ W1) maps successive rows onto the same cache sets: measured
// 80 GFLOP/s at [256 x 768] @ [768 x 3072] against 203 with the pitch padded by 16 floats
// and 262-301 with B reordered to oneDNN's packed layout. For such B, when there are
// enough rows of A to amortise one pass over B, we reorder B into the packed layout (a
// per-thread buffer) before the GEMM.
// A pitch that is a multiple of 1 KiB (GPT-2's 768 floats, 3 KiB) costs 20-25% once B is
// deep: Zen 5, 2 threads, [m x k] @ [k x 768], plain against packed (packing excluded):
// k = 1536 386 / 472 GFLOP/s at m = 256, 409 / 472 at 1024; k = 3072 380 / 495 and 400 /
// 491; k = 768 465 / 462 (no gain). Packing 9.4 MB takes ~0.3 ms (packed_weights.hpp), so
// such B is packed from k = 1536 and m = 128: GPT-2's fc dX 36-37 -> 34.8 ms a step at
// 4 x 64, 142 -> 126 ms at 1 x 1024 (its tied head's dX, 7 depth slices, is no slower).
//
// bf16 B: oneDNN's AVX-512 bf16 matmul reads B as pairs along k (BA16a64b2a) and, given plain
// or transposed B, makes that copy inside the call, at a cost that grows with m. Packing B
// first with pack_bf16_ba16a64b2a and handing oneDNN the packed layout measured, copy
// included (Zen 5, 2 threads, B cycled through 96 MB as weights are; docs/BENCHMARKS.md,
// issue 18 eleventh pass): m = 1024 with GPT-2's weights -4% to -10% (one shape, x @ W^T
// with W [768 x 3072], -1% to +3%); the weight gradients X^T dC (m = 768 or 3072) -4% to -11%
// at k = 1024 and -10% to -18% at k = 256; m = 256 with GPT-2's weights -8% to +9%, and no
// gain in the training step. So bf16 B is packed from m = 512, plain or transposed, when
// oneDNN asks for BA16a64b2a (never through oneDNN's reorder, 26-30 GB/s here).
constexpr std::int64_t kBf16PackRows = 512;

bool should_pack_weights(const MatmulArgs& args, bool batched, std::int64_t m) {
  if (batched || m < 32 || args.k < 64 || args.n < 64) return false;
  if (args.b.dtype == DType::kBF16)
    return m >= kBf16PackRows && (args.b.col_stride == 1 || args.b.row_stride == 1);
  if (args.b.col_stride != 1) return false;
  const std::int64_t pitch_bytes = args.b.row_stride * 4;
  return pitch_bytes % 4096 == 0 || (pitch_bytes % 1024 == 0 && args.k >= 1536 && m >= 128);
}

// A column-major C (row_stride 1) sends oneDNN 2.6 to its reference kernel; compute
// C^T = B^T @ A^T instead, which is the same memory written row-major.
MatmulArgs transposed_problem(const MatmulArgs& args) {
  MatmulArgs t = args;
  t.m = args.n;
  t.n = args.m;
  t.a = {args.b.data, args.b.dtype, args.b.batch_stride, args.b.col_stride, args.b.row_stride};
  t.b = {args.a.data, args.a.dtype, args.a.batch_stride, args.a.col_stride, args.a.row_stride};
  t.c = {args.c.data, args.c.dtype, args.c.batch_stride, args.c.col_stride, args.c.row_stride};
  return t;
}

// Very tall or very deep single products run as slices, each a oneDNN matmul of its own:
// oneDNN 2.6 blocks such shapes badly. Measured at GPT-2's tied LM head, 2 threads, Zen 4
// (docs/BENCHMARKS.md, "The LM head's GEMMs in slices"): dW = dlogits^T [50257 x 256] @ X
// [256 x 768] 403 -> 476 GFLOP/s f32 and 613 -> 848 bf16 in 8 row slices; dX = dlogits
// [256 x 50257] @ W [50257 x 768] 318 -> 487 f32 and 784 -> 846 bf16 in 8 slices of K summed
// into C. Row slices compute the same sums; K slices add partial sums into an f32 C (never
// into a bf16 C, which would round each partial sum).
constexpr std::int64_t kSliceLength = 8192;
constexpr std::int64_t kSliceAbove = 2 * kSliceLength;

const char* element_at(const void* base, DType dtype, std::int64_t offset) {
  return static_cast<const char*>(base) + offset * (dtype == DType::kBF16 ? 2 : 4);
}

bool slice_rows(const MatmulArgs& args) { return args.batch == 1 && args.m >= kSliceAbove; }

bool slice_depth(const MatmulArgs& args) {
  return args.batch == 1 && args.c.dtype == DType::kF32 && args.k >= kSliceAbove &&
         args.k >= 4 * std::max(args.m, args.n);
}

// Calls run(slice) for consecutive slices of [0, length) of near-equal size (at most two
// distinct sizes; with a first depth slice's own beta, at most four cached primitives).
template <class Run>
void for_each_slice(std::int64_t length, Run&& run) {
  const std::int64_t count = (length + kSliceLength - 1) / kSliceLength;
  const std::int64_t size = (length + count - 1) / count;
  for (std::int64_t start = 0; start < length; start += size) {
    run(start, std::min(size, length - start));
  }
}

void matmul_whole(const MatmulArgs& args);

// The profile's name of a call (gemm_profile.hpp): dtype, the logical product, which operands
// are stored transposed (col_stride != 1), the batch when > 1.
std::string profile_shape(const MatmulArgs& args) {
  std::string s = std::string(dtype_name(args.a.dtype)) + " [" + std::to_string(args.m) + " x " +
                  std::to_string(args.k) + "]" + (args.a.col_stride != 1 && args.k > 1 ? "^T" : "") +
                  " x [" + std::to_string(args.k) + " x " + std::to_string(args.n) + "]" +
                  (args.b.col_stride != 1 && args.n > 1 ? "^T" : "");
  if (args.batch > 1) s += " batch " + std::to_string(args.batch);
  return s;
}

void matmul_unprofiled(const MatmulArgs& given);

}  // namespace

void matmul(const MatmulArgs& given) {
  if (!gemm_profiling()) {
    matmul_unprofiled(given);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  matmul_unprofiled(given);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  detail::record_gemm(profile_shape(given), seconds,
                      2.0 * double(given.batch) * double(given.m) * double(given.n) *
                          double(given.k));
}

namespace {

void matmul_unprofiled(const MatmulArgs& given) {
  validate(given);
  if (given.a.dtype == DType::kBF16 && !bf16_kernels_available()) {
    // No bf16 kernels on this CPU (bf16_through_f32.cpp); empty products need no operands.
    if (given.batch > 0 && given.m > 0 && given.n > 0 && given.k > 0) {
      matmul_bf16_through_f32(given);
      return;
    }
  }
  const bool column_major_c = given.c.col_stride != 1 && given.c.row_stride == 1;
  const MatmulArgs args = column_major_c ? transposed_problem(given) : given;
  if (args.batch == 0 || args.m == 0 || args.n == 0) return;
  if (args.k == 0) {
    scale_output_for_empty_k(args);
    return;
  }
  if (slice_rows(args)) {
    for_each_slice(args.m, [&](std::int64_t start, std::int64_t rows) {
      MatmulArgs slice = args;
      slice.m = rows;
      slice.a.data = element_at(args.a.data, args.a.dtype, start * args.a.row_stride);
      slice.c.data = const_cast<char*>(
          element_at(args.c.data, args.c.dtype, start * args.c.row_stride));
      matmul_whole(slice);
    });
    return;
  }
  if (slice_depth(args)) {
    for_each_slice(args.k, [&](std::int64_t start, std::int64_t depth) {
      MatmulArgs slice = args;
      slice.k = depth;
      slice.a.data = element_at(args.a.data, args.a.dtype, start * args.a.col_stride);
      slice.b.data = element_at(args.b.data, args.b.dtype, start * args.b.row_stride);
      if (start > 0) slice.beta = 1.0f;  // C = alpha * (sum of slices) + beta * C
      matmul_whole(slice);
    });
    return;
  }
  matmul_whole(args);
}

// One oneDNN matmul over the whole (normalised, non-empty) problem.
void matmul_whole(const MatmulArgs& args) {

  const bool fold = fold_batch_into_rows(args);
  const bool batched = args.batch > 1 && !fold;
  const std::int64_t m = fold ? args.batch * args.m : args.m;
  const std::int64_t batch = batched ? args.batch : 1;
  const std::int64_t a_batch = args.a.batch_stride == 0 ? 1 : batch;
  const std::int64_t b_batch = args.b.batch_stride == 0 ? 1 : batch;

  const OperandLayout a = layout_of(a_batch, m, args.k, args.a.batch_stride, args.a.row_stride,
                                    args.a.col_stride, batched);
  const OperandLayout b = layout_of(b_batch, args.k, args.n, args.b.batch_stride,
                                    args.b.row_stride, args.b.col_stride, batched);
  const OperandLayout c = layout_of(batch, m, args.n, args.c.batch_stride, args.c.row_stride,
                                    args.c.col_stride, batched);

  const bool pack_b = should_pack_weights(args, batched, m);
  CacheKey key{static_cast<std::int64_t>(detail::OpTag::kMatmul), pack_b,
               static_cast<std::int64_t>(args.a.dtype), static_cast<std::int64_t>(args.c.dtype),
               detail::float_bits(args.alpha), detail::float_bits(args.beta),
               static_cast<std::int64_t>(a.shape.size())};
  for (const OperandLayout* layout : {&a, &b, &c}) {
    key.insert(key.end(), layout->shape.begin(), layout->shape.end());
    key.insert(key.end(), layout->strides.begin(), layout->strides.end());
  }

  detail::run_guarded("matmul", [&] { return describe(args); }, [&] {
    auto cached = detail::find_or_build(key, [&] {
      dnnl::memory::desc a_desc(a.shape, detail::to_dnnl(args.a.dtype), a.strides);
      dnnl::memory::desc b_desc(b.shape, detail::to_dnnl(args.b.dtype), b.strides);
      dnnl::memory::desc c_desc(c.shape, detail::to_dnnl(args.c.dtype), c.strides);
      dnnl::primitive_attr attr = detail::base_attr();
      if (args.alpha != 1.0f) attr.set_output_scales(0, {args.alpha});
      if (args.beta != 0.0f) {
        dnnl::post_ops post;
        post.append_sum(args.beta);
        attr.set_post_ops(post);
      }
      const dnnl::memory::desc b_any(b.shape, detail::to_dnnl(args.b.dtype),
                                     dnnl::memory::format_tag::any);
      // Only with pack_b (a 2-D B): the tag is for two dims.
      auto bf16_pairs = [&] {
        return dnnl::memory::desc(b.shape, dnnl::memory::data_type::bf16,
                                  dnnl::memory::format_tag::BA16a64b2a);
      };
      auto make_pd = [&](const dnnl::memory::desc& b_request) {
        return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_desc, b_request, c_desc), attr,
                                            detail::cpu_engine());
      };
      dnnl::matmul::primitive_desc pd = make_pd(pack_b ? b_any : b_desc);
      // bf16 is packed only into the layout pack_bf16_ba16a64b2a writes (see above).
      if (pack_b && args.b.dtype == DType::kBF16 && pd.weights_desc() != bf16_pairs())
        pd = make_pd(b_desc);
      detail::CachedPrimitive entry{dnnl::matmul(pd), {a_desc, b_desc, c_desc},
                                    pd.scratchpad_desc()};
      if (pack_b && pd.weights_desc() != b_desc) {
        const dnnl::memory::desc packed = pd.weights_desc();
        entry.descs.push_back(packed);  // descs[3]: B is packed into it before every call
        using DirectPack = detail::CachedPrimitive::DirectPack;
        if (args.b.dtype == DType::kBF16 && packed == bf16_pairs()) {
          entry.direct_pack = DirectPack::kBf16BA16a64b2a;
        } else if (args.b.dtype == DType::kF32 &&
                   packed == dnnl::memory::desc(b.shape, dnnl::memory::data_type::f32,
                                                dnnl::memory::format_tag::BA16a64b)) {
          entry.direct_pack = DirectPack::kF32BA16a64b;
        } else {
          dnnl::reorder::primitive_desc reorder_pd(
              detail::cpu_engine(), b_desc, detail::cpu_engine(), packed, detail::base_attr());
          entry.weights_reorder =
              std::make_shared<const detail::CachedPrimitive>(detail::CachedPrimitive{
                  dnnl::reorder(reorder_pd), {b_desc, packed}, reorder_pd.scratchpad_desc()});
        }
      }
      return entry;
    });
    dnnl::memory weights = detail::wrap(cached->descs[1], args.b.data);
    if (cached->descs.size() > 3) {  // B packed first (see above)
      const dnnl::memory::desc& packed = cached->descs[3];
      dnnl::memory packed_weights = detail::wrap(
          packed, detail::thread_buffer(detail::ThreadBuffer::kPackedWeights, packed.get_size()));
      using DirectPack = detail::CachedPrimitive::DirectPack;
      if (cached->direct_pack == DirectPack::kF32BA16a64b) {
        detail::pack_f32_ba16a64b(static_cast<const float*>(args.b.data), args.b.row_stride,
                                  args.k, args.n, static_cast<float*>(packed_weights.get_data_handle()));
      } else if (cached->direct_pack == DirectPack::kBf16BA16a64b2a) {
        detail::pack_bf16_ba16a64b2a(static_cast<const std::uint16_t*>(args.b.data),
                                     args.b.row_stride, args.b.col_stride, args.k, args.n,
                                     static_cast<std::uint16_t*>(packed_weights.get_data_handle()));
      } else {
        detail::execute(*cached->weights_reorder,
                        {{DNNL_ARG_FROM, weights}, {DNNL_ARG_TO, packed_weights}});
      }
      weights = packed_weights;
    }
    detail::execute(*cached, {{DNNL_ARG_SRC, detail::wrap(cached->descs[0], args.a.data)},
                              {DNNL_ARG_WEIGHTS, weights},
                              {DNNL_ARG_DST, detail::wrap(cached->descs[2], args.c.data)}});
  });
}

}  // namespace

void matmul_2d_f32(const float* a, const float* b, float* c, std::int64_t m, std::int64_t n,
                   std::int64_t k, bool transpose_a, bool transpose_b) {
  MatmulArgs args;
  args.m = m;
  args.n = n;
  args.k = k;
  // A stored [m,k] -> strides (k, 1); stored [k,m] (transpose_a) -> strides (1, m).
  args.a = {a, DType::kF32, 0, transpose_a ? 1 : k, transpose_a ? m : 1};
  args.b = {b, DType::kF32, 0, transpose_b ? 1 : n, transpose_b ? k : 1};
  args.c = {c, DType::kF32, 0, n, 1};
  matmul(args);
}

}  // namespace patchbay::onednn
