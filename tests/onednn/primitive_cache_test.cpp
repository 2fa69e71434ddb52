// The primitive cache: a repeated call with the same shape builds nothing new, a new shape
// or attribute does, capacity bounds the entries, and concurrent callers get right answers.
#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "common/error.hpp"
#include "onednn/onednn_ops.hpp"
#include "onednn/primitive_cache.hpp"
#include "reference_math.hpp"

namespace patchbay::onednn {
namespace {

void run_small_matmul(std::int64_t n, float alpha) {
  std::vector<float> a(3 * 5, 1.0f), b(5 * static_cast<std::size_t>(n), 1.0f),
      c(3 * static_cast<std::size_t>(n));
  MatmulArgs args;
  args.m = 3;
  args.n = n;
  args.k = 5;
  args.a = {a.data(), DType::kF32, 0, 5, 1};
  args.b = {b.data(), DType::kF32, 0, n, 1};
  args.c = {c.data(), DType::kF32, 0, n, 1};
  args.alpha = alpha;
  matmul(args);
  CHECK(c[0] == doctest::Approx(5.0 * alpha));
}

TEST_CASE("a repeated shape hits the cache; a new shape or alpha misses") {
  primitive_cache_clear();
  run_small_matmul(7, 1.0f);
  PrimitiveCacheStats stats = primitive_cache_stats();
  CHECK(stats.misses == 1);
  CHECK(stats.hits == 0);
  for (int i = 0; i < 5; ++i) run_small_matmul(7, 1.0f);
  stats = primitive_cache_stats();
  CHECK(stats.misses == 1);
  CHECK(stats.hits == 5);
  CHECK(stats.entries == 1);
  run_small_matmul(8, 1.0f);
  run_small_matmul(7, 2.0f);
  stats = primitive_cache_stats();
  CHECK(stats.misses == 3);
  CHECK(stats.entries == 3);

  std::vector<float> x(64, 0.5f), y(64);
  softmax_forward(SoftmaxKind::kSoftmax, x.data(), y.data(), 4, 16);
  softmax_forward(SoftmaxKind::kSoftmax, x.data(), y.data(), 4, 16);
  stats = primitive_cache_stats();
  CHECK(stats.misses == 4);
  CHECK(stats.hits == 6);
}

TEST_CASE("capacity bounds the cache, evicting the least recently used entry") {
  primitive_cache_clear();
  primitive_cache_set_capacity(2);
  run_small_matmul(1, 1.0f);
  run_small_matmul(2, 1.0f);
  run_small_matmul(1, 1.0f);  // hit; n=2 is now least recently used
  run_small_matmul(3, 1.0f);  // evicts n=2
  CHECK(primitive_cache_stats().entries == 2);
  run_small_matmul(1, 1.0f);  // still cached
  CHECK(primitive_cache_stats().hits == 2);
  run_small_matmul(2, 1.0f);  // rebuilt
  CHECK(primitive_cache_stats().misses == 4);
  CHECK(primitive_cache_stats().capacity == 2);
  primitive_cache_set_capacity(1024);
}

TEST_CASE("concurrent callers share the cache and get correct results") {
  primitive_cache_clear();
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &wrong] {
      for (int i = 0; i < 20; ++i) {
        const std::int64_t n = 4 + (i % 3);
        std::vector<float> a(2 * 3, 1.0f), b(3 * static_cast<std::size_t>(n), 2.0f),
            c(2 * static_cast<std::size_t>(n));
        MatmulArgs args;
        args.m = 2;
        args.n = n;
        args.k = 3;
        args.a = {a.data(), DType::kF32, 0, 3, 1};
        args.b = {b.data(), DType::kF32, 0, n, 1};
        args.c = {c.data(), DType::kF32, 0, n, 1};
        matmul(args);
        for (float value : c) wrong[static_cast<std::size_t>(t)] += value != 6.0f;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int count : wrong) CHECK(count == 0);
  const PrimitiveCacheStats stats = primitive_cache_stats();
  CHECK(stats.hits + stats.misses == 80);
  CHECK(stats.entries == 3);
}

TEST_CASE("concurrent bf16 matmuls (which use scratch memory) do not disturb each other") {
  // A = 1, B = t + 1 per thread t: every C element is exactly k * (t + 1) in f32.
  constexpr std::int64_t m = 64, n = 96, k = 128;
  std::vector<std::thread> threads;
  std::vector<int> wrong(3, 0);
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([t, &wrong] {
      const std::vector<std::uint16_t> a(m * k, testing::to_bf16(1.0f));
      const std::vector<std::uint16_t> b(k * n, testing::to_bf16(static_cast<float>(t + 1)));
      std::vector<float> c(m * n);
      MatmulArgs args;
      args.m = m;
      args.n = n;
      args.k = k;
      args.a = {a.data(), DType::kBF16, 0, k, 1};
      args.b = {b.data(), DType::kBF16, 0, 1, k};  // transposed storage
      args.c = {c.data(), DType::kF32, 0, n, 1};
      for (int i = 0; i < 10; ++i) {
        matmul(args);
        for (float value : c) wrong[static_cast<std::size_t>(t)] += value != k * (t + 1.0f);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int count : wrong) CHECK(count == 0);
}

TEST_CASE("a dnnl::error becomes patchbay::Error kInternal naming the op and shapes") {
  try {
    detail::run_guarded("softmax_forward", [] { return std::string("[rows 3, cols 5]"); },
                        [] { throw dnnl::error(dnnl_unimplemented, "no implementation"); });
    FAIL("no exception");
  } catch (const Error& error) {
    CHECK(error.kind() == ErrorKind::kInternal);
    const std::string message = error.what();
    CHECK(message.find("softmax_forward") != std::string::npos);
    CHECK(message.find("[rows 3, cols 5]") != std::string::npos);
    CHECK(message.find("no implementation") != std::string::npos);
  }
  // patchbay::Error passes through unchanged.
  try {
    detail::run_guarded("op", [] { return std::string(); },
                        [] { throw Error(ErrorKind::kNumeric, "nan"); });
    FAIL("no exception");
  } catch (const Error& error) {
    CHECK(error.kind() == ErrorKind::kNumeric);
  }
}

}  // namespace
}  // namespace patchbay::onednn
