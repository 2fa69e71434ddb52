// `patchbay bench parallel`: what multi-process training costs and gains on this machine, each
// figure next to a reference measured in the same run:
//   all-reduce   the parallel_mpi plugin's all-reduce (through the SDK vtable and the host's
//                ParallelismHandle) against the MPI library's own MPI_Allreduce on the SAME
//                f32 buffer, rounds interleaved (order alternating), best of --repeats kept;
//                algorithm bandwidth bytes/t and bus bandwidth 2(W-1)/W·bytes/t (NCCL's
//                convention). Runs under mpirun -np --np (the command launches it: `--worker
//                allreduce`).
//   training     tokens/s of `patchbay train CONFIG` for 1 rank × 2 threads against 2 ranks ×
//                1 thread (data parallel, the same global batch), and the communication time
//                NOT hidden behind backward: seconds per step spent waiting for gradient
//                all-reduces after backward (metrics' comm_unhidden_seconds), with bucket
//                overlap on, and with it off (every all-reduce after backward: the whole
//                communication time); hidden share = 1 − on/off.
// The machine is shared: read ratios within one run, and report `uptime` with them.
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/int_list.hpp"
#include "common/error.hpp"
#include "engine/ops.hpp"
#include "engine/ops_table.hpp"
#include "patchbay/testing/temp_dir.hpp"
#include "runtime/component_config.hpp"
#include "runtime/host_api.hpp"
#include "runtime/parallelism_handle.hpp"
#include "runtime/plugin_search_path.hpp"
#include "runtime/registry.hpp"

#ifdef PATCHBAY_WITH_MPI
#include <mpi.h>
#endif

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;
namespace eng = patchbay::engine;
namespace rt = patchbay::runtime;
using Clock = std::chrono::steady_clock;

struct BenchOptions {
  int64_t np = 2;
  std::string sizes = "1024,65536,1048576,8388608";  // f32 elements
  int repeats = 20;
  std::string config = "configs/quickstart.toml";
  int64_t steps = 40;
  std::vector<std::string> sets;
  std::string mpirun =
      "mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader "
      "--mca btl_vader_single_copy_mechanism none --mca mpi_yield_when_idle 1";
  std::string worker;
  bool skip_training = false;
};

std::vector<int64_t> parse_sizes(const std::string& text) {
  return parse_int_list(text, "--sizes", 1);
}

std::string self_executable() { return fs::read_symlink("/proc/self/exe").string(); }

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string global_args(const GlobalOptions& global) {
  std::string out;
  for (const std::string& p : global.plugin_paths) out += " --plugin-path " + quoted(p);
  return out;
}

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Under mpirun: plugin all-reduce vs MPI_Allreduce on the same buffers; rank 0 prints.
int run_allreduce_worker(const BenchOptions& o, const GlobalOptions& global) {
  static const pb_host_api api = rt::make_host_api(eng::host_ops_table());
  static rt::Registry* registry =
      new rt::Registry(&api);  // lives to exit: MPI ends with the plugin
  rt::SearchPathOptions search;
  search.cli_paths = global.plugin_paths;
  registry->scan(rt::plugin_search_path(search), rt::LoadMode::kMetadataOnly);
  rt::ComponentConfig config(*registry->find(PB_KIND_PARALLELISM, "mpi_data").descriptor);
  rt::ParallelismHandle group(registry->create(PB_KIND_PARALLELISM, "mpi_data", config.view()),
                              registry->host());
  const bool root = group.rank() == 0;
  const double w = static_cast<double>(group.world_size());
  if (root) {
    std::printf(
        "all-reduce (SUM, f32, %lld ranks, best of %d rounds, plugin and raw MPI interleaved)\n",
        static_cast<long long>(group.world_size()), o.repeats);
    std::printf("%12s %12s | %12s %10s %10s | %12s %10s %10s | %8s\n", "elements", "bytes",
                "plugin us", "algbw GB/s", "busbw GB/s", "MPI us", "algbw GB/s", "busbw GB/s",
                "plug/MPI");
  }
  for (const int64_t n : parse_sizes(o.sizes)) {
    eng::Tensor buffer = eng::full({n}, 1.0);
    double best_plugin = 1e30, best_raw = 1e30;
    // Round 0 warms up; the order alternates so neither side always runs on a warm cache.
    for (int round = 0; round < o.repeats + 1; ++round) {
      for (int side = 0; side < 2; ++side) {
        const bool plugin = (side + round) % 2 == 0;
        eng::Tensor fresh = eng::full({n}, 1.0);  // keep values finite and equal across rounds
        eng::copy_(buffer, fresh);
        group.barrier();
        const auto t0 = Clock::now();
        if (plugin) {
          group.all_reduce(buffer, PB_COLLECTIVE_SUM);
        } else {
#ifdef PATCHBAY_WITH_MPI
          MPI_Allreduce(MPI_IN_PLACE, buffer.data_ptr(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                        MPI_COMM_WORLD);
#endif
        }
        const double t = seconds(t0, Clock::now());
        if (round > 0)
          (plugin ? best_plugin : best_raw) = std::min(plugin ? best_plugin : best_raw, t);
      }
    }
    if (!root) continue;
    const double bytes = 4.0 * static_cast<double>(n);
    const double bus = 2.0 * (w - 1) / w;
    std::printf("%12lld %12.0f | %12.1f %10.3f %10.3f | ", static_cast<long long>(n), bytes,
                best_plugin * 1e6, bytes / best_plugin / 1e9, bus * bytes / best_plugin / 1e9);
#ifdef PATCHBAY_WITH_MPI
    std::printf("%12.1f %10.3f %10.3f | %8.3f\n", best_raw * 1e6, bytes / best_raw / 1e9,
                bus * bytes / best_raw / 1e9, best_plugin / best_raw);
#else
    std::printf("%12s %10s %10s | %8s\n", "n/a", "n/a", "n/a", "n/a");
#endif
  }
  if (root) std::fflush(stdout);
  return kExitOk;
}

struct TrainFigures {
  double tokens_per_second = 0;
  double unhidden_seconds_per_step = 0;
  bool has_comm = false;
};

// Mean tokens/s over the log windows after the first (warm-up), and the unhidden
// communication seconds per step between the first and the last record.
TrainFigures read_train_figures(const fs::path& metrics) {
  std::ifstream in(metrics);
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json r = nlohmann::json::parse(line, nullptr, false);
    if (r.is_object() && r.contains("tokens_per_second")) records.push_back(r);
  }
  if (records.size() < 2)
    throw Error(ErrorKind::kIo,
                "bench parallel: " + metrics.string() + " has fewer than 2 training records");
  TrainFigures f;
  double sum = 0;
  for (size_t i = 1; i < records.size(); ++i) sum += records[i]["tokens_per_second"].get<double>();
  f.tokens_per_second = sum / static_cast<double>(records.size() - 1);
  const nlohmann::json& first = records.front();
  const nlohmann::json& last = records.back();
  if (last.contains("comm_unhidden_seconds")) {
    f.has_comm = true;
    const double steps = last["step"].get<double>() - first["step"].get<double>();
    f.unhidden_seconds_per_step = (last["comm_unhidden_seconds"].get<double>() -
                                   first["comm_unhidden_seconds"].get<double>()) /
                                  steps;
  }
  return f;
}

int run_launcher(const BenchOptions& o, const GlobalOptions& global) {
  const std::string self = self_executable();
  const std::string mpi = o.mpirun + " -np " + std::to_string(o.np) + " ";
  std::string worker = mpi + "-x OMP_NUM_THREADS=1 " + quoted(self) + global_args(global) +
                       " bench parallel --worker allreduce --sizes " + quoted(o.sizes) +
                       " --repeats " + std::to_string(o.repeats);
  std::cout << "$ " << worker << "\n" << std::flush;
  if (std::system(worker.c_str()) != 0)
    throw Error(ErrorKind::kIo,
                "bench parallel: the all-reduce worker under mpirun failed (command above)");
  if (o.skip_training) return kExitOk;

  patchbay::testing::TempDir tmp("bench_parallel");
  std::string common =
      quoted(self) + global_args(global) + " train " + quoted(o.config) +
      " --overwrite --set train.max_steps=" + std::to_string(o.steps) +
      " --set train.log_every=" + std::to_string(std::max<int64_t>(1, o.steps / 4)) +
      " --set train.warmup_steps=0 --set train.eval_every=0 --set train.sample_every=0"
      " --set train.sample_tokens=0 --set train.checkpoint_every=0";
  for (const std::string& s : o.sets) common += " --set " + quoted(s);
  struct Case {
    std::string label, command;
    fs::path dir;
  };
  auto out_dir = [&](const std::string& name) { return tmp.path() / name; };
  auto at = [&](const std::string& name) {
    return " --set run.name=" + name + " --set 'train.out_dir=\"" + out_dir(name).string() +
           "\"' > " + quoted((out_dir(name).string() + ".log")) + " 2>&1";
  };
  const std::vector<Case> cases = {
      {"1 rank x 2 threads", "OMP_NUM_THREADS=2 " + common + at("one"), out_dir("one")},
      {std::to_string(o.np) + " ranks x 1 thread (overlap)",
       mpi + "-x OMP_NUM_THREADS=1 " + common + " --set parallelism.kind=mpi_data" + at("dp"),
       out_dir("dp")},
      {std::to_string(o.np) + " ranks x 1 thread (no overlap)",
       mpi + "-x OMP_NUM_THREADS=1 " + common +
           " --set parallelism.kind=mpi_data --set parallelism.overlap=false" + at("dp_after"),
       out_dir("dp_after")},
  };
  std::vector<TrainFigures> figures;
  for (const Case& c : cases) {
    std::cout << "$ " << c.command << "\n" << std::flush;
    if (std::system(c.command.c_str()) != 0) {
      std::ifstream log(c.dir.string() + ".log");
      std::cerr << log.rdbuf();
      throw Error(ErrorKind::kIo,
                  "bench parallel: training run '" + c.label + "' failed (its log is above)");
    }
    figures.push_back(read_train_figures(c.dir / "metrics.jsonl"));
  }
  std::printf("\ntraining %s, %lld steps (the same global batch in every case)\n", o.config.c_str(),
              static_cast<long long>(o.steps));
  std::printf("%-32s %12s %10s %22s\n", "case", "tokens/s", "vs 1x2", "unhidden comm ms/step");
  for (size_t i = 0; i < cases.size(); ++i) {
    std::printf("%-32s %12.0f %10.3f ", cases[i].label.c_str(), figures[i].tokens_per_second,
                figures[i].tokens_per_second / figures[0].tokens_per_second);
    if (figures[i].has_comm) {
      std::printf("%22.2f\n", figures[i].unhidden_seconds_per_step * 1e3);
    } else {
      std::printf("%22s\n", "-");
    }
  }
  if (figures[2].unhidden_seconds_per_step > 0)
    std::printf(
        "communication hidden behind backward by bucket overlap: %.0f%% (1 - %.2f / %.2f ms)\n",
        100.0 * (1.0 - figures[1].unhidden_seconds_per_step / figures[2].unhidden_seconds_per_step),
        figures[1].unhidden_seconds_per_step * 1e3, figures[2].unhidden_seconds_per_step * 1e3);
  return kExitOk;
}

int run_bench_parallel(const std::vector<std::string>& args, const GlobalOptions& global) {
  BenchOptions o;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("np", po::value(&o.np), "ranks (default 2)")(
      "sizes", po::value(&o.sizes), "all-reduce sizes in f32 elements, comma-separated")(
      "repeats", po::value(&o.repeats), "timed all-reduce rounds per size, best kept (default 20)")(
      "config", po::value(&o.config), "training config (default configs/quickstart.toml)")(
      "steps", po::value(&o.steps), "training steps per case (default 40)")(
      "set", po::value(&o.sets), "config override for the training cases (repeatable)")(
      "mpirun", po::value(&o.mpirun),
      "launch command before -np (default: Open MPI as root, oversubscribed)")(
      "allreduce-only", po::bool_switch(&o.skip_training), "skip the training cases")(
      "worker", po::value(&o.worker), "internal: 'allreduce' runs the timed part under mpirun");
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).run(), values);
  po::notify(values);
  if (values.count("help") != 0) {
    std::cout << "Usage: patchbay bench parallel [options]\n\n"
                 "Launches mpirun itself: the parallel_mpi plugin's all-reduce against "
                 "MPI_Allreduce on the same\n"
                 "buffers, then training tokens/s of 1 rank x 2 threads against N ranks x 1 thread "
                 "with the\n"
                 "communication time not hidden behind backward.\n\n"
              << options;
    return kExitOk;
  }
  if (o.np < 2) throw Error(ErrorKind::kInvalidArgument, "bench parallel: --np must be at least 2");
  if (o.worker == "allreduce") return run_allreduce_worker(o, global);
  if (!o.worker.empty())
    throw Error(ErrorKind::kInvalidArgument, "bench parallel: unknown --worker '" + o.worker + "'");
  return run_launcher(o, global);
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"bench parallel",
                           "Time the MPI plugin's all-reduce against MPI_Allreduce and "
                           "data-parallel training against threads",
                           run_bench_parallel});

}  // namespace patchbay::cli
