// Developer driver (not a test): is a GEMM row-invariant? For x [M, K] @ W^T (W [N, K]) at
// model shapes, row i of the product for M = 1 .. 128 is compared bit for bit with row i of the
// M = 300 product, for oneDNN's f32 matmul (called directly) and for the engine's matmul (the
// skinny kernel since issue 39). Prints, per shape and M, how many elements differ.
//   patchbay_row_invariance_probe            (OMP_NUM_THREADS decides oneDNN's threads)
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "engine/generator.hpp"
#include "engine/ops.hpp"
#include "onednn/onednn_ops.hpp"

namespace eng = patchbay::engine;
namespace od = patchbay::onednn;

namespace {

// x [m, k] @ w^T with w [n, k], through oneDNN's f32 matmul.
std::vector<float> onednn_product(const std::vector<float>& x, const std::vector<float>& w,
                                  int64_t m, int64_t n, int64_t k) {
  std::vector<float> y(static_cast<size_t>(m * n));
  od::MatmulArgs args;
  args.m = m;
  args.n = n;
  args.k = k;
  args.a = {x.data(), od::DType::kF32, 0, k, 1};
  args.b = {w.data(), od::DType::kF32, 0, 1, k};
  args.c = {y.data(), od::DType::kF32, 0, n, 1};
  od::matmul(args);
  return y;
}

int64_t differing(const std::vector<float>& part, const std::vector<float>& full, int64_t count) {
  int64_t differ = 0;
  for (int64_t i = 0; i < count; ++i)
    differ += std::memcmp(&part[static_cast<size_t>(i)], &full[static_cast<size_t>(i)], 4) != 0;
  return differ;
}

}  // namespace

int main() {
  struct Shape {
    int64_t k, n;
  };
  const int64_t kAll = 300;
  eng::Generator gen(5);
  std::printf("elements of rows 0..M-1 that differ from the same rows of the M = %lld product\n",
              static_cast<long long>(kAll));
  for (const Shape s : {Shape{128, 384}, Shape{128, 512}, Shape{512, 128}, Shape{768, 768},
                        Shape{768, 2304}, Shape{768, 3072}, Shape{3072, 768}}) {
    const eng::Tensor x = eng::randn({kAll, s.k}, gen), w = eng::randn({s.n, s.k}, gen);
    const std::vector<float> xv = x.to_vector(), wv = w.to_vector();
    const std::vector<float> dnnl_all = onednn_product(xv, wv, kAll, s.n, s.k);
    const std::vector<float> engine_all = eng::matmul(x, w, false, true).to_vector();
    std::printf("K %lld, N %lld (x @ W^T)\n", static_cast<long long>(s.k),
                static_cast<long long>(s.n));
    for (int64_t m : {1, 2, 4, 5, 8, 17, 32, 64, 128}) {
      const std::vector<float> xm(xv.begin(), xv.begin() + m * s.k);
      const int64_t count = m * s.n;
      const int64_t dnnl = differing(onednn_product(xm, wv, m, s.n, s.k), dnnl_all, count);
      const int64_t engine =
          differing(eng::matmul(x.slice(0, 0, m).contiguous(), w, false, true).to_vector(),
                    engine_all, count);
      std::printf("  M %4lld: oneDNN %7lld, engine %7lld of %7lld\n", static_cast<long long>(m),
                  static_cast<long long>(dnnl), static_cast<long long>(engine),
                  static_cast<long long>(count));
    }
  }
  return 0;
}
