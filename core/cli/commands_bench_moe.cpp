// `patchbay bench moe`: what a mixture-of-experts feed-forward layer (ffn_moe's "moe") costs
// next to references measured in the same run, forward + backward on x [B, T, C]:
//   dense       ffn_mlp's "mlp" with d_ff = k·F: the same ACTIVE parameters (and FLOPs) per
//               token as the MoE layer with k experts of width F;
//   moe         E experts of width F, top-k, dropless (every assignment is computed), and
//               with capacity factor 1.25;
//   experts     the expert GEMM chains alone: E engine MLPs on pre-grouped rows with exactly
//               the per-expert counts the moe forward routed (read from its expert_load
//               statistic). moe − experts = routing (router GEMM, softmax, top-k, aux losses,
//               statistics) + dispatch (plan, gather, gate, combine); its share of moe is the
//               overhead the issue bounds (target < 15% at E = 8, k = 2), shown from the
//               best times and as the median over rounds of the paired difference;
//   scaling     the same for E in --scaling at fixed k and F (fixed active compute);
//   slices      the E = 8 layer with expert_split = "slices" (engine slices, composed backward)
//               instead of the split_rows custom op: the measurement behind that choice.
// Every layer runs once per round, rounds interleave all layers, and the best call of
// --repeats rounds counts; the machine is shared, so read ratios within one run.
#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/int_list.hpp"
#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/generator.hpp"
#include "engine/ops.hpp"
#include "engine/ops_table.hpp"
#include "patchbay/feedforward.h"
#include "runtime/component_config.hpp"
#include "runtime/feedforward_handle.hpp"
#include "runtime/host_api.hpp"
#include "runtime/plugin_search_path.hpp"
#include "runtime/registry.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;
namespace eng = patchbay::engine;
namespace rt = patchbay::runtime;
using Clock = std::chrono::steady_clock;

struct BenchOptions {
  int64_t batch = 8, seq_len = 256, d_model = 256, expert_d_ff = 512, experts = 8, top_k = 2;
  int repeats = 5;
  std::string activation = "gelu";
  std::string scaling = "4,8,16,32";
  bool cpu_clock = false;  // --clock cpu: process CPU time instead of wall time
};

// Seconds on the chosen clock. Process CPU time does not count the time other processes hold
// the cores, so on a shared machine (run with OMP_NUM_THREADS=1, where no thread spin-waits)
// it measures the work itself; wall time is what a user waits.
double now_seconds(bool cpu_clock) {
  if (cpu_clock) {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

pb_layer_context layer_context(const BenchOptions& o, int64_t d_ff) {
  pb_layer_context ctx{};
  ctx.struct_size = sizeof(pb_layer_context);
  ctx.d_model = o.d_model;
  ctx.n_heads = 1;
  ctx.d_ff = d_ff;
  ctx.max_seq_len = o.seq_len;
  ctx.n_layers = 1;
  ctx.causal = 1;
  ctx.positional = PB_POSITIONAL_LEARNED;
  ctx.rope_theta = 10000;
  ctx.init_std = 0.02;
  ctx.residual_init_std = 0.02;
  ctx.seed = 1;
  ctx.param_dtype = PB_DTYPE_F32;
  ctx.device_type = PB_DEVICE_CPU;
  return ctx;
}

// Forward + backward of `layer` on a fresh leaf copy of x (the loss is sum(y · probe), plus
// the aux loss when there is one); gradients are dropped afterwards.
void step(rt::FeedForwardHandle& layer, const eng::Tensor& x, const eng::Tensor& probe,
          std::vector<float>* expert_load = nullptr) {
  eng::Tensor leaf = x.detach();
  leaf.set_requires_grad(true);
  rt::FeedForwardHandle::Output out = layer.forward(leaf, true);
  eng::Tensor loss = eng::sum(out.y * probe);
  if (out.aux_loss.defined()) loss = loss + out.aux_loss;
  eng::backward(loss);
  for (auto& p : layer.parameters()) p.tensor.zero_grad();
  if (expert_load != nullptr) {
    for (const auto& s : out.stats)
      if (s.name == "expert_load") *expert_load = s.values;
  }
}

// The expert GEMM chains alone: per expert, rows [n_e, C] -> gelu(rows W1ᵀ + b1) W2ᵀ + b2,
// forward and backward, with weights and inputs requiring grad as in the layer.
struct ExpertsOnly {
  std::vector<eng::Tensor> rows, w1, b1, w2, b2, probes;
  ExpertsOnly(const std::vector<int64_t>& counts, int64_t c, int64_t f, eng::Generator& gen) {
    for (int64_t n : counts) {
      rows.push_back(eng::randn({std::max<int64_t>(n, 1), c}, gen));
      probes.push_back(eng::randn({std::max<int64_t>(n, 1), c}, gen));
      w1.push_back(eng::randn({f, c}, gen) * 0.02);
      b1.push_back(eng::zeros({f}));
      w2.push_back(eng::randn({c, f}, gen) * 0.02);
      b2.push_back(eng::zeros({c}));
    }
    for (auto* group : {&rows, &w1, &b1, &w2, &b2})
      for (eng::Tensor& t : *group) t.set_requires_grad(true);
  }
  void run(const std::vector<int64_t>& counts) {
    eng::Tensor loss;
    for (size_t e = 0; e < counts.size(); ++e) {
      if (counts[e] == 0) continue;
      const eng::Tensor h = eng::gelu_tanh(eng::matmul(rows[e], w1[e], false, true) + b1[e]);
      const eng::Tensor y = eng::matmul(h, w2[e], false, true) + b2[e];
      const eng::Tensor part = eng::sum(y * probes[e]);
      loss = loss.defined() ? loss + part : part;
    }
    eng::backward(loss);
    for (auto* group : {&rows, &w1, &b1, &w2, &b2})
      for (eng::Tensor& t : *group) t.zero_grad();
  }
};

// One timed thing: its own warm-up, then timed calls interleaved round-robin with every other
// contender (so a burst of load on the shared machine hits all of them alike); the best call
// counts.
struct Contender {
  std::function<void()> run;
  double best = 1e30;
  std::vector<double> rounds;  // seconds per round, in round order
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0
                   : (v.size() % 2 == 1 ? v[v.size() / 2]
                                        : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

// A MoE layer and the reference of its expert GEMMs alone, with the counts it routed.
struct MoeCase {
  std::string name;
  std::unique_ptr<rt::FeedForwardHandle> layer;
  std::unique_ptr<ExpertsOnly> experts;
  std::vector<int64_t> counts;
  double max_load = 0;
  size_t moe_index = 0, experts_index = 0;  // into the contender list
};

MoeCase make_moe_case(rt::Registry& registry, const BenchOptions& o, const std::string& name,
                      int64_t experts, bool dropless, const eng::Tensor& x,
                      const eng::Tensor& probe, const std::string& expert_split = "custom_op") {
  const rt::ComponentEntry& entry = registry.find(PB_KIND_FEEDFORWARD, "moe");
  rt::ComponentConfig config(*entry.descriptor);
  config.set_int("experts", experts);
  config.set_int("top_k", o.top_k);
  config.set_bool("dropless", dropless);
  config.set_string("activation", "gelu");
  config.set_string("expert_split", expert_split);
  MoeCase c;
  c.name = name;
  c.layer = std::make_unique<rt::FeedForwardHandle>(
      registry.create(PB_KIND_FEEDFORWARD, "moe", config.view()), registry.host());
  c.layer->init(layer_context(o, o.expert_d_ff));
  std::vector<float> load;
  step(*c.layer, x, probe, &load);
  const int64_t n = o.batch * o.seq_len;
  const auto cap = static_cast<int64_t>(
      std::ceil(1.25 * static_cast<double>(n * o.top_k) / static_cast<double>(experts)));
  for (float f : load) {
    const auto routed = static_cast<int64_t>(
        std::llround(static_cast<double>(f) * static_cast<double>(n * o.top_k)));
    c.counts.push_back(dropless ? routed : std::min(routed, cap));  // kept rows
    c.max_load = std::max(c.max_load, static_cast<double>(f));
  }
  eng::Generator gen(7);
  c.experts = std::make_unique<ExpertsOnly>(c.counts, o.d_model, o.expert_d_ff, gen);
  return c;
}

std::vector<int64_t> parse_list(const std::string& text) {
  return parse_int_list(text, "--scaling", 1);
}

int run_bench_moe(const std::vector<std::string>& args, const GlobalOptions& global) {
  BenchOptions o;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("batch", po::value(&o.batch),
                                               "sequences B (default 8)")(
      "seq-len", po::value(&o.seq_len), "tokens per sequence T (default 256)")(
      "d-model", po::value(&o.d_model), "width C (default 256)")(
      "expert-d-ff", po::value(&o.expert_d_ff), "hidden width F of one expert (default 512)")(
      "experts", po::value(&o.experts), "E of the headline comparison (default 8)")(
      "top-k", po::value(&o.top_k), "k (default 2); the dense reference has d_ff = k·F")(
      "repeats", po::value(&o.repeats), "timed rounds over every layer, best kept (default 5)")(
      "scaling", po::value(&o.scaling),
      "comma-separated E values at fixed k, F (default 4,8,16,32; empty: skip)");
  std::string clock = "wall";
  options.add_options()("clock", po::value(&clock),
                        "wall (default) or cpu: process CPU time, steady on a shared machine with "
                        "OMP_NUM_THREADS=1");
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).run(), values);
  po::notify(values);
  if (values.count("help") != 0) {
    std::cout
        << "Usage: patchbay bench moe [options]\n\nTimes ffn_moe's \"moe\" layer (forward + "
           "backward) "
           "against the dense MLP of equal active parameters and against its own expert GEMMs,\n"
           "giving tokens/s and the share of time spent routing and dispatching.\n\n"
        << options;
    return kExitOk;
  }
  if (clock != "wall" && clock != "cpu") {
    throw Error(ErrorKind::kInvalidArgument,
                "bench moe: --clock must be wall or cpu, got '" + clock + "'");
  }
  o.cpu_clock = clock == "cpu";
  if (o.top_k < 1 || o.experts < o.top_k || o.batch < 1 || o.seq_len < 1 || o.d_model < 1 ||
      o.expert_d_ff < 1) {
    throw Error(ErrorKind::kInvalidArgument, "bench moe: expected B, T, C, F >= 1 and 1 <= k <= E");
  }
  static const pb_host_api api = rt::make_host_api(eng::host_ops_table());
  rt::Registry registry(&api);
  rt::SearchPathOptions search;
  search.cli_paths = global.plugin_paths;
  registry.scan(rt::plugin_search_path(search), rt::LoadMode::kMetadataOnly);

  eng::Generator gen(3);
  const eng::Tensor x = eng::randn({o.batch, o.seq_len, o.d_model}, gen);
  const eng::Tensor probe = eng::randn({o.batch, o.seq_len, o.d_model}, gen);
  const double tokens = static_cast<double>(o.batch * o.seq_len);

  const rt::ComponentEntry& mlp_entry = registry.find(PB_KIND_FEEDFORWARD, "mlp");
  rt::ComponentConfig mlp_config(*mlp_entry.descriptor);
  rt::FeedForwardHandle dense(registry.create(PB_KIND_FEEDFORWARD, "mlp", mlp_config.view()),
                              registry.host());
  dense.init(layer_context(o, o.top_k * o.expert_d_ff));

  const std::string e_text = "E = " + std::to_string(o.experts);
  std::vector<MoeCase> cases;
  cases.push_back(
      make_moe_case(registry, o, "moe " + e_text + ", dropless", o.experts, true, x, probe));
  cases.push_back(
      make_moe_case(registry, o, "moe " + e_text + ", capacity 1.25", o.experts, false, x, probe));
  // The backward choice (README "Dispatch"): engine slices instead of the split_rows custom op.
  cases.push_back(make_moe_case(registry, o, "moe " + e_text + ", dropless, slices", o.experts,
                                true, x, probe, "slices"));
  const size_t headline = cases.size();
  for (int64_t e : parse_list(o.scaling)) {
    if (e >= o.top_k)
      cases.push_back(
          make_moe_case(registry, o, "moe E = " + std::to_string(e), e, true, x, probe));
  }
  std::vector<Contender> contenders;
  contenders.push_back({[&] { step(dense, x, probe); }});
  for (MoeCase& c : cases) {
    c.moe_index = contenders.size();
    contenders.push_back({[&c, &x, &probe] { step(*c.layer, x, probe); }});
    c.experts_index = contenders.size();
    contenders.push_back({[&c] { c.experts->run(c.counts); }});
  }
  for (Contender& c : contenders) c.run();  // warm-up
  for (int r = 0; r < o.repeats; ++r) {
    for (Contender& c : contenders) {
      const double t0 = now_seconds(o.cpu_clock);
      c.run();
      const double seconds = now_seconds(o.cpu_clock) - t0;
      c.best = std::min(c.best, seconds);
      c.rounds.push_back(seconds);
    }
  }
  const double dense_seconds = contenders[0].best;

  std::printf(
      "x [%lld, %lld, %lld], expert width F = %lld, k = %lld, gelu, f32, forward + backward, best "
      "of %d (interleaved), %s clock\n",
      static_cast<long long>(o.batch), static_cast<long long>(o.seq_len),
      static_cast<long long>(o.d_model), static_cast<long long>(o.expert_d_ff),
      static_cast<long long>(o.top_k), o.repeats, o.cpu_clock ? "cpu" : "wall");
  std::printf("%-34s %10s %12s %10s %14s %8s\n", "layer", "ms", "tokens/s", "vs dense",
              "route+dispatch", "(paired)");
  std::printf("%-34s %10.2f %12.0f %10.2f %14s\n",
              ("dense mlp d_ff = k*F = " + std::to_string(o.top_k * o.expert_d_ff)).c_str(),
              dense_seconds * 1e3, tokens / dense_seconds, 1.0, "-");
  for (size_t i = 0; i < cases.size(); ++i) {
    if (i == headline) {
      std::printf("scaling with E at fixed active compute (k = %lld, F = %lld), dropless:\n",
                  static_cast<long long>(o.top_k), static_cast<long long>(o.expert_d_ff));
    }
    const MoeCase& c = cases[i];
    const double moe_seconds = contenders[c.moe_index].best,
                 experts_seconds = contenders[c.experts_index].best;
    const double overhead = std::max(0.0, moe_seconds - experts_seconds) / moe_seconds;
    // Paired: each round runs the layer and its expert GEMMs back to back; the median over
    // rounds of (layer - experts) / layer is less sensitive to load bursts than the bests.
    std::vector<double> paired;
    for (size_t r = 0; r < contenders[c.moe_index].rounds.size(); ++r) {
      const double layer = contenders[c.moe_index].rounds[r],
                   gemms = contenders[c.experts_index].rounds[r];
      paired.push_back((layer - gemms) / layer);
    }
    std::printf("%-34s %10.2f %12.0f %10.2f %13.1f%% %7.1f%%\n", c.name.c_str(), moe_seconds * 1e3,
                tokens / moe_seconds, dense_seconds / moe_seconds, 100.0 * overhead,
                100.0 * median(paired));
    std::printf("%-34s %10.2f %12s %10s %14s   (max expert load %.3f)\n",
                "  of which expert GEMMs alone", experts_seconds * 1e3, "", "", "", c.max_load);
  }
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND(
    {"bench moe",
     "Time a mixture-of-experts layer against the dense MLP of equal active parameters",
     run_bench_moe});

}  // namespace patchbay::cli
