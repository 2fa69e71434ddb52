// Skinny matmul for decoding: y = x · Wᵀ for a few rows of x (batch-1 decoding has one; beam
// search a handful), with W stored row-major [n, k] as linear layers keep their weights
// (PyTorch's layout: one output feature per row). With plain reference beside it for tests.
// It takes any number of rows: the engine runs every f32 x · Wᵀ through it, so that a row's
// result never depends on how many rows share the product (batch invariance, below).
//
//   x [m, k] f32, row i at x + i * x_row_stride (elements; k contiguous)
//   w [n, k] f32 or bf16 (bf16 = the upper 16 bits of an f32), row j at w + j * w_row_stride
//   y [m, n] f32, row i at y + i * y_row_stride; overwritten
//   y[i][j] = sum_q x[i][q] * w[j][q]          (bf16 weights widened exactly to f32)
//   with an epilogue (a linear layer's bias and activation, optional):
//   y[i][j] = act(sum_q x[i][q] * w[j][q] + bias[j])
//
// Why a kernel of its own: at m = 1 the product reads every weight once and does one
// multiply-add with it, so it is bound by memory bandwidth, and what matters is streaming W
// without stalls: each thread walks a contiguous range of W's rows, one row at a time (one
// sequential stream) with eight vector accumulators for one row of x (four per row for more),
// the x rows staying in L1. The epilogue runs on each thread's outputs right after it summed
// them (in L1), so a decoding step's bias add and activation cost no pass of their own.
// oneDNN 2.6's matmul at m = 1 reached about 57% of the streaming-read bandwidth here (issue 18);
// bf16 weights halve the bytes, and the multiply stays in f32 (accumulation in f32, x never
// rounded).
//
// Threads: when n * k is large enough to pay for the fork, rows of W are split into equal
// contiguous ranges over omp_get_max_threads() (or `threads` when > 0) OpenMP threads, and a
// thread done with its range takes chunks of the range with the most left; results do not
// depend on the thread count (each y element is summed by one thread in a fixed order).
// Paths: AVX-512, AVX2 + FMA (chosen at run time with __builtin_cpu_supports) and a portable
// loop.
//
// Batch invariance: on one machine every y[i][j] is summed in one order that depends on k
// alone: not on m, on the other rows of x, on the thread count or on which thread took it
// (each path documents its order; the path is chosen by the CPU, never by the shape). So a
// row of y is bit-identical whether x has 1 row or 1000, and a token decoded alone gets the
// bits it gets inside a full forward. The three paths differ from each other in the last bits.
#pragma once

#include <cstdint>
#include <string>

namespace patchbay::kernels {

enum class SkinnyWeightType { kF32, kBF16 };
enum class SkinnyIsa { kAuto, kGeneric, kAvx2, kAvx512 };
// The epilogue's activation: GELU (tanh form) and ReLU as bias_activation computes them.
enum class SkinnyActivation { kNone, kRelu, kGeluTanh };

struct SkinnyMatmulParams {
  const float* x = nullptr;
  std::int64_t x_row_stride = 0;
  const void* w = nullptr;
  SkinnyWeightType w_type = SkinnyWeightType::kF32;
  std::int64_t w_row_stride = 0;
  float* y = nullptr;
  std::int64_t y_row_stride = 0;
  std::int64_t m = 0, n = 0, k = 0;
  const float* bias = nullptr;  // [n] f32, added to every row of y; null: none
  SkinnyActivation activation = SkinnyActivation::kNone;  // after the bias; needs one
  int threads = 0;                                        // 0: omp_get_max_threads()
  SkinnyIsa isa = SkinnyIsa::kAuto;  // tests force a path; one the CPU lacks falls back
};

// The most rows of x for which the engine's linear op runs the kernel with its epilogue
// (decoding shapes; above it the op is matmul, which also runs this kernel, then the bias op).
inline constexpr std::int64_t kSkinnyMaxRows = 4;

// Empty on success; otherwise a sentence saying what is wrong (nothing written): null
// pointers, m < 1, n or k < 1, a row stride shorter than k (or n),
// an activation without a bias.
std::string skinny_matmul_error(const SkinnyMatmulParams& p);

// y = x · Wᵀ as above. Returns skinny_matmul_error(p) (empty on success).
std::string skinny_matmul(const SkinnyMatmulParams& p);

// The plain reference: the same sums accumulated in double, one thread, the bias added and
// the activation applied in double (std::tanh), rounded to f32 once.
std::string skinny_matmul_reference(const SkinnyMatmulParams& p);

// Whether the AVX-512 (AVX2 + FMA) path can run on this CPU.
bool skinny_matmul_has_avx512();
bool skinny_matmul_has_avx2();

// Time and weight bytes of the skinny_matmul calls made by the calling thread while its
// profiling is on (`bench generate` splits a decode step into the products and the rest).
// Per calling thread: turning it on in one thread does not count another's calls. A call
// that fails validation counts nothing. Off (the default), a call pays one thread-local load.
struct SkinnyProfile {
  double seconds = 0;             // wall time inside skinny_matmul, fork and join included
  std::int64_t weight_bytes = 0;  // n · k · (4 for f32, 2 for bf16 weights), summed
  std::int64_t calls = 0;
};
void set_skinny_profiling(bool on);
// What was counted since the last take (or since profiling was turned on); resets it.
SkinnyProfile take_skinny_profile();

}  // namespace patchbay::kernels
