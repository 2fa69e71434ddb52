// Developer driver: cost per computed (query, key) pair of the block-sparse kernel against
// the dense flash kernel, forward + backward, same tensors. Not a test; asserts nothing.
// Usage:
//   patchbay_kernels_block_sparse_bench [T [block_size [band_blocks [threads [isa]]]]]
// Defaults: T 4096, block_size 32, band 8, threads 1, isa auto; B=1 H=4 D=64, causal.
// Rows printed (best of repeats until 0.5 s of each is spent):
//   flash          dense causal flash attention (attention_flash_*)
//   sparse full    block-sparse with every tile active: the same pairs as dense causal
//   sparse band    block-sparse with each query block seeing itself and band - 1 blocks back,
//                  plus every 8th block (a local + strided shape, adjacent blocks merged)
// ns/pair = seconds / (computed pairs * heads * batch), pairs counted after the causal mask.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "patchbay/kernels/attention_flash.hpp"
#include "patchbay/kernels/block_sparse_attention.hpp"

namespace pk = patchbay::kernels;

namespace {

template <class Fn>
double best_seconds(Fn fn) {
  double best = 1e30, spent = 0;
  for (int rep = 0; rep < 50 && (rep < 2 || spent < 0.5); ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = s < best ? s : best;
    spent += s;
  }
  return best;
}

void require(const std::string& error) {
  if (error.empty()) return;
  std::cerr << error << "\n";
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t t = argc > 1 ? std::atoll(argv[1]) : 4096;
  const std::int64_t bs = argc > 2 ? std::atoll(argv[2]) : 32;
  const std::int64_t band = argc > 3 ? std::atoll(argv[3]) : 8;
  const int threads = argc > 4 ? std::atoi(argv[4]) : 1;
  const std::string isa_name = argc > 5 ? argv[5] : "auto";
  const pk::KernelIsa isa = isa_name == "generic"  ? pk::KernelIsa::generic
                            : isa_name == "avx2"   ? pk::KernelIsa::avx2
                            : isa_name == "avx512" ? pk::KernelIsa::avx512
                                                   : pk::KernelIsa::automatic;
  const std::int64_t heads = 4, dim = 64, n = heads * t * dim;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> q(n), k(n), v(n), dout(n), out(n), dq(n), dk(n), dv(n), lse(heads * t);
  for (auto* x : {&q, &k, &v, &dout})
    for (float& e : *x) e = normal(rng);

  pk::AttentionParams f;
  f.batch = 1, f.heads = heads, f.kv_heads = heads, f.q_len = t, f.kv_len = t, f.head_dim = dim;
  const pk::AttentionStrides s = pk::contiguous_attention_strides(heads, t, dim);
  f.q = q.data(), f.k = k.data(), f.v = v.data(), f.out = out.data(), f.lse = lse.data();
  f.dout = dout.data(), f.dq = dq.data(), f.dk = dk.data(), f.dv = dv.data();
  f.q_strides = f.k_strides = f.v_strides = f.out_strides = s;
  f.dout_strides = f.dq_strides = f.dk_strides = f.dv_strides = s;
  f.scale = 0.125f, f.causal = true, f.num_threads = threads, f.isa = isa;

  const std::int64_t blocks = pk::block_sparse_layout_blocks(t, bs);
  std::vector<std::int32_t> full(heads * blocks * blocks, 1), banded(heads * blocks * blocks, 0);
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t r = 0; r < blocks; ++r)
      for (std::int64_t c = 0; c <= r; ++c)
        banded[(h * blocks + r) * blocks + c] = (r - c < band || c % 8 == 7) ? 1 : 0;

  const double dense_pairs = double(t) * double(t + 1) / 2 * heads;
  const double flash = best_seconds([&] {
    require(pk::attention_flash_forward(f));
    require(pk::attention_flash_backward(f));
  });
  std::cout << "T " << t << ", bs " << bs << ", band " << band << ", threads " << threads
            << ", isa "
            << pk::kernel_isa_name(
                   isa == pk::KernelIsa::automatic ? pk::attention_flash_resolved_isa() : isa)
            << ", B=1 H=4 D=64 causal, forward + backward\n";
  std::cout << "flash        " << flash << " s, " << flash / dense_pairs * 1e9 << " ns/pair\n";

  for (const auto* layout : {&full, &banded}) {
    pk::BlockSparseParams p;
    p.batch = 1, p.heads = heads, p.kv_heads = heads, p.q_len = t, p.kv_len = t, p.head_dim = dim;
    p.q = q.data(), p.k = k.data(), p.v = v.data(), p.out = out.data(), p.lse = lse.data();
    p.dout = dout.data(), p.dq = dq.data(), p.dk = dk.data(), p.dv = dv.data();
    p.scale = 0.125f, p.causal = true, p.layout = layout->data(), p.block_size = bs;
    p.num_threads = threads, p.isa = isa;
    double pairs = 0;
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < t; ++i)
        for (std::int64_t c = 0; c * bs <= i; ++c)
          if ((*layout)[(h * blocks + i / bs) * blocks + c] != 0)
            pairs += double(std::min((c + 1) * bs, i + 1) - c * bs);
    const double secs = best_seconds([&] {
      require(pk::block_sparse_attention_forward(p));
      require(pk::block_sparse_attention_backward(p));
    });
    std::cout << (layout == &full ? "sparse full  " : "sparse band  ") << secs << " s, "
              << secs / pairs * 1e9 << " ns/pair, density " << pairs / dense_pairs << "\n";
  }
  return 0;
}
