// parallel_mpi collectives with known answers, run by ctest under mpirun on 2 and 3 ranks
// (the same binary on every rank; doctest runs the cases in the same order everywhere, so the
// collectives pair up). Each rank contributes values built from its rank: the all-reduce gives
// the sum / average / max on every rank; all-gather concatenates in rank order; reduce-scatter
// hands rank r rows [r*M, (r+1)*M) of the sum. Sizes are odd (1, 7, 1025 elements: never a
// multiple of the world), dtypes are every one the trainer uses (f32, bf16, f16, i32, i64;
// integers bit for bit beyond 2^53), and strided tensors go through the staging path. The
// SDK's parallelism conformance kit runs on the MPI world as well.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../feedforward/engine_host.hpp"
#include "engine/ops.hpp"
#include "patchbay/testing/parallelism_conformance.hpp"
#include "runtime/parallelism_handle.hpp"

namespace rt = patchbay::runtime;
namespace eng = patchbay::engine;

namespace {

// One registry per process: MPI starts once and is finalised when the plugin unloads at exit.
rt::Registry& registry() {
  static rt::Registry* r = [] {
    auto* reg = new rt::Registry(patchbay::test::engine_host_api());
    reg->scan_file(patchbay::test::built_plugin("parallel_mpi.so"));
    return reg;
  }();
  return *r;
}

rt::ParallelismHandle& group() {
  static rt::ParallelismHandle* g = [] {
    rt::ComponentConfig config(*registry().find(PB_KIND_PARALLELISM, "mpi_data").descriptor);
    return new rt::ParallelismHandle(
        registry().create(PB_KIND_PARALLELISM, "mpi_data", config.view()), registry().host());
  }();
  return *g;
}

template <class T>
std::vector<T> values_of(const eng::Tensor& t) {
  const eng::Tensor c = t.contiguous();
  return std::vector<T>(c.data<T>(), c.data<T>() + c.numel());
}

}  // namespace

TEST_CASE("the MPI world has the size mpirun gave it and strategies by component") {
  REQUIRE(registry().refused().empty());
  rt::ParallelismHandle& g = group();
  const char* expected = std::getenv("PATCHBAY_TEST_WORLD");
  REQUIRE(expected != nullptr);
  CHECK(g.world_size() == std::stoll(expected));
  CHECK(g.rank() >= 0);
  CHECK(g.rank() < g.world_size());
  CHECK(g.strategy() == PB_PARALLEL_DATA);
  CHECK(registry().find(PB_KIND_PARALLELISM, "mpi_zero1").descriptor != nullptr);
  g.barrier();
}

TEST_CASE("all_reduce f32: sum, average and max of rank + 1 on odd sizes") {
  rt::ParallelismHandle& g = group();
  const double w = static_cast<double>(g.world_size()), r = static_cast<double>(g.rank());
  for (int64_t n : {1, 7, 1025}) {
    CAPTURE(n);
    eng::Tensor sum = eng::full({n}, r + 1);
    g.all_reduce(sum, PB_COLLECTIVE_SUM);
    CHECK(sum.to_vector() ==
          std::vector<float>(static_cast<size_t>(n), static_cast<float>(w * (w + 1) / 2)));
    eng::Tensor avg = eng::full({n}, r + 1);
    g.all_reduce(avg, PB_COLLECTIVE_AVG);
    CHECK(avg.to_vector() ==
          std::vector<float>(static_cast<size_t>(n), static_cast<float>((w + 1) / 2)));
    eng::Tensor max = eng::full({n}, r + 1);
    g.all_reduce(max, PB_COLLECTIVE_MAX);
    CHECK(max.to_vector() == std::vector<float>(static_cast<size_t>(n), static_cast<float>(w)));
  }
  // Element-dependent values: element i holds i * (rank + 1); the sum is i * w(w+1)/2.
  std::vector<float> v(301);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * static_cast<float>(r + 1);
  eng::Tensor t = eng::Tensor::from_vector(v, {301});
  g.all_reduce(t, PB_COLLECTIVE_SUM);
  const std::vector<float> got = t.to_vector();
  for (size_t i = 0; i < got.size(); ++i)
    REQUIRE(got[i] == static_cast<float>(i) * static_cast<float>(w * (w + 1) / 2));
}

TEST_CASE("all_reduce integers: bit-exact sums beyond 2^53, max, avg truncates") {
  rt::ParallelismHandle& g = group();
  const int64_t w = g.world_size(), r = g.rank();
  const std::vector<int64_t> big = {(int64_t{1} << 53) + 1 + r, -7 * (r + 1), r};
  eng::Tensor ids = eng::Tensor::from_data(big.data(), {3}, eng::DType::kI64);
  g.all_reduce(ids, PB_COLLECTIVE_SUM);
  CHECK(values_of<int64_t>(ids) ==
        std::vector<int64_t>{w * ((int64_t{1} << 53) + 1) + w * (w - 1) / 2, -7 * w * (w + 1) / 2,
                             w * (w - 1) / 2});
  const std::vector<int32_t> small = {static_cast<int32_t>(r), static_cast<int32_t>(10 - r), 5};
  eng::Tensor i32 = eng::Tensor::from_data(small.data(), {3}, eng::DType::kI32);
  g.all_reduce(i32, PB_COLLECTIVE_MAX);
  CHECK(values_of<int32_t>(i32) == std::vector<int32_t>{static_cast<int32_t>(w - 1), 10, 5});
  eng::Tensor avg = eng::Tensor::from_data(small.data(), {3}, eng::DType::kI32);
  g.all_reduce(avg, PB_COLLECTIVE_AVG);
  CHECK(values_of<int32_t>(avg)[2] == 5);
}

TEST_CASE("all_reduce bf16 and f16 travel in their own dtype and add exactly where representable") {
  rt::ParallelismHandle& g = group();
  const double w = static_cast<double>(g.world_size()), r = static_cast<double>(g.rank());
  for (eng::DType dtype : {eng::DType::kBF16, eng::DType::kF16}) {
    eng::Tensor t = eng::full({7}, r + 1).to(dtype);
    REQUIRE(t.dtype() == dtype);
    g.all_reduce(t, PB_COLLECTIVE_SUM);
    CHECK(t.dtype() == dtype);
    CHECK(t.to(eng::DType::kF32).to_vector() ==
          std::vector<float>(7, static_cast<float>(w * (w + 1) / 2)));
    eng::Tensor m = eng::full({7}, -(r + 0.5)).to(dtype);
    g.all_reduce(m, PB_COLLECTIVE_MAX);
    CHECK(m.to(eng::DType::kF32).to_vector() == std::vector<float>(7, -0.5f));
    eng::Tensor a = eng::full({7}, 2 * (r + 1)).to(dtype);
    g.all_reduce(a, PB_COLLECTIVE_AVG);  // mean of 2, 4, ..., 2w is w + 1
    CHECK(a.to(eng::DType::kF32).to_vector() == std::vector<float>(7, static_cast<float>(w + 1)));
  }
  // bf16 rounding of the sum: 256 + 1 per extra rank is not representable in bf16 (8 bits of
  // mantissa), so 256 + 1 rounds to nearest even (256) — a sum in float would round the same.
  if (g.world_size() == 2) {
    eng::Tensor t = eng::full({1}, g.rank() == 0 ? 256.0 : 1.0).to(eng::DType::kBF16);
    g.all_reduce(t, PB_COLLECTIVE_SUM);
    CHECK(t.to(eng::DType::kF32).to_vector()[0] == 256.0f);
  }
}

TEST_CASE("broadcast from every root, contiguous and strided") {
  rt::ParallelismHandle& g = group();
  for (int64_t root = 0; root < g.world_size(); ++root) {
    std::vector<float> v(7);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>(100 * g.rank() + static_cast<int64_t>(i));
    eng::Tensor t = eng::Tensor::from_vector(v, {7});
    g.broadcast(t, root);
    std::vector<float> want(7);
    for (size_t i = 0; i < want.size(); ++i)
      want[i] = static_cast<float>(100 * root + static_cast<int64_t>(i));
    CHECK(t.to_vector() == want);
  }
  // A transposed view of a [2, 3] tensor is staged and written back element by element.
  eng::Tensor base = eng::full({2, 3}, static_cast<double>(g.rank()));
  eng::Tensor view = base.transpose(0, 1);
  g.broadcast(view, g.world_size() - 1);
  CHECK(base.to_vector() == std::vector<float>(6, static_cast<float>(g.world_size() - 1)));
}

TEST_CASE("all_gather concatenates in rank order (f32 [5, 3] and i64)") {
  rt::ParallelismHandle& g = group();
  const int64_t w = g.world_size(), r = g.rank();
  std::vector<float> v(15);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(1000 * r + static_cast<int64_t>(i));
  const eng::Tensor out = g.all_gather(eng::Tensor::from_vector(v, {5, 3}));
  CHECK(out.shape() == eng::Shape{5 * w, 3});
  const std::vector<float> got = out.to_vector();
  for (int64_t k = 0; k < w; ++k)
    for (int64_t i = 0; i < 15; ++i)
      CHECK(got[static_cast<size_t>(15 * k + i)] == static_cast<float>(1000 * k + i));
  const std::vector<int64_t> mine = {(int64_t{1} << 60) + r};
  const eng::Tensor ids = g.all_gather(eng::Tensor::from_data(mine.data(), {1}, eng::DType::kI64));
  std::vector<int64_t> want;
  for (int64_t k = 0; k < w; ++k) want.push_back((int64_t{1} << 60) + k);
  CHECK(values_of<int64_t>(ids) == want);
}

TEST_CASE("reduce_scatter hands each rank its rows of the sum and the average") {
  rt::ParallelismHandle& g = group();
  const int64_t w = g.world_size(), r = g.rank();
  const int64_t m = 3;  // rows per rank; columns 5
  std::vector<float> v;
  for (int64_t row = 0; row < w * m; ++row)
    for (int64_t c = 0; c < 5; ++c) v.push_back(static_cast<float>(10 * row + c + r));
  const eng::Tensor in = eng::Tensor::from_vector(v, {w * m, 5});
  const eng::Tensor sum = g.reduce_scatter(in, PB_COLLECTIVE_SUM);
  CHECK(sum.shape() == eng::Shape{m, 5});
  const std::vector<float> got = sum.to_vector();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < 5; ++c) {
      const int64_t row = r * m + i;
      CHECK(got[static_cast<size_t>(5 * i + c)] ==
            static_cast<float>(w * (10 * row + c) + w * (w - 1) / 2));
    }
  const eng::Tensor avg = g.reduce_scatter(in, PB_COLLECTIVE_AVG);
  const std::vector<float> got_avg = avg.to_vector();
  CHECK(got_avg[0] ==
        doctest::Approx((w * (10 * r * m) + w * (w - 1) / 2) / static_cast<double>(w)));
}

TEST_CASE("the SDK's parallelism conformance kit passes on the MPI world") {
  const pb_component_descriptor& d = *registry().find(PB_KIND_PARALLELISM, "mpi_zero1").descriptor;
  rt::ComponentConfig config(d);
  const patchbay::testing::ParallelismConformanceReport report =
      patchbay::testing::check_parallelism_conformance(d, &config.view(), registry().host());
  for (const std::string& f : report.failures) FAIL_CHECK(f);
  group().barrier();
}

TEST_CASE("non-blocking all_reduce_start / wait (SDK 1.1): several in flight, completed in order") {
  rt::ParallelismHandle& g = group();
  REQUIRE(g.has_nonblocking());
  const double w = static_cast<double>(g.world_size()), r = static_cast<double>(g.rank());
  eng::Tensor a = eng::full({1025}, r + 1);
  eng::Tensor b = eng::full({7}, 2 * (r + 1)).to(eng::DType::kBF16);
  eng::Tensor base = eng::full({2, 3}, r);
  eng::Tensor strided = base.transpose(0, 1);  // staged, written back at wait
  rt::ParallelismHandle::Request ra = g.all_reduce_start(a, PB_COLLECTIVE_SUM);
  rt::ParallelismHandle::Request rb = g.all_reduce_start(b, PB_COLLECTIVE_AVG);
  rt::ParallelismHandle::Request rc = g.all_reduce_start(strided, PB_COLLECTIVE_MAX);
  CHECK(ra.pending());
  g.wait(ra);
  g.wait(rb);
  g.wait(rc);
  CHECK_FALSE(ra.pending());
  CHECK(a.to_vector() == std::vector<float>(1025, static_cast<float>(w * (w + 1) / 2)));
  CHECK(b.to(eng::DType::kF32).to_vector() == std::vector<float>(7, static_cast<float>(w + 1)));
  CHECK(base.to_vector() == std::vector<float>(6, static_cast<float>(w - 1)));
}
