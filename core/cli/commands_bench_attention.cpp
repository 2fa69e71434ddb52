// `patchbay bench attention [--seq-lens 512,1024,...] [--batch B] [--heads H] [--head-dim D]
// [--kinds a,b] [--set kind.key=value] [--max-seconds S] [--repeats N] [--warmup N]
// [--bidirectional | --decode] [--precision f32,bf16]`: every
// attention component the plugin registry finds (dense is the reference, measured in the same
// run; a new attention plugin appears here without changes), forward + backward time and peak
// engine memory at each T, the exponent of a least-squares fit of log time and log memory
// against log T, and the crossover: the shortest T from which a kind is faster than dense at
// every longer measured T.
// Efficiency: each kind's counted FLOPs at each T (its own formula, attention_flop_count.hpp and
// the plugin's README; "-" for a kind without one), the achieved GFLOP/s, and that rate as a
// share of oneDNN's f32 GEMM rate measured just before that T in the same process (the
// "reference at T" line), so a kind's efficiency is a number that survives machine load.
//
// Each kind is created with its default config (plus --set overrides), initialised as layer 0
// of a causal model with max_seq_len = T (so components that size themselves from T, such as
// sparse's automatic stride, do), and run on x [B, T, H*D] ~ N(0, 1) with loss = sum(y * w).
// Each point runs --warmup untimed passes (default 1: a shape's first pass pays first-touch
// zeroing of fresh pages and the caching allocator's growth, up to a third of a single run's
// time for the kinds with large temporaries, which no later training step pays), then
// --repeats timed passes, the best kept.
// Memory: the engine allocator's peak during forward + backward minus what was live before
// (parameters and x). Lengths run in order, every kind at one T before the next T; a kind stops
// after the first T whose run took longer than --max-seconds.
//
// --bidirectional: layer 0 of a bidirectional model (pb_layer_context::causal = 0), every kind
// with a `causal` key set to false (unless --set says otherwise); kinds without
// PB_ATTENTION_CAP_NONCAUSAL are left out, bidirectional-only ones (Linformer) come in, and the
// reference is dense without a mask. Without it, kinds lacking PB_ATTENTION_CAP_CAUSAL are
// left out with a note.
// --decode: incremental decoding cost against the position instead: for each T a fresh
// decoding state is prefilled with T positions (one forward_step call), then --decode-steps
// single-token steps are timed; printed: the median ms per token, the state's size (engine
// memory held after the prefill), and the fitted exponents of both against T (a KV cache
// grows ~1, a recurrent state stays ~0). Kinds without a decoding state are left out.
// --precision f32 (default), bf16 or f32,bf16: the engine's matmul autocast (engine/autocast.hpp,
// what [train] precision = "bf16" turns on) around each pass, opened per pass as the trainer
// opens it per update. bf16 rows are labelled KIND/bf16 and compared with dense/bf16 of the same
// run; the efficiency column stays a share of the f32 GEMM reference. Under bf16 the projections
// run as bf16 GEMMs, dense attention runs its bf16 flash kernel where the CPU has AVX512-BF16
// (f32 elsewhere), and causal linear, Performer and LSH attention run their kernels with bf16
// operands on every CPU (bf16-exact f32 values through f32 FMAs: not faster without
// AVX512-BF16, see docs/benchmarks/2026-11-28-efficient-attention-bf16.md).
#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/attention_flop_count.hpp"
#include "cli/command.hpp"
#include "common/error.hpp"
#include "common/parse_number.hpp"
#include "engine/autocast.hpp"
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

// --precision: a comma-separated list of f32 and bf16, each at most once.
std::vector<eng::DType> parse_precisions(const std::string& text) {
  std::vector<eng::DType> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const eng::DType d = item == "f32" ? eng::DType::kF32 : eng::DType::kBF16;
    if ((item != "f32" && item != "bf16") || std::find(out.begin(), out.end(), d) != out.end())
      throw Error(ErrorKind::kInvalidArgument,
                  "--precision expects f32, bf16 or f32,bf16 (each once), found '" + text + "'");
    out.push_back(d);
  }
  if (out.empty())
    throw Error(ErrorKind::kInvalidArgument, "--precision expects f32, bf16 or f32,bf16, found ''");
  return out;
}

// The row label of `kind` measured in `precision`: the kind itself in f32, KIND/bf16 in bf16.
std::string label_of(const std::string& kind, eng::DType precision) {
  return precision == eng::DType::kF32 ? kind : kind + "/bf16";
}

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
  for (size_t i = 0; i < xs.size(); ++i)
    sxy += (xs[i] - mx) * (ys[i] - my), sxx += (xs[i] - mx) * (xs[i] - mx);
  return sxx > 0 ? sxy / sxx : std::nan("");
}

// Sets key=value on a component config, the value read as the field's type.
void apply_setting(runtime::ComponentConfig& config, const pb_component_descriptor& d,
                   const std::string& key, const std::string& value) {
  for (size_t i = 0; i < d.config_field_count; ++i) {
    const pb_config_field& f = d.config_fields[i];
    if (key != f.key) continue;
    switch (f.type) {
      case PB_TYPE_BOOL:
        config.set_bool(key, value == "true" || value == "1");
        return;
      case PB_TYPE_INT: {
        const std::optional<int64_t> number = parse_int64(value);
        if (!number)
          throw Error(ErrorKind::kInvalidArgument,
                      "--set " + key + "=" + value + ": '" + key +
                          "' is an integer setting; give a whole number");
        config.set_int(key, *number);
        return;
      }
      case PB_TYPE_FLOAT: {
        const std::optional<double> number = parse_double(value);
        if (!number)
          throw Error(ErrorKind::kInvalidArgument,
                      "--set " + key + "=" + value + ": '" + key +
                          "' is a number setting; give a number such as 0.5");
        config.set_float(key, *number);
        return;
      }
      case PB_TYPE_STRING:
        config.set_string(key, value);
        return;
      default:
        break;
    }
  }
  throw Error(ErrorKind::kInvalidArgument,
              "--set: attention '" + std::string(d.name) + "' has no scalar field '" + key +
                  "' (see `patchbay plugins describe " + d.name + "`)");
}

// The shape of one benchmark: what every kind is measured on.
struct BenchShape {
  int64_t batch = 1, heads = 4, head_dim = 64;
  bool causal = true;
};

// `kind` with its default config plus `settings`, initialised as layer 0 of a causal (or, with
// shape.causal false, bidirectional) model of max_seq_len positions. In a bidirectional bench
// a kind's own `causal` key is set to false unless the settings name it.
runtime::ComponentConfig make_config(
    runtime::Registry& registry, const std::string& kind,
    const std::vector<std::pair<std::string, std::string>>& settings, const BenchShape& shape) {
  const pb_component_descriptor& descriptor = *registry.find(PB_KIND_ATTENTION, kind).descriptor;
  runtime::ComponentConfig config(descriptor);
  bool causal_set = false;
  for (const auto& [key, value] : settings) {
    apply_setting(config, descriptor, key, value);
    causal_set = causal_set || key == "causal";
  }
  if (!shape.causal && !causal_set)
    for (size_t i = 0; i < descriptor.config_field_count; ++i)
      if (std::string(descriptor.config_fields[i].key) == "causal" &&
          descriptor.config_fields[i].type == PB_TYPE_BOOL)
        config.set_bool("causal", false);
  return config;
}

runtime::AttentionHandle make_layer(
    runtime::Registry& registry, const std::string& kind,
    const std::vector<std::pair<std::string, std::string>>& settings, const BenchShape& shape,
    int64_t max_seq_len) {
  runtime::ComponentConfig config = make_config(registry, kind, settings, shape);
  runtime::AttentionHandle layer(registry.create(PB_KIND_ATTENTION, kind, config.view()),
                                 registry.host());
  pb_layer_context ctx{};
  ctx.struct_size = sizeof(ctx);
  ctx.d_model = shape.heads * shape.head_dim;
  ctx.n_heads = shape.heads;
  ctx.d_ff = 4 * ctx.d_model;
  ctx.max_seq_len = max_seq_len;
  ctx.layer_index = 0;
  ctx.n_layers = 1;
  ctx.causal = shape.causal ? 1 : 0;
  ctx.positional = PB_POSITIONAL_NONE;
  ctx.rope_theta = 10000.0;
  ctx.init_std = 0.02;
  ctx.residual_init_std = 0.02;
  ctx.seed = 1;
  ctx.param_dtype = PB_DTYPE_F32;
  ctx.device_type = PB_DEVICE_CPU;
  layer.init(ctx);
  return layer;
}

// The FLOPs counted for one forward + backward of `kind` at length t (attention_flop_count.hpp),
// read from its resolved config (defaults plus --set); nullopt for a kind without a formula.
std::optional<AttentionFlops> counted_flops(
    runtime::Registry& registry, const std::string& kind,
    const std::vector<std::pair<std::string, std::string>>& settings, const BenchShape& shape,
    int64_t t) {
  runtime::ComponentConfig config = make_config(registry, kind, settings, shape);
  const pb_config_view& view = config.view();
  const ConfigIntLookup lookup = [&view](const std::string& key) -> std::optional<int64_t> {
    for (size_t i = 0; i < view.count; ++i) {
      const pb_config_value& v = *PB_ARRAY_AT(pb_config_value, view.values, i);
      if (v.key != nullptr && key == v.key && v.type == PB_TYPE_INT) return v.int_value;
    }
    return std::nullopt;
  };
  return attention_flops(
      kind, lookup, AttentionFlopShape{shape.batch, t, shape.heads, shape.head_dim, shape.causal});
}

// The same-run reference: oneDNN's f32 GEMM [kGemmSide x kGemmSide] x [kGemmSide x kGemmSide]
// (plain B, f32 output, median of its samples), measured before each length so that it sees
// the load the kinds at that length see.
constexpr int64_t kGemmSide = 1024;
double reference_gemm_gflops() {
  onednn::GemmRateOptions options;
  options.warmup_iterations = 1;
  options.repeats = 5;
  return onednn::measure_onednn_matmul_rate(kGemmSide, kGemmSide, kGemmSide, onednn::DType::kF32,
                                            options)
      .median_gflops;
}

// One forward + backward of `kind` at length t under the autocast policy `precision` (kF32 or
// kBF16, one scope per pass); returns the point (throws on failure).
Point measure(runtime::Registry& registry, const std::string& kind,
              const std::vector<std::pair<std::string, std::string>>& settings,
              const BenchShape& shape, int64_t t, int warmups, int repeats, eng::DType precision) {
  runtime::AttentionHandle layer = make_layer(registry, kind, settings, shape, t);
  const int64_t batch = shape.batch, d_model = shape.heads * shape.head_dim;
  eng::Generator gen(7);
  Point point;
  point.length = t;
  point.seconds = 1e300;
  for (int r = -warmups; r < repeats; ++r) {  // r < 0: untimed warm-up runs
    eng::Tensor x = eng::randn({batch, t, d_model}, gen);
    x.set_requires_grad(true);
    eng::Tensor w = eng::randn({batch, t, d_model}, gen);
    const size_t baseline = eng::memory_stats(eng::cpu()).current_bytes;
    eng::reset_peak(eng::cpu());
    const auto t0 = Clock::now();
    {
      eng::AutocastGuard policy(precision);
      eng::Tensor y = layer.forward(x, true);
      eng::backward(eng::sum(eng::mul(y, w)));
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const size_t peak = eng::memory_stats(eng::cpu()).peak_bytes;
    if (r < 0) continue;
    point.seconds = std::min(point.seconds, seconds);
    point.mib = static_cast<double>(peak - std::min(peak, baseline)) / (1024.0 * 1024.0);
  }
  return point;
}

// Decoding cost at position t: a fresh state prefilled with t positions in one call, then
// `steps` single-token steps timed one by one. Point::seconds is the median step (seconds per
// token), Point::mib the engine memory the state holds after the prefill (what stays allocated
// beyond the parameters once the prefill's output is freed).
Point measure_decode(runtime::Registry& registry, const std::string& kind,
                     const std::vector<std::pair<std::string, std::string>>& settings,
                     const BenchShape& shape, int64_t t, int steps) {
  runtime::AttentionHandle layer = make_layer(registry, kind, settings, shape, t + steps);
  const int64_t d_model = shape.heads * shape.head_dim;
  eng::NoGradGuard no_grad;
  eng::Generator gen(7);
  const eng::Tensor prompt = eng::randn({shape.batch, t, d_model}, gen);
  std::vector<eng::Tensor> tokens;
  for (int i = 0; i < steps; ++i) tokens.push_back(eng::randn({shape.batch, 1, d_model}, gen));
  const size_t baseline = eng::memory_stats(eng::cpu()).current_bytes;
  runtime::AttentionHandle::State state = layer.state_create(shape.batch, t + steps);
  { const eng::Tensor prefill = layer.forward_step(state, prompt); }
  const size_t held = eng::memory_stats(eng::cpu()).current_bytes;
  std::vector<double> seconds;
  for (const eng::Tensor& x : tokens) {
    const auto t0 = Clock::now();
    const eng::Tensor y = layer.forward_step(state, x);
    seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(seconds.begin(), seconds.end());
  Point point;
  point.length = t;
  point.seconds = seconds[seconds.size() / 2];
  point.mib = static_cast<double>(held - std::min(held, baseline)) / (1024.0 * 1024.0);
  return point;
}

int run_bench_attention(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string lengths_text = "512,1024,2048,4096,8192,16384,32768", kinds_text;
  std::vector<std::string> sets;
  BenchShape shape;
  double max_seconds = 60;
  int repeats = 1, warmups = 1, decode_steps = 16;
  bool bidirectional = false, decode = false;
  std::string precision_text = "f32";
  po::options_description options("Options");
  options.add_options()("help,h", "this help")(
      "seq-lens", po::value(&lengths_text),
      "comma-separated T list (default 512..32768, doubling)")(
      "batch", po::value(&shape.batch), "sequences (default 1)")("heads", po::value(&shape.heads),
                                                                 "heads H (default 4)")(
      "head-dim", po::value(&shape.head_dim), "head dim D (default 64; d_model = H * D)")(
      "kinds", po::value(&kinds_text),
      "comma-separated attention kinds (default: every one found)")(
      "set", po::value(&sets)->composing(), "KIND.KEY=VALUE: a component setting (repeatable)")(
      "max-seconds", po::value(&max_seconds),
      "stop a kind after a run longer than this (default 60)")(
      "repeats", po::value(&repeats), "timed runs per point, best time kept (default 1)")(
      "warmup", po::value(&warmups),
      "untimed runs before them (default 1): the first run of a shape pays first-touch page "
      "zeroing of its temporaries and the allocator's growth, which a training step does not")(
      "bidirectional", po::bool_switch(&bidirectional),
      "bidirectional layers (no causal mask; `causal` keys set to false; Linformer included)")(
      "decode", po::bool_switch(&decode),
      "decoding cost per token against the position T (prefill T, then time single steps)")(
      "decode-steps", po::value(&decode_steps),
      "--decode: single-token steps timed per T (median kept; default 16)")(
      "precision", po::value(&precision_text),
      "f32 (default), bf16 or f32,bf16: the engine's bf16 matmul autocast around each pass, as "
      "[train] precision = \"bf16\" (bf16 rows are KIND/bf16, compared with dense/bf16)");
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).run(), values);
  po::notify(values);
  if (values.count("help") != 0) {
    std::cout
        << "Usage: patchbay bench attention [--seq-lens LIST] [--batch B] [--heads H] [--head-dim "
           "D]\n"
           "                                [--bidirectional | --decode] [--precision LIST]\n\n"
           "Forward + backward time and peak memory of every attention kind on the plugin path\n"
           "(dense is the reference), fitted exponents against T and the crossover against dense,\n"
           "each kind's counted FLOPs and its rate as a share of a same-run oneDNN GEMM.\n"
           "--bidirectional measures the layers without a causal mask (Linformer joins, dense\n"
           "unmasked is the reference); --decode measures the cost of one decoding step and the\n"
           "state's size against the position instead.\n\n"
        << options;
    return kExitOk;
  }
  if (shape.batch < 1 || shape.heads < 1 || shape.head_dim < 1 || repeats < 1 || warmups < 0 ||
      decode_steps < 1)
    throw Error(
        ErrorKind::kInvalidArgument,
        "--batch, --heads, --head-dim, --repeats and --decode-steps must be >= 1, --warmup >= 0");
  if (bidirectional && decode)
    throw Error(
        ErrorKind::kInvalidArgument,
        "--decode measures incremental (causal) decoding; a bidirectional layer has no decoding "
        "state. Use one of --bidirectional and --decode");
  shape.causal = !bidirectional;
  const std::vector<int64_t> lengths = parse_lengths(lengths_text);
  const std::vector<eng::DType> precisions = parse_precisions(precision_text);

  // The engine behind the process host api, then every plugin on the search path.
  const pb_host_api* host = runtime::host_api();
  if (host->ops == nullptr) {
    eng::set_ops_status_functions(
        {host->status_create, host->status_code, host->status_message, host->status_free});
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
  // Kinds that cannot run in this mode are left out, with the reason.
  std::erase_if(kinds, [&](const std::string& kind) {
    const auto* vt = static_cast<const pb_attention_vtable*>(
        registry.find(PB_KIND_ATTENTION, kind).descriptor->vtable);
    const char* why = nullptr;
    if (bidirectional && (vt->capabilities & PB_ATTENTION_CAP_NONCAUSAL) == 0)
      why = "causal only (no PB_ATTENTION_CAP_NONCAUSAL)";
    else if (!bidirectional && (vt->capabilities & PB_ATTENTION_CAP_CAUSAL) == 0)
      why = "bidirectional only (measure it with --bidirectional)";
    else if (decode && vt->cache_kind == PB_ATTENTION_CACHE_NONE)
      why = "no decoding state";
    if (why != nullptr) std::printf("left out: %s, %s\n", kind.c_str(), why);
    return why != nullptr;
  });
  if (std::find(kinds.begin(), kinds.end(), "dense") == kinds.end())
    throw Error(ErrorKind::kNotFound,
                "bench attention needs attention 'dense' (the reference) on the plugin path");
  std::stable_partition(kinds.begin(), kinds.end(),
                        [](const std::string& k) { return k == "dense"; });
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> settings;
  for (const std::string& s : sets) {
    const size_t dot = s.find('.'), eq = s.find('=');
    if (dot == std::string::npos || eq == std::string::npos || eq < dot)
      throw Error(ErrorKind::kInvalidArgument, "--set expects KIND.KEY=VALUE, found '" + s + "'");
    settings[s.substr(0, dot)].emplace_back(s.substr(dot + 1, eq - dot - 1), s.substr(eq + 1));
  }

  std::cout
      << "machine: " << onednn::machine_info_line(onednn::machine_info()) << "\n"
      << "shape: batch " << shape.batch << ", heads " << shape.heads << ", head dim "
      << shape.head_dim << ", "
      << (decode
              ? "causal, one decoding step (median of " + std::to_string(decode_steps) +
                    ") after a prefill of T positions, one attention layer (projections included)"
              : std::string(bidirectional ? "bidirectional" : "causal") +
                    ", forward + backward of one attention layer (projections included)")
      << "\n";
  std::map<std::string, std::vector<Point>> results;  // by row label (label_of)
  // Kind column width: 10, or 15 to fit KIND/bf16 labels.
  const int kw =
      std::find(precisions.begin(), precisions.end(), eng::DType::kBF16) != precisions.end() ? 15
                                                                                             : 10;
  if (decode)
    std::printf("%-*s %8s %12s %12s %10s\n", kw, "kind", "T", "ms/token", "state MiB", "vs dense");
  else
    std::printf("%-*s %8s %12s %12s %10s %10s %10s %8s\n", kw, "kind", "T", "fwd+bwd s", "peak MiB",
                "vs dense", "GFLOP", "GFLOP/s", "of GEMM");
  // T outer, kinds inner: every kind at one T is measured within a short interval, so a change
  // of machine load between kinds does not skew their ratio.
  std::map<std::string, bool> stopped;
  for (int64_t t : lengths) {
    double gemm_gflops = 0;
    if (!decode) {
      gemm_gflops = reference_gemm_gflops();
      std::printf(
          "reference at T = %lld: oneDNN f32 GEMM [%lld x %lld] x [%lld x %lld] %.1f GFLOP/s\n",
          static_cast<long long>(t), static_cast<long long>(kGemmSide),
          static_cast<long long>(kGemmSide), static_cast<long long>(kGemmSide),
          static_cast<long long>(kGemmSide), gemm_gflops);
    }
    for (const std::string& kind : kinds) {
      for (const eng::DType precision : precisions) {
        const std::string name = label_of(kind, precision);
        const std::string dense = label_of("dense", precision);
        if (stopped[name]) continue;
        Point p;
        try {
          if (decode) {
            eng::AutocastGuard policy(precision);
            p = measure_decode(registry, kind, settings[kind], shape, t, decode_steps);
          } else {
            p = measure(registry, kind, settings[kind], shape, t, warmups, repeats, precision);
          }
        } catch (const std::exception& e) {
          std::printf("%-*s %8lld  failed: %s\n", kw, name.c_str(), static_cast<long long>(t),
                      e.what());
          stopped[name] = true;
          continue;
        }
        results[name].push_back(p);
        std::string ratio = "-";
        for (const Point& d : results[dense])
          if (d.length == t && name != dense)
            ratio = std::to_string(d.seconds / p.seconds).substr(0, 5) + "x";
        if (decode) {
          std::printf("%-*s %8lld %12.4f %12.1f %10s\n", kw, name.c_str(),
                      static_cast<long long>(t), p.seconds * 1e3, p.mib, ratio.c_str());
        } else if (const std::optional<AttentionFlops> flops =
                       counted_flops(registry, kind, settings[kind], shape, t)) {
          const double rate = flops->total() / p.seconds / 1e9;
          std::printf("%-*s %8lld %12.4f %12.1f %10s %10.3f %10.1f %7.1f%%\n", kw, name.c_str(),
                      static_cast<long long>(t), p.seconds, p.mib, ratio.c_str(),
                      flops->total() / 1e9, rate, 100 * rate / gemm_gflops);
        } else {
          std::printf("%-*s %8lld %12.4f %12.1f %10s %10s %10s %8s\n", kw, name.c_str(),
                      static_cast<long long>(t), p.seconds, p.mib, ratio.c_str(), "-", "-", "-");
        }
        std::fflush(stdout);
        if (p.seconds > max_seconds) stopped[name] = true;
      }
    }
  }
  std::printf("\n%-*s %14s %14s %22s\n", kw, "kind", "time exponent",
              decode ? "state exponent" : "memory exponent", "faster than dense from T");
  for (const std::string& kind : kinds)
    for (const eng::DType precision : precisions) {
      const std::string name = label_of(kind, precision), dense = label_of("dense", precision);
      const std::vector<Point>& points = results[name];
      // Exponents over T >= 1024 where available (short runs are dominated by fixed costs).
      std::vector<Point> fit;
      for (const Point& p : points)
        if (p.length >= 1024) fit.push_back(p);
      if (fit.size() < 2) fit = points;
      std::string crossover = "-";
      if (name != dense) {
        crossover = "never (in range)";
        for (size_t i = 0; i < points.size(); ++i) {
          bool faster_from_here = true;
          bool compared = false;
          for (size_t j = i; j < points.size(); ++j)
            for (const Point& d : results[dense])
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
      std::printf("%-*s %14.2f %14.2f %22s\n", kw, name.c_str(), fitted_exponent(fit, false),
                  fitted_exponent(fit, true), crossover.c_str());
    }
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND(
    {"bench attention",
     "Forward+backward time and memory of every attention kind vs T, exponents, crossover",
     run_bench_attention});

}  // namespace patchbay::cli
