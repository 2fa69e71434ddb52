// Times the flash attention and the naive reference (forward, then backward) on causal
// self-attention of growing length; see attention_bench.hpp for the FLOP convention.
#include "patchbay/kernels/attention_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>

#include "patchbay/kernels/attention_flash.hpp"
#include "patchbay/kernels/attention_reference.hpp"

namespace patchbay::kernels {
namespace {

// Tensors of one benchmark size, all dense [B, heads, T, D].
struct BenchTensors {
  std::vector<float> q, k, v, out, lse, dout, dq, dk, dv;
  AttentionParams params;
};

void fill_uniform(std::vector<float>& data, std::uint64_t seed) {
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : data) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x = float(double(state >> 40) / double(1ull << 24) * 2.0 - 1.0);
  }
}

BenchTensors make_tensors(const AttentionBenchConfig& c, std::int64_t t) {
  BenchTensors s;
  const auto n = static_cast<std::size_t>(c.batch * c.heads * t * c.head_dim);
  for (auto* v : {&s.q, &s.k, &s.v, &s.out, &s.dout, &s.dq, &s.dk, &s.dv}) v->resize(n);
  s.lse.resize(static_cast<std::size_t>(c.batch * c.heads * t));
  fill_uniform(s.q, 1);
  fill_uniform(s.k, 2);
  fill_uniform(s.v, 3);
  fill_uniform(s.dout, 4);
  AttentionParams& p = s.params;
  p.batch = c.batch;
  p.heads = p.kv_heads = c.heads;
  p.q_len = p.kv_len = t;
  p.head_dim = c.head_dim;
  const AttentionStrides dense = contiguous_attention_strides(c.heads, t, c.head_dim);
  p.q = s.q.data(), p.k = s.k.data(), p.v = s.v.data(), p.out = s.out.data();
  p.dout = s.dout.data(), p.dq = s.dq.data(), p.dk = s.dk.data(), p.dv = s.dv.data();
  p.q_strides = p.k_strides = p.v_strides = p.out_strides = dense;
  p.dout_strides = p.dq_strides = p.dk_strides = p.dv_strides = dense;
  p.lse = s.lse.data();
  p.scale = float(1.0 / std::sqrt(double(c.head_dim)));
  p.causal = c.causal;
  p.num_threads = c.num_threads;
  p.isa = c.isa;
  return s;
}

struct Timing {
  double wall_ms = -1;
  double cpu_ms = -1;
};

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Best wall time (and the CPU time of that run) over repeats lasting at least min_seconds.
Timing best_time(const std::function<std::string()>& run, double min_seconds) {
  Timing best;
  double spent = 0;
  do {
    const double cpu_start = process_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    if (std::string error = run(); !error.empty()) {
      std::fprintf(stderr, "attention bench: %s\n", error.c_str());
      return Timing{};
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double cpu = process_cpu_seconds() - cpu_start;
    if (best.wall_ms < 0 || s * 1e3 < best.wall_ms) best = Timing{s * 1e3, cpu * 1e3};
    spent += s;
  } while (spent < min_seconds);
  return best;
}

// Times forward then backward of `p` into `row` (wall and CPU ms of the best runs, GF/s at the
// nominal FLOP of the file's convention).
void time_into(AttentionBenchRow& row, const AttentionParams& p, double fwd_flop,
               double min_seconds) {
  const Timing fwd = best_time([&] { return attention_flash_forward(p); }, min_seconds);
  const Timing bwd = best_time([&] { return attention_flash_backward(p); }, min_seconds);
  row.forward_ms = fwd.wall_ms, row.forward_cpu_ms = fwd.cpu_ms;
  row.backward_ms = bwd.wall_ms, row.backward_cpu_ms = bwd.cpu_ms;
  row.forward_gflops = fwd_flop / (row.forward_ms * 1e6);
  row.backward_gflops = 2.5 * fwd_flop / (row.backward_ms * 1e6);
}

// Round-to-nearest-even bf16 bits of every value (the inputs are finite).
std::vector<std::uint16_t> bf16_bits(const std::vector<float>& values) {
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint32_t x;
    std::memcpy(&x, &values[i], sizeof x);
    bits[i] = std::uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
  return bits;
}

// The bf16 kernel on the same tensors rounded to bf16, charged the same nominal FLOP (so GF/s
// ratios to the flash row are speed ratios); max|diff| is against the f32 flash output.
AttentionBenchRow bf16_row(const AttentionBenchConfig& c, const BenchTensors& s, double fwd_flop) {
  AttentionBenchRow row;
  row.seq_len = s.params.q_len;
  row.kernel = "bf16";
  const std::vector<std::uint16_t> q = bf16_bits(s.q), k = bf16_bits(s.k), v = bf16_bits(s.v),
                                   dout = bf16_bits(s.dout);
  std::vector<float> out(s.out.size()), lse(s.lse.size()), dq(s.dq.size()), dk(s.dk.size()),
      dv(s.dv.size());
  AttentionParams p = s.params;
  p.q = p.k = p.v = p.dout = nullptr;
  p.q_bf16 = q.data(), p.k_bf16 = k.data(), p.v_bf16 = v.data(), p.dout_bf16 = dout.data();
  p.out = out.data(), p.lse = lse.data(), p.dq = dq.data(), p.dk = dk.data(), p.dv = dv.data();
  row.forward_workspace_bytes = attention_flash_workspace_bytes(p, AttentionPass::forward);
  row.backward_workspace_bytes = attention_flash_workspace_bytes(p, AttentionPass::backward);
  time_into(row, p, fwd_flop, c.min_seconds_per_measure);
  double diff = 0;
  for (std::size_t i = 0; i < out.size(); ++i)
    diff = std::max(diff, double(std::fabs(out[i] - s.out[i])));
  row.max_abs_diff_vs_flash = diff;
  return row;
}

}  // namespace

double attention_forward_flop(std::int64_t batch, std::int64_t heads, std::int64_t q_len,
                              std::int64_t kv_len, std::int64_t head_dim, bool causal) {
  const double full = 4.0 * double(batch) * double(heads) * double(q_len) * double(kv_len) *
                      double(head_dim);
  return causal ? full / 2.0 : full;
}

std::vector<AttentionBenchRow> run_attention_bench(const AttentionBenchConfig& c) {
  std::vector<AttentionBenchRow> rows;
  for (const std::int64_t t : c.seq_lens) {
    BenchTensors s = make_tensors(c, t);
    const AttentionParams& p = s.params;
    const double fwd_flop = attention_forward_flop(c.batch, c.heads, t, t, c.head_dim, c.causal);

    AttentionBenchRow flash;
    flash.seq_len = t;
    flash.kernel = "flash";
    flash.forward_workspace_bytes = attention_flash_workspace_bytes(p, AttentionPass::forward);
    flash.backward_workspace_bytes = attention_flash_workspace_bytes(p, AttentionPass::backward);
    time_into(flash, p, fwd_flop, c.min_seconds_per_measure);
    rows.push_back(flash);

    if (c.bf16 && attention_flash_bf16_supported() && c.head_dim % 2 == 0 &&
        (c.isa == KernelIsa::automatic || c.isa == KernelIsa::avx512)) {
      rows.push_back(bf16_row(c, s, fwd_flop));
    }

    if (c.window > 0 || c.alibi) {
      AttentionParams with_options = p;
      std::vector<float> slopes;
      for (std::int64_t h = 0; h < c.heads; ++h) slopes.push_back(std::exp2(-8.0f * float(h + 1) / float(c.heads)));
      with_options.window = c.window;
      with_options.alibi_slopes = c.alibi ? slopes.data() : nullptr;
      AttentionBenchRow optioned = flash;
      optioned.kernel = "flash*";
      // Charged the same nominal FLOP as the plain row: GF/s ratios are speed ratios.
      time_into(optioned, with_options, fwd_flop, c.min_seconds_per_measure);
      rows.push_back(optioned);
      // Restore the plain output, which the naive row is compared with.
      if (std::string error = attention_flash_forward(p); !error.empty())
        std::fprintf(stderr, "attention bench: %s\n", error.c_str());
    }

    if (c.packed_segment_len > 0) {
      std::vector<std::int32_t> segments(static_cast<std::size_t>(c.batch * t));
      for (std::int64_t i = 0; i < c.batch * t; ++i)
        segments[static_cast<std::size_t>(i)] = std::int32_t(i % t / c.packed_segment_len);
      AttentionParams packed = p;
      packed.segment_ids = segments.data();
      AttentionBenchRow row = flash;
      row.kernel = "packed";
      time_into(row, packed, fwd_flop, c.min_seconds_per_measure);  // same nominal FLOP
      rows.push_back(row);
      if (std::string error = attention_flash_forward(p); !error.empty())
        std::fprintf(stderr, "attention bench: %s\n", error.c_str());
    }

    AttentionBenchRow naive;
    naive.seq_len = t;
    naive.kernel = "naive";
    naive.forward_workspace_bytes = attention_reference_workspace_bytes(p, AttentionPass::forward);
    naive.backward_workspace_bytes = attention_reference_workspace_bytes(p, AttentionPass::backward);
    if (naive.backward_workspace_bytes > c.naive_max_workspace_bytes) {
      naive.skip_reason = "skipped: T x T buffers exceed the workspace limit";
    } else if (c.naive_max_seq_len > 0 && t > c.naive_max_seq_len) {
      naive.skip_reason = "skipped: longer than naive_max_seq_len";
    }
    if (naive.skip_reason.empty()) {
      const std::vector<float> flash_out = s.out;
      const Timing naive_fwd = best_time([&] { return attention_reference_forward(p); }, 0);
      const Timing naive_bwd = best_time([&] { return attention_reference_backward(p); }, 0);
      naive.forward_ms = naive_fwd.wall_ms, naive.forward_cpu_ms = naive_fwd.cpu_ms;
      naive.backward_ms = naive_bwd.wall_ms, naive.backward_cpu_ms = naive_bwd.cpu_ms;
      naive.forward_gflops = fwd_flop / (naive.forward_ms * 1e6);
      naive.backward_gflops = 2.5 * fwd_flop / (naive.backward_ms * 1e6);
      double diff = 0;
      for (std::size_t i = 0; i < flash_out.size(); ++i) {
        diff = std::max(diff, double(std::fabs(flash_out[i] - s.out[i])));
      }
      naive.max_abs_diff_vs_flash = diff;
    }
    rows.push_back(naive);
  }
  return rows;
}

void print_attention_bench(const std::vector<AttentionBenchRow>& rows, std::ostream& os) {
  os << "attention fwd+bwd, FLOP: fwd = 4*B*H*Tq*Tk*D (/2 causal), bwd = 2.5 x fwd\n";
  char line[256];
  std::snprintf(line, sizeof line, "%7s %-6s %10s %10s %9s %10s %10s %9s %11s %11s %10s\n", "T",
                "kernel", "fwd ms", "(cpu ms)", "fwd GF/s", "bwd ms", "(cpu ms)", "bwd GF/s",
                "fwd ws MiB", "bwd ws MiB", "max|diff|");
  os << line;
  for (const AttentionBenchRow& r : rows) {
    const double fwd_mib = double(r.forward_workspace_bytes) / (1 << 20);
    const double bwd_mib = double(r.backward_workspace_bytes) / (1 << 20);
    if (!r.skip_reason.empty()) {
      std::snprintf(line, sizeof line, "%7lld %-6s %s (needs %.0f MiB)\n", (long long)r.seq_len,
                    r.kernel.c_str(), r.skip_reason.c_str(), bwd_mib);
    } else {
      char diff[32] = "-";
      if (r.max_abs_diff_vs_flash >= 0) std::snprintf(diff, sizeof diff, "%.2e", r.max_abs_diff_vs_flash);
      std::snprintf(line, sizeof line,
                    "%7lld %-6s %10.2f %10.2f %9.1f %10.2f %10.2f %9.1f %11.2f %11.2f %10s\n",
                    (long long)r.seq_len, r.kernel.c_str(), r.forward_ms, r.forward_cpu_ms,
                    r.forward_gflops, r.backward_ms, r.backward_cpu_ms, r.backward_gflops, fwd_mib,
                    bwd_mib, diff);
    }
    os << line;
  }
}

}  // namespace patchbay::kernels
