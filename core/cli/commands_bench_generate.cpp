// `patchbay bench generate [CONFIG...] [--vocab-size V] [--prompt-tokens P] [--new-tokens N]
// [--weights-dtype f32,bf16]`: batch-1 KV-cache decoding speed of the models the configs
// describe (random weights), beside the memory-bandwidth bound measured in the same run
// (generate/decode_benchmark.hpp defines it: read bandwidth / bytes read per token).
//
// Without CONFIG it runs the two shapes the project tracks: configs/quickstart.toml with the
// char tokenizer's vocabulary on the KJV corpus (330 ids: 74 characters + 256 byte
// fallbacks) and configs/gpt2-124m.toml (GPT-2's 50257). Each token is chosen by the default
// sampler chain (temperature 0.8 -> top_k 40 -> sample), timed apart from the model step.
// Per shape and dtype it also times the head's matrix-vector product alone through the
// engine and through oneDNN's matmul directly (the path decoding took before the skinny
// kernel), as a same-run reference for the kernel.
#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/component_lookup.hpp"
#include "common/error.hpp"
#include "config/config_loader.hpp"
#include "engine/dtype.hpp"
#include "engine/generator.hpp"
#include "engine/ops.hpp"
#include "generate/decode_benchmark.hpp"
#include "generate/sampler_config.hpp"
#include "model/language_model.hpp"
#include "onednn/gemm_reference_rate.hpp"
#include "onednn/onednn_ops.hpp"
#include "train/train_config.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;

struct Shape {
  std::string config_file;
  std::int64_t vocab_size = 0;  // 0: from --vocab-size or the tokenizer's table
};

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty()) parts.push_back(part);
  return parts;
}

engine::DType parse_weights_dtype(const std::string& name) {
  if (name == "f32") return engine::DType::kF32;
  if (name == "bf16") return engine::DType::kBF16;
  throw Error(
      ErrorKind::kInvalidArgument,
      "--weights-dtype: expected a comma-separated list of f32 and bf16, found '" + name + "'");
}

std::int64_t vocab_of(const config::ResolvedConfig& config, const Shape& shape,
                      std::int64_t vocab_option) {
  if (vocab_option > 0) return vocab_option;
  if (shape.vocab_size > 0) return shape.vocab_size;
  const toml::node* v =
      config.find("tokenizer." + train::config_string(config, "tokenizer.kind") + ".vocab_size");
  const std::int64_t found = v != nullptr ? v->value<std::int64_t>().value_or(0) : 0;
  if (found <= 0) {
    throw Error(ErrorKind::kInvalidArgument,
                shape.config_file +
                    ": the tokenizer's vocabulary size is not in the config (a char tokenizer "
                    "learns it from the corpus); give it with --vocab-size V");
  }
  return found;
}

double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// The head's matrix-vector product [1, k] x [n, k]^T alone, through the engine's matmul (the
// skinny kernel) and through a direct oneDNN matmul call on the same buffers (what the engine
// ran for it before; bf16: bf16 x and W, f32 output, oneDNN's own bf16 GEMV), alternated,
// median of `repeats` each. GB/s of weights streamed, wall and per CPU-second.
void print_head_matmul_reference(std::int64_t n, std::int64_t k, engine::DType dtype, int repeats) {
  engine::Generator generator(5);
  const engine::Tensor x = engine::randn({1, k}, generator);
  const engine::Tensor w = engine::randn({n, k}, generator).to(dtype);
  const engine::Tensor x_same = x.to(dtype);  // oneDNN multiplies one dtype
  engine::Tensor y = engine::Tensor::empty({1, n});
  onednn::MatmulArgs args;
  args.m = 1;
  args.n = n;
  args.k = k;
  const onednn::DType dt =
      dtype == engine::DType::kBF16 ? onednn::DType::kBF16 : onednn::DType::kF32;
  args.a = {x_same.data_ptr(), dt, 0, k, 1};
  args.b = {w.data_ptr(), dt, 0, 1, k};  // W^T: [k, n] view of W [n, k]
  args.c = {y.data_ptr(), onednn::DType::kF32, 0, n, 1};
  std::vector<double> engine_wall, engine_cpu, onednn_wall, onednn_cpu;
  for (int r = 0; r < repeats + 1; ++r) {  // round 0 warms up (primitive creation)
    for (int which = 0; which < 2; ++which) {
      const double cpu = process_cpu_seconds();
      const auto start = std::chrono::steady_clock::now();
      if (which == 0) {
        (void)engine::matmul(x, w, false, true);
      } else {
        onednn::matmul(args);
      }
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double cpu_used = process_cpu_seconds() - cpu;
      if (r == 0) continue;
      (which == 0 ? engine_wall : onednn_wall).push_back(wall);
      (which == 0 ? engine_cpu : onednn_cpu).push_back(cpu_used);
    }
  }
  auto rate = [&](std::vector<double> seconds) {
    std::sort(seconds.begin(), seconds.end());
    return static_cast<double>(w.nbytes()) / std::max(seconds[seconds.size() / 2], 1e-12) / 1e9;
  };
  std::printf(
      "  head matmul [1 x %lld] x [%lld x %lld]^T, %s weights: engine (skinny kernel) "
      "%.1f GB/s, %.1f per CPU-s | oneDNN matmul %.1f GB/s, %.1f per CPU-s\n",
      static_cast<long long>(k), static_cast<long long>(n), static_cast<long long>(k),
      engine::dtype_name(dtype), rate(engine_wall), rate(engine_cpu), rate(onednn_wall),
      rate(onednn_cpu));
  std::cout << std::flush;
}

// Two lines per dtype: wall-time figures, and the same ratio in CPU time (the one that
// survives a machine shared with other work; decode_benchmark.hpp says why).
void print_row(const char* dtype, const generate::DecodeTiming& t, std::int64_t weight_bytes,
               const generate::ReadBandwidth& bandwidth) {
  const double bytes_per_token = static_cast<double>(weight_bytes) + t.mean_kv_bytes_read;
  const double bound = bandwidth.median_gbps * 1e9 / bytes_per_token;
  const double bound_cpu = bandwidth.median_gbps_per_cpu * 1e9 / bytes_per_token;
  const double tokens = static_cast<double>(t.tokens);
  char line[768];
  std::snprintf(line, sizeof line,
                "  %-5s weights %.1f MB + KV %.2f MB read per token\n"
                "        wall: %9.1f tokens/s (model %.3f ms + sampling %.3f ms per token) | "
                "bound %9.1f | %5.1f%% of bound\n"
                "        CPU:  %9.1f tokens per CPU-s                                   | "
                "bound %9.1f | %5.1f%% of bound\n",
                dtype, static_cast<double>(weight_bytes) / 1e6, t.mean_kv_bytes_read / 1e6,
                t.tokens_per_second, 1e3 * t.model_seconds / tokens,
                1e3 * t.sampling_seconds / tokens, bound, 100.0 * t.tokens_per_second / bound,
                t.tokens_per_cpu_second, bound_cpu, 100.0 * t.tokens_per_cpu_second / bound_cpu);
  std::cout << line << std::flush;
}

// The token-paired pass: each token's decode against the read of its bytes right after it,
// as the median of the tokens' ratios (a burst of other work on a shared machine slows a few
// tokens or reads, not the median) and as the ratio of the sums; and where the decode's time
// went (the batch-1 products, whose weight stream is the bound, and the rest). Returns the
// median.
double print_token_paired(const generate::DecodeTiming& t) {
  std::vector<double> ratios = t.paired_ratios;
  std::sort(ratios.begin(), ratios.end());
  const double median = ratios.empty() ? 0.0 : ratios[ratios.size() / 2];
  const double decode_seconds = t.model_seconds + t.sampling_seconds;
  const double of_sums = t.paired_read_seconds / std::max(decode_seconds, 1e-12);
  const double read_gbps = t.paired_read_bytes / std::max(t.paired_read_seconds, 1e-12) / 1e9;
  const double product_gbps = t.product_weight_bytes / std::max(t.product_seconds, 1e-12) / 1e9;
  const double tokens = static_cast<double>(t.tokens);
  std::printf(
      "        token-paired: %5.1f%% of bound (median of %zu tokens; %.1f%% of the sums; reads "
      "at %.1f GB/s)\n"
      "        products: %.1f GB/s, %.1f%% of the paired read, %.1f%% of the model time; the "
      "rest %.3f ms per token\n",
      100.0 * median, ratios.size(), 100.0 * of_sums, read_gbps, product_gbps,
      100.0 * product_gbps / std::max(read_gbps, 1e-12),
      100.0 * t.product_seconds / std::max(t.model_seconds, 1e-12),
      1e3 * (t.model_seconds - t.product_seconds) / tokens);
  std::cout << std::flush;
  return median;
}

// Interleaved rounds per row: a read measurement of kRoundReadPasses passes, then the decode.
constexpr int kRounds = 5;
constexpr int kRoundReadPasses = 3;

int run_bench_generate(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::vector<std::string> config_files, overrides;
  std::int64_t vocab_size = 0;
  std::string dtypes_text = "f32,bf16";
  generate::DecodeTimingOptions timing_options;
  timing_options.prompt_tokens = 16;
  timing_options.new_tokens = 64;
  std::int64_t bandwidth_mib = 512;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("config", po::value(&config_files)->composing(),
                                               "experiment TOML files (default: the two shapes)")(
      "set", po::value(&overrides)->composing(), "override a key in every config (repeatable)")(
      "vocab-size", po::value(&vocab_size), "vocabulary (default: the tokenizer's table)")(
      "prompt-tokens", po::value(&timing_options.prompt_tokens),
      "random prompt, prefilled (default 16)")("new-tokens", po::value(&timing_options.new_tokens),
                                               "timed decode steps (default 64)")(
      "warmup-tokens", po::value(&timing_options.warmup_tokens),
      "untimed decode steps first (default 4)")(
      "weights-dtype", po::value(&dtypes_text),
      "comma-separated weight dtypes to time (default f32,bf16)")(
      "bandwidth-mib", po::value(&bandwidth_mib),
      "buffer of the read-bandwidth loop (default 512)");
  po::positional_options_description positional;
  positional.add("config", -1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), values);
  po::notify(values);
  if (values.count("help") != 0) {
    std::cout
        << "Usage: patchbay bench generate [CONFIG...] [--vocab-size V] [--prompt-tokens P]\n"
           "                               [--new-tokens N] [--weights-dtype f32,bf16]\n\n"
           "Batch-1 KV-cache decoding tokens/s of each config's model (random weights), beside\n"
           "the memory-bandwidth bound measured now: a plain streaming read's GB/s divided by\n"
           "the bytes a step reads (weights + KV cache). Default: the quickstart shape (vocab\n"
           "330) and GPT-2 124M (vocab 50257). Each row then runs 5 rounds of a short read\n"
           "measurement followed by the same decode (the median of the rounds' ratios), and\n"
           "a token-paired pass: after every token, a plain read of that token's bytes, so\n"
           "the bound is measured within milliseconds of each step (the median of the tokens'\n"
           "ratios). On a machine whose memory speed drifts over seconds, the token-paired\n"
           "figure is the one to compare. The reads walk a buffer of at least 512 MiB, so a\n"
           "model whose step fits in the caches is still compared with memory's speed.\n"
           "The paired pass also splits the model time into the batch-1 matrix-vector\n"
           "products (their GB/s beside the paired read's) and the rest, in ms per token.\n\n"
        << options;
    return kExitOk;
  }
  std::vector<engine::DType> dtypes;
  std::vector<std::string> dtype_names = split_commas(dtypes_text);
  for (const std::string& name : dtype_names) dtypes.push_back(parse_weights_dtype(name));
  if (dtypes.empty()) throw Error(ErrorKind::kInvalidArgument, "--weights-dtype: empty list");

  std::vector<Shape> shapes;
  for (const std::string& file : config_files) shapes.push_back({file, 0});
  if (shapes.empty())
    shapes = {{"configs/quickstart.toml", 330}, {"configs/gpt2-124m.toml", 50257}};

  // Each row again at the end, against the faster of the two read measurements, and the
  // ratio of its interleaved rounds.
  struct Row {
    std::string label;
    double tokens_per_second, bytes_per_token;
    std::vector<double> round_ratios;  // sorted; tokens/s over the bound of the read just before
    double token_paired_ratio;         // median over tokens of read time / decode time
  };
  std::vector<Row> rows;
  const onednn::MachineInfo machine = onednn::machine_info();
  std::cout << "machine: " << onednn::machine_info_line(machine) << "\n";
  const generate::ReadBandwidth before = generate::measure_read_bandwidth(bandwidth_mib << 20);
  std::printf(
      "read bandwidth (plain streaming sum over %lld MiB, %d threads): %.1f GB/s median, "
      "%.1f best; %.1f GB per CPU-second\n",
      static_cast<long long>(before.buffer_bytes >> 20), before.threads, before.median_gbps,
      before.best_gbps, before.median_gbps_per_cpu);
  std::cout << std::flush;

  for (const Shape& shape : shapes) {
    if (!std::filesystem::exists(shape.config_file)) {
      throw Error(ErrorKind::kNotFound, shape.config_file +
                                            " does not exist (the default shapes are read from "
                                            "configs/: run from the repository root)");
    }
    config::ResolvedConfig config = config::load_config(shape.config_file, overrides);
    const ComponentLookup components = make_component_lookup(global, config);
    if (!components.registry) throw Error(ErrorKind::kInternal, components.unavailable_reason);
    const std::int64_t vocab = vocab_of(config, shape, vocab_size);
    runtime::SamplerChain chain = generate::build_sampler_chain(
        generate::default_chain_entries(timing_options.seed), *components.registry);
    for (size_t d = 0; d < dtypes.size(); ++d) {
      auto model = model::LanguageModel::build(model::model_options_from_config(config, vocab),
                                               model::component_tables_from_config(config),
                                               *components.registry);
      if (d == 0) {
        const model::ModelOptions& o = model->options();
        std::printf(
            "%s: %lld parameters, L=%lld C=%lld H=%lld V=%lld; prompt %lld, %lld timed "
            "tokens; chain %s\n",
            shape.config_file.c_str(), static_cast<long long>(model->parameter_count()),
            static_cast<long long>(o.n_layers), static_cast<long long>(o.d_model),
            static_cast<long long>(o.n_heads), static_cast<long long>(vocab),
            static_cast<long long>(timing_options.prompt_tokens),
            static_cast<long long>(timing_options.new_tokens), chain.describe().c_str());
      }
      if (dtypes[d] != engine::DType::kF32) model->convert_weights_for_inference(dtypes[d]);
      const generate::DecodeTiming timing = generate::time_decoding(*model, chain, timing_options);
      print_row(dtype_names[d].c_str(), timing, generate::streamed_weight_bytes(*model), before);
      Row row{
          shape.config_file + " " + dtype_names[d],
          timing.tokens_per_second,
          static_cast<double>(generate::streamed_weight_bytes(*model)) + timing.mean_kv_bytes_read,
          {},
          0.0};
      // The memory's speed drifts over seconds on a shared machine: kRounds times a short read
      // measurement then the same decode, each decode against the read just before it.
      for (int r = 0; r < kRounds; ++r) {
        const generate::ReadBandwidth read =
            generate::measure_read_bandwidth(bandwidth_mib << 20, kRoundReadPasses);
        const generate::DecodeTiming again = generate::time_decoding(*model, chain, timing_options);
        const double bytes = static_cast<double>(generate::streamed_weight_bytes(*model)) +
                             again.mean_kv_bytes_read;
        row.round_ratios.push_back(again.tokens_per_second / (read.median_gbps * 1e9 / bytes));
      }
      std::sort(row.round_ratios.begin(), row.round_ratios.end());
      std::printf("        %d rounds of read then decode: %5.1f%% of bound (median; %.1f-%.1f%%)\n",
                  kRounds, 100.0 * row.round_ratios[kRounds / 2], 100.0 * row.round_ratios.front(),
                  100.0 * row.round_ratios.back());
      // Once more with a read of each token's bytes right after it, and the products profiled.
      generate::DecodeTimingOptions paired_options = timing_options;
      paired_options.paired_read = true;
      paired_options.profile_products = true;
      const generate::DecodeTiming paired = generate::time_decoding(*model, chain, paired_options);
      row.token_paired_ratio = print_token_paired(paired);
      rows.push_back(std::move(row));
      print_head_matmul_reference(vocab, model->options().d_model, dtypes[d], 9);
    }
  }
  const generate::ReadBandwidth after = generate::measure_read_bandwidth(bandwidth_mib << 20);
  std::printf(
      "read bandwidth again after decoding: %.1f GB/s median, %.1f per CPU-second "
      "(the bounds above use the first measurement)\n",
      after.median_gbps, after.median_gbps_per_cpu);
  // The memory's speed moves during a run on a shared machine; the faster of the two medians
  // gives the stricter bound.
  const double fastest = std::max(before.median_gbps, after.median_gbps);
  std::printf("wall tokens/s against the faster read measurement (%.1f GB/s):\n", fastest);
  for (const Row& row : rows) {
    const double bound = fastest * 1e9 / row.bytes_per_token;
    std::printf("  %-32s %9.1f tokens/s | bound %9.1f | %5.1f%% of bound\n", row.label.c_str(),
                row.tokens_per_second, bound, 100.0 * row.tokens_per_second / bound);
  }
  std::printf("interleaved rounds (each decode against the read measured just before it):\n");
  for (const Row& row : rows)
    std::printf("  %-32s %5.1f%% of bound (median of %d; %.1f-%.1f%%)\n", row.label.c_str(),
                100.0 * row.round_ratios[kRounds / 2], kRounds, 100.0 * row.round_ratios.front(),
                100.0 * row.round_ratios.back());
  std::printf(
      "token-paired (each token's decode against a read of its bytes right after it, median):\n");
  for (const Row& row : rows)
    std::printf("  %-32s %5.1f%% of bound\n", row.label.c_str(), 100.0 * row.token_paired_ratio);
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"bench generate",
                           "Batch-1 KV-cache decoding tokens/s beside the memory-bandwidth bound",
                           run_bench_generate});

}  // namespace patchbay::cli
