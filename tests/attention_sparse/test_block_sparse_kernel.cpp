// The block-sparse kernel (kernels/cpu/block_sparse_attention.cpp) against its naive masked
// reference, forward (out, lse) and gradients, for every Sparse Transformer pattern and way
// of combining, with grouped-query heads, Tq < Tk (decode rows), a window, ragged last
// blocks and empty rows; each compiled code path (generic, avx2, avx512: the flash tiles)
// forced in turn on random layouts at tile-sized lengths; and the reference's backward
// against finite differences.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "patchbay/kernels/block_sparse_attention.hpp"
#include "sparse_patterns.hpp"

namespace pk = patchbay::kernels;
using namespace patchbay_sparse;

namespace {

struct Case {
  int64_t batch = 2, heads = 4, kv_heads = 2, q_len = 13, kv_len = 13, dim = 8;
  std::vector<float> q, k, v, out, lse, dout, dq, dk, dv;
  std::vector<int32_t> layout;
  pk::BlockSparseParams p;

  Case(int64_t tq, int64_t tk, unsigned seed, int64_t head_dim = 8)
      : q_len(tq), kv_len(tk), dim(head_dim) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.f, 1.f);
    auto fill = [&](std::vector<float>& x, int64_t n) {
      x.resize(static_cast<size_t>(n));
      for (float& e : x) e = normal(rng);
    };
    fill(q, batch * heads * q_len * dim);
    fill(dout, batch * heads * q_len * dim);
    fill(k, batch * kv_heads * kv_len * dim);
    fill(v, batch * kv_heads * kv_len * dim);
    // NaN sentinels: the kernel must write every element (the engine hands it uninitialised
    // buffers), so a skipped element shows up as a NaN against the reference.
    const float unwritten = std::numeric_limits<float>::quiet_NaN();
    out.assign(q.size(), unwritten);
    dq.assign(q.size(), unwritten);
    dk.assign(k.size(), unwritten);
    dv.assign(k.size(), unwritten);
    lse.assign(static_cast<size_t>(batch * heads * q_len), unwritten);
  }
  pk::BlockSparseParams& params(int64_t block_size, bool causal = true, int64_t window = 0) {
    p = pk::BlockSparseParams{};
    p.batch = batch;
    p.heads = heads;
    p.kv_heads = kv_heads;
    p.q_len = q_len;
    p.kv_len = kv_len;
    p.head_dim = dim;
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    p.out = out.data();
    p.lse = lse.data();
    p.scale = 0.4f;
    p.causal = causal;
    p.window = window;
    p.layout = layout.data();
    p.block_size = block_size;
    p.dout = dout.data();
    p.dq = dq.data();
    p.dk = dk.data();
    p.dv = dv.data();
    return p;
  }
};

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i]) && a[i] == b[i]) continue;
    // An element left unwritten (its NaN sentinel) fails: std::max would skip a NaN difference.
    if (std::isnan(a[i]) || std::isnan(b[i])) return std::numeric_limits<double>::infinity();
    m = std::max(m, std::abs(double(a[i]) - b[i]));
  }
  return m;
}

// Runs kernel and reference on c with layout already set; checks every output.
void check_against_reference(Case& c, int64_t block_size, int64_t window = 0, bool causal = true,
                             pk::KernelIsa isa = pk::KernelIsa::automatic, float scale = 0.4f) {
  pk::BlockSparseParams p = c.params(block_size, causal, window);
  p.isa = isa;
  p.scale = scale;
  REQUIRE(pk::block_sparse_attention_forward(p).empty());
  REQUIRE(pk::block_sparse_attention_backward(p).empty());
  std::vector<float> out = c.out, lse = c.lse, dq = c.dq, dk = c.dk, dv = c.dv;
  REQUIRE(pk::block_sparse_attention_reference_forward(p).empty());
  REQUIRE(pk::block_sparse_attention_reference_backward(p).empty());
  CHECK(max_diff(out, c.out) < 2e-5);
  CHECK(max_diff(lse, c.lse) < 2e-5);
  CHECK(max_diff(dq, c.dq) < 5e-5);
  CHECK(max_diff(dk, c.dk) < 5e-5);
  CHECK(max_diff(dv, c.dv) < 5e-5);
}

// Each (head, row, col) tile active with probability `density`.
std::vector<int32_t> random_layout(int64_t heads, int64_t blocks, double density, unsigned seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution active(density);
  std::vector<int32_t> layout(static_cast<size_t>(heads * blocks * blocks));
  for (int32_t& x : layout) x = active(rng) ? 1 : 0;
  return layout;
}

}  // namespace

TEST_CASE("every code path equals the reference on random layouts at tile-sized lengths") {
  // Block sizes below, at and above the 64 x 64 flash tile (80: a block is cut into two
  // tiles), odd ones (spans and tiles starting off a 16-row vector), D = 8 and 64 (padding
  // and none), Tq < Tk with an offset that is not a multiple of bs, windows inside tiles,
  // causal and not (the block-sparse window is one-sided either way).
  struct Shape {
    int64_t tq, tk, dim, bs, window;
    bool causal;
  };
  const Shape shapes[] = {
      {150, 150, 64, 16, 0, true},  {150, 150, 8, 32, 0, true},   {150, 150, 64, 80, 0, true},
      {150, 150, 8, 7, 0, true},    {70, 203, 64, 32, 0, true},   {70, 203, 8, 80, 45, true},
      {150, 150, 64, 32, 40, true}, {130, 130, 64, 32, 0, false}, {100, 171, 8, 16, 37, false},
  };
  // Every path up to the widest this CPU has (KernelIsa lists them narrowest first).
  for (const pk::KernelIsa isa :
       {pk::KernelIsa::generic, pk::KernelIsa::avx2, pk::KernelIsa::avx512}) {
    if (isa > pk::attention_flash_resolved_isa()) continue;
    const std::string isa_name = pk::kernel_isa_name(isa);
    CAPTURE(isa_name);
    unsigned seed = 100;
    for (const Shape& s : shapes) {
      for (double density : {0.3, 1.0}) {
        CAPTURE(s.tq);
        CAPTURE(s.tk);
        CAPTURE(s.dim);
        CAPTURE(s.bs);
        CAPTURE(s.window);
        CAPTURE(s.causal);
        CAPTURE(density);
        Case c(s.tq, s.tk, ++seed, s.dim);
        c.layout =
            random_layout(c.heads, pk::block_sparse_layout_blocks(s.tk, s.bs), density, seed);
        check_against_reference(c, s.bs, s.window, s.causal, isa, s.dim == 64 ? 0.125f : 0.4f);
      }
    }
  }
}

TEST_CASE("a code path the CPU lacks, or an unknown one, is refused") {
  Case c(4, 4, 1u);
  c.layout.assign(4, 1);
  pk::BlockSparseParams p = c.params(4);
  p.isa = static_cast<pk::KernelIsa>(42);
  CHECK_FALSE(pk::block_sparse_attention_forward(p).empty());
  CHECK_FALSE(pk::block_sparse_attention_backward(p).empty());
  if (pk::attention_flash_resolved_isa() != pk::KernelIsa::avx512) {
    p.isa = pk::KernelIsa::avx512;
    CHECK(pk::block_sparse_attention_forward(p).find("avx512") != std::string::npos);
  }
}

TEST_CASE("block-sparse kernel equals the naive masked reference for every pattern") {
  for (Pattern pattern : {Pattern::strided, Pattern::fixed, Pattern::local})
    for (Combine combine :
         {Combine::union_of_sets, Combine::separate_heads, Combine::alternate_layers})
      for (int64_t layer : {0, 1})
        for (int64_t bs : {1, 2, 3}) {
          CAPTURE(static_cast<int>(pattern));
          CAPTURE(static_cast<int>(combine));
          CAPTURE(bs);
          PatternSpec s;
          s.pattern = pattern;
          s.combine = combine;
          s.block_size = bs;
          s.stride = 2 * bs;
          s.summary = bs;
          Case c(13, 13, 7u + static_cast<unsigned>(bs));
          c.layout = build_layout(s, layer, c.heads, 13);
          check_against_reference(c, bs);
        }
}

TEST_CASE("decode rows (Tq < Tk) align bottom-right and read the layout by absolute position") {
  PatternSpec s;
  s.pattern = Pattern::fixed;
  s.block_size = 2;
  s.stride = 4;
  s.summary = 2;
  for (int64_t tq : {1, 3, 6}) {
    Case c(tq, 11, 3u);
    c.layout = build_layout(s, 0, c.heads, 11);
    check_against_reference(c, 2);
  }
}

TEST_CASE("a window inside active tiles, and empty rows give zero output and zero gradients") {
  Case c(10, 10, 5u);
  const int64_t nb = 4;  // bs 3
  c.layout.assign(static_cast<size_t>(c.heads * nb * nb), 1);
  check_against_reference(c, 3, 4);
  // Fixed with no summary before position 2: rows 0, 1 of a head using A2 are empty.
  PatternSpec s;
  s.pattern = Pattern::fixed;
  s.combine = Combine::separate_heads;
  s.block_size = 1;
  s.stride = 4;
  s.summary = 1;
  Case e(8, 8, 9u);
  e.layout = build_layout(s, 0, e.heads, 8);
  check_against_reference(e, 1);
  pk::BlockSparseParams p = e.params(1);
  REQUIRE(pk::block_sparse_attention_forward(p).empty());
  CHECK(std::isinf(e.lse[static_cast<size_t>(1 * e.q_len + 0)]));  // head 1, row 0
  for (int64_t d = 0; d < e.dim; ++d)
    CHECK(e.out[static_cast<size_t>((1 * e.q_len) * e.dim + d)] == 0.f);
}

TEST_CASE("reference backward matches finite differences of the reference forward") {
  PatternSpec s;
  s.pattern = Pattern::strided;
  s.block_size = 2;
  s.stride = 4;
  Case c(7, 9, 11u);
  c.batch = 1;
  c.layout = build_layout(s, 0, c.heads, 9);
  auto loss = [&] {
    pk::BlockSparseParams p = c.params(2);
    REQUIRE(pk::block_sparse_attention_reference_forward(p).empty());
    double sum = 0;
    for (size_t n = 0; n < static_cast<size_t>(c.heads * c.q_len * c.dim); ++n)
      sum += double(c.out[n]) * c.dout[n];
    return sum;
  };
  pk::BlockSparseParams p = c.params(2);
  REQUIRE(pk::block_sparse_attention_reference_backward(p).empty());
  const std::vector<float> dq = c.dq, dk = c.dk, dv = c.dv;
  const double eps = 1e-2;
  struct Probe {
    std::vector<float>* input;
    const std::vector<float>* grad;
    size_t index;
  };
  const Probe probes[] = {{&c.q, &dq, 3},  {&c.q, &dq, 100}, {&c.k, &dk, 5},
                          {&c.k, &dk, 60}, {&c.v, &dv, 17},  {&c.v, &dv, 70}};
  for (const Probe& probe : probes) {
    float& x = (*probe.input)[probe.index];
    const float saved = x;
    x = saved + static_cast<float>(eps);
    const double up = loss();
    x = saved - static_cast<float>(eps);
    const double down = loss();
    x = saved;
    CHECK((*probe.grad)[probe.index] == doctest::Approx((up - down) / (2 * eps)).epsilon(2e-3));
  }
}

TEST_CASE("bad parameters are refused with a sentence") {
  Case c(5, 4, 1u);
  c.layout.assign(100, 1);
  pk::BlockSparseParams p = c.params(2);
  CHECK(pk::block_sparse_attention_forward(p).find("q_len <= kv_len") != std::string::npos);
  Case d(4, 4, 1u);
  d.layout.assign(100, 1);
  p = d.params(0);
  CHECK(pk::block_sparse_attention_forward(p).find("block_size") != std::string::npos);
}

// As the flash backward: key blocks are dealt to threads by a fixed rule, so dq — summed from
// per-thread accumulators — has the same bits run after run at one thread count (three
// threads on two cores make the timing vary; a dynamic schedule failed this).
TEST_CASE("the backward is bit-reproducible at a fixed thread count") {
  auto run = [] {
    auto c = std::make_unique<Case>(300, 300, 77u, 64);
    c->layout = random_layout(c->heads, pk::block_sparse_layout_blocks(300, 32), 0.5, 77u);
    pk::BlockSparseParams p = c->params(32, true);
    p.num_threads = 3;
    REQUIRE(pk::block_sparse_attention_forward(p).empty());
    REQUIRE(pk::block_sparse_attention_backward(p).empty());
    return c;
  };
  const auto first = run();
  for (int repeat = 0; repeat < 12; ++repeat) {
    CAPTURE(repeat);
    const auto again = run();
    CHECK(again->out == first->out);
    CHECK(again->dq == first->dq);
    CHECK(again->dk == first->dk);
    CHECK(again->dv == first->dv);
  }
}
