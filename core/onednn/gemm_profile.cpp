// Per-shape GEMM timing (see gemm_profile.hpp).
#include "onednn/gemm_profile.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <atomic>
#include <map>
#include <mutex>

namespace patchbay::onednn {
namespace {

std::atomic<bool> profiling{false};

struct Profile {
  std::mutex mutex;
  std::map<std::string, GemmShapeStat> by_shape;
};

Profile& profile() {
  static Profile p;
  return p;
}

// Whether a stat's shape names `dtype` ("bf16 [..." for "bf16").
bool of_dtype(const GemmShapeStat& s, const std::string& dtype) {
  return s.shape.compare(0, dtype.size() + 1, dtype + " ") == 0;
}

}  // namespace

void set_gemm_profiling(bool on) { profiling.store(on, std::memory_order_relaxed); }

bool gemm_profiling() { return profiling.load(std::memory_order_relaxed); }

std::vector<GemmShapeStat> take_gemm_profile() {
  Profile& p = profile();
  std::vector<GemmShapeStat> stats;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    for (auto& entry : p.by_shape) stats.push_back(std::move(entry.second));
    p.by_shape.clear();
  }
  std::sort(stats.begin(), stats.end(), [](const GemmShapeStat& a, const GemmShapeStat& b) {
    return a.seconds > b.seconds;
  });
  return stats;
}

GemmShapeStat gemm_profile_total(const std::vector<GemmShapeStat>& stats,
                                 const std::string& dtype) {
  GemmShapeStat total;
  total.shape = "all " + dtype + " GEMMs";
  for (const GemmShapeStat& s : stats) {
    if (!of_dtype(s, dtype)) continue;
    total.calls += s.calls;
    total.seconds += s.seconds;
    total.flops += s.flops;
  }
  return total;
}

std::string format_gemm_profile(const std::vector<GemmShapeStat>& stats, const std::string& dtype,
                                std::int64_t steps, double step_seconds, double reference_gflops,
                                std::size_t max_rows) {
  const double per_step = 1.0 / static_cast<double>(steps > 0 ? steps : 1);
  std::vector<const GemmShapeStat*> rows;
  const GemmShapeStat total = gemm_profile_total(stats, dtype);
  GemmShapeStat rest;
  std::size_t rest_shapes = 0;
  for (const GemmShapeStat& s : stats) {
    if (!of_dtype(s, dtype)) continue;
    if (rows.size() < max_rows) {
      rows.push_back(&s);
    } else {
      rest.calls += s.calls;
      rest.seconds += s.seconds;
      rest.flops += s.flops;
      ++rest_shapes;
    }
  }
  std::ostringstream out;
  if (total.calls == 0) {
    out << "  no " << dtype << " GEMMs recorded\n";
    return out.str();
  }
  auto line = [&](const GemmShapeStat& s, const std::string& name) {
    const double gflops = s.seconds > 0 ? s.flops / s.seconds / 1e9 : 0.0;
    char text[320];
    std::snprintf(text, sizeof text, "  %9.2f %9.1f %9.1f %7.0f%%   %s\n", 1e3 * s.seconds * per_step,
                  static_cast<double>(s.calls) * per_step, gflops, 100.0 * gflops / reference_gflops,
                  name.c_str());
    out << text;
  };
  out << "    ms/step calls/step   GFLOP/s  of ref.   shape (^T: stored transposed)\n";
  for (const GemmShapeStat* s : rows) line(*s, s->shape);
  char name[96];
  if (rest.calls > 0) {
    std::snprintf(name, sizeof name, "(%zu more shape%s)", rest_shapes, rest_shapes == 1 ? "" : "s");
    line(rest, name);
  }
  line(total, total.shape);
  char text[200];
  std::snprintf(text, sizeof text, "  GEMMs: %.1f%% of the step's time\n",
                100.0 * total.seconds * per_step / step_seconds);
  out << text;
  return out.str();
}

namespace detail {

void record_gemm(const std::string& shape, double seconds, double flops) {
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mutex);
  GemmShapeStat& stat = p.by_shape[shape];
  stat.shape = shape;
  ++stat.calls;
  stat.seconds += seconds;
  stat.flops += flops;
}

}  // namespace detail
}  // namespace patchbay::onednn
