// `patchbay bench attention [--seq-lens 512,1024,...] [--batch B] [--heads H] [--head-dim D]
// [--kinds a,b] [--set kind.key=value] [--max-seconds S]`: every attention component the plugin
// registry finds (dense is the reference, measured in the same run; a new attention plugin
// appears here without changes), forward + backward time and peak engine memory at each T, the
// exponent of a least-squares fit of log time and log memory against log T, and the crossover:
// the shortest T from which a kind is faster than dense at every longer measured T.
//
// Each kind is created with its default config (plus --set overrides), initialised as layer 0
// of a causal model with max_seq_len = T (so components that size themselves from T, such as
// sparse's automatic stride, do), and run on x [B, T, H*D] ~ N(0, 1) with loss = sum(y * w).
// Memory: the engine allocator's peak during forward + backward minus what was live before
// (parameters and x). Lengths run in order, every kind at one T before the next T; a kind stops
// after the first T whose run took longer than --max-seconds.
#include <boost/program_options.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/device.hpp"
#include "engine/generator.hpp"
#include "engine/ops.hpp"
#include "engine/ops_table.hpp"
#include "onednn/gemm_reference_rate.hpp"
#include "runtime/attention_handle.hpp"
#include "runtime/component_config.hpp"
#include "runtime/host_api.hpp"
#include "runtime/plugin_search_path.hpp"
#include "runtime/registry.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;
namespace eng = patchbay::engine;
using Clock = std::chrono::steady_clock;

struct Point {
  int64_t length = 0;
  double seconds = 0;  // forward + backward, best of the repeats
  double mib = 0;      // peak engine memory above the baseline
};

std::vector<int64_t> parse_lengths(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 1)
      throw Error(ErrorKind::kInvalidArgument,
                  "--seq-lens expects positive integers separated by commas, found '" + item + "'");
    out.push_back(v);
  }
  return out;
}

// Slope of the least-squares line of log y against log x (needs >= 2 points).
double fitted_exponent(const std::vector<Point>& points, bool memory) {
  std::vector<double> xs, ys;
  for (const Point& p : points) {
    const double y = memory ? p.mib : p.seconds;
    if (y <= 0) continue;
    xs.push_back(std::log(static_cast<double>(p.length)));
    ys.push_back(std::log(y));
  }
  if (xs.size() < 2) return std::nan("");
  double mx = 0, my = 0;
  for (size_t i = 0; i < xs.size(); ++i) mx += xs[i], my += ys[i];
  mx /= static_cast<double>(xs.size());
  my /= static_cast<double>(xs.size());
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < xs.size(); ++i) sxy += (xs[i] - mx) * (ys[i] - my), sxx += (xs[i] - mx) * (xs[i] - mx);
  return sxx > 0 ? sxy / sxx : std::nan("");
}

// Sets key=value on a component config, the value read as the field's type.
void apply_setting(runtime::ComponentConfig& config, const pb_component_descriptor& d, const std::string& key,
                   const std::string& value) {
  for (size_t i = 0; i < d.config_field_count; ++i) {
    const pb_config_field& f = d.config_fields[i];
    if (key != f.key) continue;
    switch (f.type) {
      case PB_TYPE_BOOL:
        config.set_bool(key, value == "true" || value == "1");
        return;
      case PB_TYPE_INT:
        config.set_int(key, std::stoll(value));
        return;
      case PB_TYPE_FLOAT:
        config.set_float(key, std::stod(value));
        return;
      case PB_TYPE_STRING:
        config.set_string(key, value);
        return;
      default:
        break;
    }
  }
  throw Error(ErrorKind::kInvalidArgument, "--set: attention '" + std::string(d.name) + "' has no scalar field '" +
                                               key + "' (see `patchbay plugins describe " + d.name + "`)");
}

// One forward + backward of `kind` at length t; returns the point (throws on failure).
Point measure(runtime::Registry& registry, const std::string& kind,
              const std::vector<std::pair<std::string, std::string>>& settings, int64_t batch, int64_t heads,
              int64_t head_dim, int64_t t, int repeats) {
  const pb_component_descriptor& descriptor = *registry.find(PB_KIND_ATTENTION, kind).descriptor;
  runtime::ComponentConfig config(descriptor);
  for (const auto& [key, value] : settings) apply_setting(config, descriptor, key, value);
  runtime::AttentionHandle layer(registry.create(PB_KIND_ATTENTION, kind, config.view()), registry.host());
  pb_layer_context ctx{};
  ctx.struct_size = sizeof(ctx);
  ctx.d_model = heads * head_dim;
  ctx.n_heads = heads;
  ctx.d_ff = 4 * ctx.d_model;
  ctx.max_seq_len = t;
  ctx.layer_index = 0;
  ctx.n_layers = 1;
  ctx.causal = 1;
  ctx.positional = PB_POSITIONAL_NONE;
  ctx.rope_theta = 10000.0;
  ctx.init_std = 0.02;
  ctx.residual_init_std = 0.02;
  ctx.seed = 1;
  ctx.param_dtype = PB_DTYPE_F32;
  ctx.device_type = PB_DEVICE_CPU;
  layer.init(ctx);
  eng::Generator gen(7);
  Point point;
  point.length = t;
  point.seconds = 1e300;
  for (int r = 0; r < repeats; ++r) {
    eng::Tensor x = eng::randn({batch, t, ctx.d_model}, gen);
    x.set_requires_grad(true);
    eng::Tensor w = eng::randn({batch, t, ctx.d_model}, gen);
    const size_t baseline = eng::memory_stats(eng::cpu()).current_bytes;
    eng::reset_peak(eng::cpu());
    const auto t0 = Clock::now();
    eng::Tensor y = layer.forward(x, true);
    eng::backward(eng::sum(eng::mul(y, w)));
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const size_t peak = eng::memory_stats(eng::cpu()).peak_bytes;
    point.seconds = std::min(point.seconds, seconds);
    point.mib = static_cast<double>(peak - std::min(peak, baseline)) / (1024.0 * 1024.0);
  }
  return point;
}

int run_bench_attention(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string lengths_text = "512,1024,2048,4096,8192,16384,32768", kinds_text;
  std::vector<std::string> sets;
  int64_t batch = 1, heads = 4, head_dim = 64;
  double max_seconds = 60;
  int repeats = 1;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("seq-lens", po::value(&lengths_text),
                                               "comma-separated T list (default 512..32768, doubling)")(
      "batch", po::value(&batch), "sequences (default 1)")("heads", po::value(&heads), "heads H (default 4)")(
      "head-dim", po::value(&head_dim), "head dim D (default 64; d_model = H * D)")(
      "kinds", po::value(&kinds_text), "comma-separated attention kinds (default: every one found)")(
      "set", po::value(&sets)->composing(), "KIND.KEY=VALUE: a component setting (repeatable)")(
      "max-seconds", po::value(&max_seconds), "stop a kind after a run longer than this (default 60)")(
      "repeats", po::value(&repeats), "runs per point, best time kept (default 1)");
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).run(), values);
  po::notify(values);
  if (values.count("help") != 0) {
    std::cout << "Usage: patchbay bench attention [--seq-lens LIST] [--batch B] [--heads H] [--head-dim D]\n\n"
                 "Forward + backward time and peak memory of every attention kind on the plugin path\n"
                 "(dense is the reference), fitted exponents against T and the crossover against dense.\n\n"
              << options;
    return kExitOk;
  }
  if (batch < 1 || heads < 1 || head_dim < 1 || repeats < 1)
    throw Error(ErrorKind::kInvalidArgument, "--batch, --heads, --head-dim and --repeats must be >= 1");
  const std::vector<int64_t> lengths = parse_lengths(lengths_text);

  // The engine behind the process host api, then every plugin on the search path.
  const pb_host_api* host = runtime::host_api();
  if (host->ops == nullptr) {
    eng::set_ops_status_functions({host->status_create, host->status_code, host->status_message, host->status_free});
    runtime::set_host_ops(eng::host_ops_table());
  }
  runtime::Registry registry(host);
  runtime::SearchPathOptions search;
  search.cli_paths = global.plugin_paths;
  registry.scan(runtime::plugin_search_path(search));
  std::vector<std::string> kinds;
  for (const auto& plugin : registry.plugins())
    for (const runtime::ComponentEntry& c : plugin->components)
      if (c.kind == PB_KIND_ATTENTION) kinds.push_back(c.name);
  if (!kinds_text.empty()) {
    std::vector<std::string> wanted;
    std::stringstream in(kinds_text);
    std::string k;
    while (std::getline(in, k, ',')) {
      if (std::find(kinds.begin(), kinds.end(), k) == kinds.end())
        throw Error(ErrorKind::kNotFound, "--kinds: no attention '" + k + "' on the plugin path");
      wanted.push_back(k);
    }
    kinds = wanted;
  }
  if (std::find(kinds.begin(), kinds.end(), "dense") == kinds.end())
    throw Error(ErrorKind::kNotFound, "bench attention needs attention 'dense' (the reference) on the plugin path");
  std::stable_partition(kinds.begin(), kinds.end(), [](const std::string& k) { return k == "dense"; });
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> settings;
  for (const std::string& s : sets) {
    const size_t dot = s.find('.'), eq = s.find('=');
    if (dot == std::string::npos || eq == std::string::npos || eq < dot)
      throw Error(ErrorKind::kInvalidArgument, "--set expects KIND.KEY=VALUE, found '" + s + "'");
    settings[s.substr(0, dot)].emplace_back(s.substr(dot + 1, eq - dot - 1), s.substr(eq + 1));
  }

  std::cout << "machine: " << onednn::machine_info_line(onednn::machine_info()) << "\n"
            << "shape: batch " << batch << ", heads " << heads << ", head dim " << head_dim
            << ", causal, forward + backward of one attention layer (projections included)\n";
  std::map<std::string, std::vector<Point>> results;
  std::printf("%-10s %8s %12s %12s %10s\n", "kind", "T", "fwd+bwd s", "peak MiB", "vs dense");
  // T outer, kinds inner: every kind at one T is measured within a short interval, so a change
  // of machine load between kinds does not skew their ratio.
  std::map<std::string, bool> stopped;
  for (int64_t t : lengths) {
    for (const std::string& kind : kinds) {
      if (stopped[kind]) continue;
      Point p;
      try {
        p = measure(registry, kind, settings[kind], batch, heads, head_dim, t, repeats);
      } catch (const std::exception& e) {
        std::printf("%-10s %8lld  failed: %s\n", kind.c_str(), static_cast<long long>(t), e.what());
        stopped[kind] = true;
        continue;
      }
      results[kind].push_back(p);
      std::string ratio = "-";
      for (const Point& d : results["dense"])
        if (d.length == t && kind != "dense") ratio = std::to_string(d.seconds / p.seconds).substr(0, 5) + "x";
      std::printf("%-10s %8lld %12.4f %12.1f %10s\n", kind.c_str(), static_cast<long long>(t), p.seconds, p.mib,
                  ratio.c_str());
      std::fflush(stdout);
      if (p.seconds > max_seconds) stopped[kind] = true;
    }
  }
  std::printf("\n%-10s %14s %14s %22s\n", "kind", "time exponent", "memory exponent", "faster than dense from T");
  for (const std::string& kind : kinds) {
    const std::vector<Point>& points = results[kind];
    // Exponents over T >= 1024 where available (short runs are dominated by fixed costs).
    std::vector<Point> fit;
    for (const Point& p : points)
      if (p.length >= 1024) fit.push_back(p);
    if (fit.size() < 2) fit = points;
    std::string crossover = "-";
    if (kind != "dense") {
      crossover = "never (in range)";
      for (size_t i = 0; i < points.size(); ++i) {
        bool faster_from_here = true;
        bool compared = false;
        for (size_t j = i; j < points.size(); ++j)
          for (const Point& d : results["dense"])
            if (d.length == points[j].length) {
              compared = true;
              if (points[j].seconds >= d.seconds) faster_from_here = false;
            }
        if (compared && faster_from_here) {
          crossover = std::to_string(points[i].length);
          break;
        }
      }
    }
    std::printf("%-10s %14.2f %14.2f %22s\n", kind.c_str(), fitted_exponent(fit, false), fitted_exponent(fit, true),
                crossover.c_str());
  }
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"bench attention",
                           "Forward+backward time and memory of every attention kind vs T, exponents, crossover",
                           run_bench_attention});

}  // namespace patchbay::cli
