// `patchbay bench ops`: what the tensor engine costs on this machine.
//   (a) per-op dispatch overhead: a tiny add through the engine vs a raw loop;
//   (b) engine matmul GFLOP/s on transformer-shaped GEMMs (f32, bf16) next to oneDNN's raw
//       rate for the same shape (patchbay::onednn::measure_onednn_matmul_rate);
//   (c) fused attention forward+backward time and peak memory vs sequence length, next to
//       the naive reference kernel (kernels/cpu attention_reference_*), which materialises
//       Tq x Tk and is skipped where its workspace would exceed 4 GB or --naive-max-seq.
#include <omp.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "engine/ops.hpp"
#include "onednn/gemm_reference_rate.hpp"
#include "patchbay/kernels/attention_flash.hpp"
#include "patchbay/kernels/attention_reference.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;
namespace eng = patchbay::engine;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Best time per call of fn over `repeats` samples, each running enough calls to last min_s.
template <class Fn>
double best_seconds_per_call(Fn&& fn, int repeats, double min_s) {
  fn();  // warm-up (allocator, primitive cache)
  int calls = 1;
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) fn();
    double s = seconds_since(t0);
    best = std::min(best, s / calls);
    if (s < min_s) calls = std::min(calls * 4, 1 << 22);
  }
  return best;
}

void bench_dispatch(bool quick) {
  std::printf("\n(a) dispatch overhead: add of two f32[8] tensors\n");
  eng::Tensor a = eng::ones({8}), b = eng::ones({8});
  std::vector<float> x(8, 1.f), y(8, 1.f), z(8);
  const int repeats = quick ? 3 : 7;
  double raw = best_seconds_per_call(
      [&] {
        for (int i = 0; i < 8; ++i)
          z[static_cast<size_t>(i)] = x[static_cast<size_t>(i)] + y[static_cast<size_t>(i)];
        asm volatile("" : : "r"(z.data()) : "memory");
      },
      repeats, 0.02);
  double no_grad;
  {
    eng::NoGradGuard guard;
    no_grad = best_seconds_per_call([&] { eng::Tensor c = eng::add(a, b); }, repeats, 0.05);
  }
  eng::Tensor ag = eng::ones({8}).set_requires_grad(true);
  double with_grad = best_seconds_per_call([&] { eng::Tensor c = eng::add(ag, b); }, repeats, 0.05);
  std::printf("  %-34s %10.1f ns/op\n", "raw loop", raw * 1e9);
  std::printf("  %-34s %10.1f ns/op\n", "engine add (grad off)", no_grad * 1e9);
  std::printf("  %-34s %10.1f ns/op\n", "engine add (records autograd node)", with_grad * 1e9);
}

struct GemmShape {
  const char* what;
  int64_t m, n, k;
};

void bench_matmul(bool quick) {
  std::printf(
      "\n(b) matmul GFLOP/s, engine (dispatch + allocation + oneDNN) vs raw oneDNN, same shape\n");
  std::printf("  %-26s %5s %6s %6s %5s %12s %12s %7s  %s\n", "shape (GPT-2 small, T=512)", "M", "N",
              "K", "dtype", "engine", "raw oneDNN", "ratio", "oneDNN impl");
  std::vector<GemmShape> shapes = {{"qkv projection", 512, 2304, 768},
                                   {"attn out projection", 512, 768, 768},
                                   {"mlp up", 512, 3072, 768},
                                   {"mlp down", 512, 768, 3072},
                                   {"lm head (vocab 50304)", 512, 50304, 768}};
  if (quick) shapes.resize(2);
  for (const GemmShape& s : shapes)
    for (eng::DType dt : {eng::DType::kF32, eng::DType::kBF16}) {
      eng::Generator gen(1);
      eng::Tensor a = eng::uniform({s.m, s.k}, gen, -1, 1, dt),
                  b = eng::uniform({s.k, s.n}, gen, -1, 1, dt);
      eng::NoGradGuard guard;
      double sec =
          best_seconds_per_call([&] { eng::Tensor c = eng::matmul(a, b); }, quick ? 3 : 5, 0.05);
      double flop =
          2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
      onednn::GemmRateOptions opt;
      opt.repeats = quick ? 3 : 5;
      opt.output_dtype = dt == eng::DType::kBF16 ? onednn::DType::kBF16 : onednn::DType::kF32;
      onednn::GemmRate raw = onednn::measure_onednn_matmul_rate(
          s.m, s.n, s.k, dt == eng::DType::kBF16 ? onednn::DType::kBF16 : onednn::DType::kF32, opt);
      double engine_gflops = flop / sec / 1e9;
      std::printf("  %-26s %5ld %6ld %6ld %5s %12.1f %12.1f %7.2f  %s\n", s.what,
                  static_cast<long>(s.m), static_cast<long>(s.n), static_cast<long>(s.k),
                  eng::dtype_name(dt), engine_gflops, raw.median_gflops,
                  engine_gflops / raw.median_gflops, raw.implementation.c_str());
    }
}

struct AttentionOptions {
  std::vector<int64_t> seq_lens;
  int64_t heads = 4, head_dim = 64, naive_max_seq = 4096;
  bool causal = true;
};

kernels::AttentionParams shape_params(int64_t heads, int64_t t, int64_t d, bool causal) {
  kernels::AttentionParams p;
  p.batch = 1;
  p.heads = p.kv_heads = heads;
  p.q_len = p.kv_len = t;
  p.head_dim = d;
  p.q_strides = p.k_strides = p.v_strides = p.out_strides = p.dout_strides = p.dq_strides =
      p.dk_strides = p.dv_strides = kernels::contiguous_attention_strides(heads, t, d);
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  p.causal = causal;
  return p;
}

// One engine attention forward+backward on fresh [1, H, T, D] inputs under `precision`
// (f32, or a bf16 autocast policy: the bf16 kernel): best of two runs (the first warms the
// allocator cache and the OpenMP team) and the allocator's peak above the start, which
// includes the kernel's scratch (the engine hands the kernel a block of its allocator).
struct EngineAttentionTiming {
  double forward_ms = 0, backward_ms = 0, peak_mib = 0;
};

EngineAttentionTiming time_engine_attention(const AttentionOptions& o, int64_t t,
                                            eng::DType precision) {
  eng::Generator gen(3);
  eng::Shape shape{1, o.heads, t, o.head_dim};
  eng::Tensor q = eng::randn(shape, gen).set_requires_grad(true);
  eng::Tensor k = eng::randn(shape, gen).set_requires_grad(true);
  eng::Tensor v = eng::randn(shape, gen).set_requires_grad(true);
  eng::Tensor seed = eng::ones(shape);
  const size_t base = eng::memory_stats(eng::cpu()).current_bytes;
  eng::reset_peak(eng::cpu());
  double fwd = 1e30, bwd = 1e30;
  for (int run = 0; run < 2; ++run) {
    q.zero_grad();
    k.zero_grad();
    v.zero_grad();
    eng::AutocastGuard policy(precision);
    auto t0 = Clock::now();
    eng::Tensor out = eng::scaled_dot_product_attention(q, k, v, o.causal);
    fwd = std::min(fwd, seconds_since(t0));
    t0 = Clock::now();
    eng::backward(out, seed);
    bwd = std::min(bwd, seconds_since(t0));
  }
  const double peak = static_cast<double>(eng::memory_stats(eng::cpu()).peak_bytes - base);
  return {fwd * 1e3, bwd * 1e3, peak / (1 << 20)};
}

void bench_attention(const AttentionOptions& o) {
  const bool bf16 = kernels::attention_flash_bf16_supported() && o.head_dim % 2 == 0;
  std::printf("\n(c) attention forward+backward, B=1 H=%ld D=%ld %s, f32%s\n",
              static_cast<long>(o.heads), static_cast<long>(o.head_dim),
              o.causal ? "causal" : "full", bf16 ? " and bf16" : "");
  std::printf(
      "  engine = scaled_dot_product_attention (flash kernel) incl. autograd; peak = engine\n"
      "  tensors and the kernel's scratch (allocator peak above the start); bf16 = the same\n"
      "  under a bf16 autocast policy (the bf16 flash kernel: bf16 products, f32 sums)%s;\n"
      "  naive = double-precision reference kernel (materialises T x T), memory = its\n"
      "  workspace + inputs/outputs\n",
      bf16 ? "" : " - not on this CPU (no AVX512-BF16) or odd D");
  std::printf("  %6s | %10s %10s %10s | %10s %10s %10s | %10s %10s %10s\n", "T", "fwd ms",
              "bwd ms", "peak MiB", "bf16 fwd", "bf16 bwd", "bf16 MiB", "naive fwd", "naive bwd",
              "naive MiB");
  for (int64_t t : o.seq_lens) {
    const EngineAttentionTiming f32 = time_engine_attention(o, t, eng::DType::kF32);
    std::printf("  %6ld | %10.1f %10.1f %10.1f |", static_cast<long>(t), f32.forward_ms,
                f32.backward_ms, f32.peak_mib);
    if (bf16) {
      const EngineAttentionTiming b = time_engine_attention(o, t, eng::DType::kBF16);
      std::printf(" %10.1f %10.1f %10.1f |", b.forward_ms, b.backward_ms, b.peak_mib);
    } else {
      std::printf(" %10s %10s %10s |", "-", "-", "-");
    }
    kernels::AttentionParams p = shape_params(o.heads, t, o.head_dim, o.causal);
    size_t naive_ws =
        std::max(kernels::attention_reference_workspace_bytes(p, kernels::AttentionPass::forward),
                 kernels::attention_reference_workspace_bytes(p, kernels::AttentionPass::backward));
    size_t io_bytes = static_cast<size_t>(8 * o.heads * t * o.head_dim) * sizeof(float);
    if (naive_ws + io_bytes > (size_t{4} << 30)) {
      std::printf(" skipped: naive needs %.1f GiB (> 4 GiB)\n",
                  static_cast<double>(naive_ws + io_bytes) / (1 << 30));
      continue;
    }
    if (t > o.naive_max_seq) {
      std::printf(" skipped: T > --naive-max-seq %ld (would need %.0f MiB)\n",
                  static_cast<long>(o.naive_max_seq),
                  static_cast<double>(naive_ws + io_bytes) / (1 << 20));
      continue;
    }
    const size_t n = static_cast<size_t>(o.heads * t * o.head_dim);
    eng::Generator gen(3);  // the engine runs' inputs
    const eng::Shape shape{1, o.heads, t, o.head_dim};
    std::vector<float> qv = eng::randn(shape, gen).to_vector(),
                       kv = eng::randn(shape, gen).to_vector(),
                       vv = eng::randn(shape, gen).to_vector(), ov(n), dout(n, 1.f), dq(n), dk(n),
                       dv(n), lse(static_cast<size_t>(o.heads * t));
    p.q = qv.data();
    p.k = kv.data();
    p.v = vv.data();
    p.out = ov.data();
    p.lse = lse.data();
    p.dout = dout.data();
    p.dq = dq.data();
    p.dk = dk.data();
    p.dv = dv.data();
    auto t0 = Clock::now();
    std::string err = kernels::attention_reference_forward(p);
    double nf = seconds_since(t0);
    t0 = Clock::now();
    if (err.empty()) err = kernels::attention_reference_backward(p);
    double nb = seconds_since(t0);
    if (!err.empty()) {
      std::printf(" naive failed: %s\n", err.c_str());
      continue;
    }
    std::printf(" %10.1f %10.1f %12.1f\n", nf * 1e3, nb * 1e3,
                static_cast<double>(naive_ws + io_bytes) / (1 << 20));
  }
}

int run_bench_ops(const std::vector<std::string>& args, const GlobalOptions&) {
  bool quick = false;
  std::string parts = "dispatch,matmul,attention";
  AttentionOptions att;
  std::vector<int64_t> seq_lens;
  po::options_description options("Options");
  options.add_options()("help,h", "show this help")(
      "quick", po::bool_switch(&quick), "small sizes only (a few seconds; for smoke tests)")(
      "parts", po::value(&parts), "comma-separated subset of dispatch,matmul,attention")(
      "seq-len", po::value(&seq_lens)->multitoken(),
      "attention sequence lengths (default 256 .. 16384)")("heads", po::value(&att.heads),
                                                           "attention heads (default 4)")(
      "head-dim", po::value(&att.head_dim), "attention head dim (default 64)")(
      "naive-max-seq", po::value(&att.naive_max_seq),
      "longest T for the naive reference (default 4096)")("no-causal",
                                                          "full (non-causal) attention");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(options).run(), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "bench ops: " << e.what() << "\n" << options;
    return kExitUsage;
  }
  if (vm.count("help")) {
    std::cout
        << "Usage: patchbay bench ops [options]\nTimes the tensor engine: dispatch overhead, "
           "matmul "
           "GFLOP/s vs raw oneDNN, fused attention vs naive.\nThreads follow OMP_NUM_THREADS.\n"
        << options;
    return kExitOk;
  }
  att.causal = vm.count("no-causal") == 0;
  att.seq_lens = !seq_lens.empty() ? seq_lens
                 : quick           ? std::vector<int64_t>{256, 512}
                                   : std::vector<int64_t>{256, 512, 1024, 2048, 4096, 8192, 16384};
  if (quick) att.naive_max_seq = std::min<int64_t>(att.naive_max_seq, 512);
  onednn::MachineInfo info = onednn::machine_info();
  std::printf("machine: %s\n  CPU model: %s | logical CPUs: %d | OpenMP threads: %d\n",
              onednn::machine_info_line(info).c_str(), info.cpu_model.c_str(), info.logical_cpus,
              omp_get_max_threads());
  std::printf("  flash kernel ISA: %s\n",
              kernels::kernel_isa_name(kernels::attention_flash_resolved_isa()));
  if (parts.find("dispatch") != std::string::npos) bench_dispatch(quick);
  if (parts.find("matmul") != std::string::npos) bench_matmul(quick);
  if (parts.find("attention") != std::string::npos) bench_attention(att);
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"bench ops",
                           "Benchmark the tensor engine (dispatch, matmul, fused attention)",
                           run_bench_ops});

}  // namespace patchbay::cli
