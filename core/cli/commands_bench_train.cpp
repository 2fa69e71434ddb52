// `patchbay bench train CONFIG [--steps N] [--batch-size B] [--seq-len T] [--random-tokens]
// [--vocab-size V]`: training throughput of the model a config describes, beside oneDNN's own
// GEMM rate on a model-shaped GEMM measured in the same run, and the machine.
//
// FLOP convention: the model's flops_per_token(T) (PaLM appendix B: 6·N + 12·L·T·C, i.e.
// forward + backward = 3 × forward, attention at full T). Achieved FLOP/s = that × tokens/s;
// MFU = achieved / oneDNN f32 GEMM rate on [B·T, C] x [C, d_ff] (the MLP's first matmul),
// measured after the timed steps as the median of 3 rounds (interleaved with bf16's).
// Each step is timed by phase (forward+loss, backward, clip, optimizer) so the report says
// where the time goes. As in train_step, clipping's norm is summed during the last backward
// (train/grad_norm_in_backward.hpp), so its cost is in the backward phase and the clip phase
// only adds the sums up.
//
// --gemm-breakdown also times every oneDNN GEMM of the timed updates by shape
// (onednn/gemm_profile.hpp) and prints, per precision, which run below the reference rate.
//
// --precision f32,bf16 times the same model in both precisions, timed updates alternating ([train]
// precision: bf16 = matmul autocast, engine/autocast.hpp) and then oneDNN's f32 and bf16 GEMM
// rates on the same shape back to back; the bf16 target printed is
// 0.85 x (bf16 GEMM rate / f32 GEMM rate) x the f32 tokens/s (issue 18), then as a time budget
// per update beside what each precision spent beyond its bound.
//
// After the reference GEMMs the machine's arithmetic peak is measured too
// (patchbay/kernels/fma_peak.hpp: register-only FMA or vdpbf16ps chains on the same threads),
// and each precision's report says what share of it the reference GEMM and the step reach:
// the reference is the ceiling MFU is taken against, and this shows how close that ceiling is
// to the cores' own limit.
#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/component_lookup.hpp"
#include "cli/device_option.hpp"
#include "config/config_loader.hpp"
#include "engine/autocast.hpp"
#include "engine/autograd.hpp"
#include "engine/device.hpp"
#include "engine/ops.hpp"
#include "onednn/gemm_profile.hpp"
#include "onednn/gemm_reference_rate.hpp"
#include "patchbay/kernels/fma_peak.hpp"
#include "train/grad_clip.hpp"
#include "train/grad_norm_in_backward.hpp"
#include "train/trainer.hpp"
#include "train/training_data.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Seconds spent per phase over the timed steps of one precision.
struct PhaseTimes {
  double forward = 0, backward = 0, clip = 0, optimizer = 0;
  double total() const { return forward + backward + clip + optimizer; }
};

// "f32,bf16" -> {"f32", "bf16"}; each must be f32 or bf16.
std::vector<std::string> precision_list(const std::string& text) {
  std::vector<std::string> list;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    if (item != "f32" && item != "bf16")
      throw Error(ErrorKind::kInvalidArgument,
                  "--precision: expected a comma-separated list of f32 and bf16 (e.g. f32,bf16), found '" + text + "'");
    list.push_back(item);
    start = comma + 1;
  }
  return list;
}

int run_bench_train(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string config_file;
  std::vector<std::string> overrides;
  int64_t steps = 5, warmup = 1, batch_size = 0, seq_len = 0, vocab_size = 0, grad_accum = 1;
  bool random_tokens = false, gemm_breakdown = false;
  std::string precision_option, device;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("config", po::value(&config_file), "the experiment's TOML file")(
      "set", po::value(&overrides)->composing(), "override a key (repeatable)")(
      "steps", po::value(&steps), "timed optimizer updates (default 5)")(
      "warmup", po::value(&warmup), "untimed updates first (default 1)")(
      "batch-size", po::value(&batch_size), "sequences per micro-batch (default train.batch_size)")(
      "seq-len", po::value(&seq_len), "tokens per sequence (default train.seq_len)")(
      "grad-accum", po::value(&grad_accum),
      "micro-batches per update (default 1); clipping and the optimizer run once per update, so a "
      "larger value spreads their cost over more tokens")(
      "random-tokens", po::bool_switch(&random_tokens), "random ids instead of the prepared corpus (no tokenizer)")(
      "vocab-size", po::value(&vocab_size), "vocabulary with --random-tokens (default tokenizer.vocab_size)")(
      "precision", po::value(&precision_option),
      "f32, bf16 or f32,bf16 (both, timed updates alternating, with the bf16 target; default train.precision)")(
      "gemm-breakdown", po::bool_switch(&gemm_breakdown),
      "also time every oneDNN GEMM of the timed updates by shape: ms per step, GFLOP/s and share of the "
      "reference rate (which GEMMs run below it)");
  add_device_option(options, device);
  po::positional_options_description positional;
  positional.add("config", 1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), values);
  po::notify(values);  // fills the bound variables (no option is required)
  if (values.count("help") != 0 || config_file.empty()) {
    std::cout << "Usage: patchbay bench train CONFIG [--steps N] [--batch-size B --seq-len T] [--random-tokens]\n\n"
                 "Times training steps of CONFIG's model and optimizer: tokens/s, achieved FLOP/s\n"
                 "(flops_per_token: 6N + 12LTC, forward+backward = 3x forward), MFU against oneDNN's f32\n"
                 "GEMM rate on a model-shaped GEMM measured now, peak memory, time per phase, machine.\n\n"
              << options;
    return values.count("help") != 0 ? kExitOk : kExitUsage;
  }
  config::ResolvedConfig config = config::load_config(config_file, overrides);
  (void)apply_device_option(config, device);
  const ComponentLookup components = make_component_lookup(global, config);
  if (!components.registry) throw Error(ErrorKind::kInternal, components.unavailable_reason);
  train::validate_training_config(config, components.lookup);
  train::TrainOptions o = train::train_options_from_config(config);
  if (batch_size > 0) o.batch_size = batch_size;
  if (seq_len > 0) o.seq_len = seq_len;
  o.grad_accum_steps = std::max<int64_t>(1, grad_accum);

  std::optional<train::TrainingData> data;
  if (random_tokens) {
    if (vocab_size <= 0) {
      // The validated config keeps the tokenizer's options in its per-kind table.
      const toml::node* v = config.find("tokenizer." + train::config_string(config, "tokenizer.kind") + ".vocab_size");
      vocab_size = v != nullptr ? v->value<int64_t>().value_or(0) : 0;
    }
    if (vocab_size <= 0) throw Error(ErrorKind::kInvalidArgument, "--random-tokens needs --vocab-size V");
  } else {
    data.emplace(train::prepare_training_data(config, *components.registry, components.lookup));
    vocab_size = data->tokenizer.vocab_size();
  }
  train::TrainableModel t = train::build_trainable_model(config, *components.registry, components.lookup, vocab_size);
  const model::ModelOptions& m = t.model->options();
  const double flops_per_token = t.model->flops_per_token(o.seq_len);
  const onednn::MachineInfo machine = onednn::machine_info();
  std::cout << "machine: " << onednn::machine_info_line(machine) << "\n"
            << "model: " << t.model->parameter_count() << " parameters (" << t.model->parameter_count(true)
            << " without embeddings), L=" << m.n_layers << " C=" << m.d_model << " H=" << m.n_heads
            << " V=" << vocab_size << "\n"
            << "batch: " << o.batch_size << " x " << o.seq_len << " x accum " << o.grad_accum_steps << ", optimizer "
            << t.optimizer_name << (random_tokens ? ", random tokens" : ", corpus tokens") << "\n"
            << "FLOPs per token: " << flops_per_token / 1e6
            << " MFLOP (training: 6N + 12LTC, forward+backward = 3x forward)\n";

  // `count` updates in `precision` from update number `first` (which picks the batches),
  // their phase times added to t_phase when `timed`; the model keeps training throughout.
  auto time_steps = [&](const std::string& precision, int64_t first, int64_t count, bool timed,
                        PhaseTimes& t_phase) {
    double& t_forward = t_phase.forward;
    double& t_backward = t_phase.backward;
    double& t_clip = t_phase.clip;
    double& t_optimizer = t_phase.optimizer;
    for (int64_t step = first; step < first + count; ++step) {
      // bf16: matmul autocast over the update's forwards and backwards, as train_step does.
      std::optional<engine::AutocastGuard> autocast;
      // The weights' bf16 copies are written by the optimizer's pass in a bf16 run; as the
      // precisions alternate here, f32 updates pause them and the next bf16 update rounds them
      // again before its timer starts (a bf16 run never does: the steady state is timed).
      if (precision == "bf16") {
        autocast.emplace(engine::DType::kBF16);
        train::use_bf16_weight_copies(t);
      } else {
        train::pause_bf16_weight_copies(t);
      }
      std::optional<train::GradNormInBackward> backward_norm;  // as train_step
      for (int64_t micro = 0; micro < o.grad_accum_steps; ++micro) {
        const train::Batch batch =
            random_tokens ? train::random_batch(vocab_size, o.seed, step * o.grad_accum_steps + micro, o.batch_size, o.seq_len)
                          : train::training_batch(data->train, o.seed, step, micro, o.batch_size, o.seq_len);
        auto t0 = Clock::now();
        const model::ForwardResult out = t.model->forward(batch.inputs, true);
        engine::Tensor loss = engine::cross_entropy(out.logits.reshape({-1, vocab_size}), batch.targets.reshape({-1}));
        if (out.aux_loss.defined()) loss = loss + out.aux_loss;
        (void)loss.item();
        if (timed) t_forward += since(t0);
        t0 = Clock::now();
        if (o.grad_clip > 0 && micro == o.grad_accum_steps - 1) backward_norm.emplace(t.parameter_tensors);
        engine::backward(o.grad_accum_steps == 1 ? loss : loss * (1.0 / static_cast<double>(o.grad_accum_steps)));
        if (timed) t_backward += since(t0);
      }
      autocast.reset();
      // As train_step: the norm is summed during the last backward (timed with it) and
      // finished in the clip phase; the optimizer applies the factor inside its update pass
      // (step_scaled; an optimizer without it gets its gradients scaled first).
      auto t0 = Clock::now();
      const double grad_scale =
          o.grad_clip > 0 ? train::clip_factor(backward_norm->finish(), o.grad_clip) : 1.0;
      if (timed) t_clip += since(t0);
      t0 = Clock::now();
      train::optimizer_step_scaled(*t.optimizer, t.parameter_tensors, o.schedule.lr, grad_scale);
      for (engine::Tensor& p : t.parameter_tensors) p.zero_grad();
      if (timed) t_optimizer += since(t0);
    }
  };
  const std::vector<std::string> precisions = precision_list(precision_option.empty() ? o.precision : precision_option);
  const double tokens = static_cast<double>(steps * o.grad_accum_steps * o.batch_size * o.seq_len);
  const int64_t d_ff = m.d_ff > 0 ? m.d_ff : 4 * m.d_model;
  // Weights pre-packed into oneDNN's preferred layout: the kernel's ceiling on this shape. A
  // plain row-major B with a 4 KiB row pitch (d_ff = 3072) runs at about half that rate,
  // which would overstate MFU (the engine repacks such weights itself).
  onednn::GemmRateOptions gemm_options;
  gemm_options.packed_weights = true;
  std::vector<double> rates;  // tokens/s per precision
  // Warm-up updates in every precision, then the timed updates alternate between the
  // precisions, so a change of load on a shared machine hits all of them alike.
  std::vector<PhaseTimes> phase_times(precisions.size());
  std::vector<size_t> peak_bytes(precisions.size(), 0);
  int64_t update = 0;
  for (size_t i = 0; i < precisions.size(); ++i, update += warmup)
    time_steps(precisions[i], update, warmup, false, phase_times[i]);
  onednn::set_gemm_profiling(gemm_breakdown);  // the timed updates only
  for (int64_t s = 0; s < steps; ++s)
    for (size_t i = 0; i < precisions.size(); ++i) {
      engine::reset_peak(engine::cpu());
      time_steps(precisions[i], update++, 1, true, phase_times[i]);
      peak_bytes[i] = std::max(peak_bytes[i], engine::memory_stats(engine::cpu()).peak_bytes);
    }
  onednn::set_gemm_profiling(false);
  const std::vector<onednn::GemmShapeStat> gemm_profile = onednn::take_gemm_profile();
  // The reference GEMM rates, after the timed updates: kGemmRounds rounds, each measuring every
  // precision once, and per precision the median of its rounds. On a machine
  // whose load drifts over seconds, one measurement per dtype let the ratio swing by 10% or more
  // between runs; interleaved rounds see the same drift on both sides.
  constexpr int kGemmRounds = 3;
  std::vector<onednn::GemmRate> reference(precisions.size());
  {
    std::vector<std::vector<onednn::GemmRate>> rounds(precisions.size());
    for (int r = 0; r < kGemmRounds; ++r)
      for (size_t i = 0; i < precisions.size(); ++i)
        rounds[i].push_back(onednn::measure_onednn_matmul_rate(
            o.batch_size * o.seq_len, d_ff, m.d_model,
            precisions[i] == "bf16" ? onednn::DType::kBF16 : onednn::DType::kF32, gemm_options));
    for (size_t i = 0; i < precisions.size(); ++i) {
      std::sort(rounds[i].begin(), rounds[i].end(),
                [](const onednn::GemmRate& a, const onednn::GemmRate& b) {
                  return a.median_gflops < b.median_gflops;
                });
      reference[i] = rounds[i][kGemmRounds / 2];
    }
  }
  const kernels::FmaPeak peak = kernels::measure_fma_peak(kGemmRounds);
  for (size_t i = 0; i < precisions.size(); ++i) {
    const std::string& precision = precisions[i];
    const PhaseTimes& times = phase_times[i];
    const double t_forward = times.forward, t_backward = times.backward, t_clip = times.clip,
                 t_optimizer = times.optimizer;
    const double total = times.total();
    const double tokens_per_second = tokens / total;
    rates.push_back(tokens_per_second);
    const double achieved = flops_per_token * tokens_per_second;
    const onednn::GemmRate& gemm = reference[i];
    char line[640];
    std::snprintf(line, sizeof line,
                  "-- precision %s\n"
                  "tokens/s: %.1f (%lld timed steps, %.3f s/step)\n"
                  "achieved: %.2f GFLOP/s\n"
                  "reference: oneDNN %s GEMM [%lld x %lld] x [%lld x %lld], packed weights, f32 output: %.2f GFLOP/s (%s; median of %d rounds)\n"
                  "MFU vs that GEMM rate: %.1f%%\n"
                  "time per step: forward+loss %.1f%%, backward %.1f%%, clip %.1f%%, optimizer %.1f%%\n"
                  "peak engine memory: %.1f MiB\n",
                  precision.c_str(), tokens_per_second, static_cast<long long>(steps),
                  total / static_cast<double>(steps), achieved / 1e9, precision.c_str(), static_cast<long long>(gemm.m), static_cast<long long>(gemm.k), static_cast<long long>(gemm.k),
                  static_cast<long long>(gemm.n), gemm.median_gflops, gemm.implementation.c_str(), kGemmRounds,
                  100.0 * achieved / (gemm.median_gflops * 1e9), 100 * t_forward / total, 100 * t_backward / total,
                  100 * t_clip / total, 100 * t_optimizer / total,
                  static_cast<double>(peak_bytes[i]) / (1024.0 * 1024.0));
    std::cout << line;
    const kernels::PeakRate& precision_peak = precision == "bf16" ? peak.bf16 : peak.f32;
    if (precision_peak.median_gflops > 0) {
      std::snprintf(line, sizeof line,
                    "machine peak: %s chains, %d threads, %.2f GFLOP/s (median of %d rounds); "
                    "the reference GEMM at %.1f%% of it, the step at %.1f%%\n",
                    precision_peak.isa.c_str(), peak.threads, precision_peak.median_gflops,
                    kGemmRounds, 100.0 * gemm.median_gflops / precision_peak.median_gflops,
                    100.0 * achieved / 1e9 / precision_peak.median_gflops);
      std::cout << line;
    }
    // What MFU this batch allows at best: every FLOP at the reference GEMM rate, nothing else
    // costing time but the clip and optimizer phases as measured. The optimizer's pass streams
    // every parameter, its gradient and the optimizer state (AdamW: 28 bytes per parameter, 30
    // with the bf16 copies) once per update whatever the batch, so at few tokens per update it
    // caps MFU below 100%. (Clipping's norm is read during backward and counted there.)
    const double ideal_compute = flops_per_token * tokens / (gemm.median_gflops * 1e9);
    const double ceiling = ideal_compute / (ideal_compute + t_clip + t_optimizer);
    std::snprintf(line, sizeof line,
                  "ceiling at %lld tokens per update: GEMM rate for every FLOP + the measured clip "
                  "and optimizer phases = %.1f tokens/s, MFU %.1f%%\n",
                  static_cast<long long>(o.grad_accum_steps * o.batch_size * o.seq_len),
                  tokens / (ideal_compute + t_clip + t_optimizer), 100.0 * ceiling);
    std::cout << line;
    if (gemm_breakdown) {
      // bf16 updates run their matmuls as bf16 GEMMs (autocast), f32 updates as f32 ones.
      std::cout << "GEMMs of the timed updates, by shape (rates against the reference above):\n"
                << onednn::format_gemm_profile(gemm_profile, precision, steps,
                                               total / static_cast<double>(steps),
                                               gemm.median_gflops);
      // The same bound with the GEMMs at the rates they ran at: their time as measured, the
      // FLOPs outside them (attention's products) at the reference rate, the clip and
      // optimizer phases as measured, and nothing else (element-wise ops, the loss, waits)
      // costing time. An MFU target above it needs faster GEMMs or a cheaper optimizer pass.
      const onednn::GemmShapeStat gemms = onednn::gemm_profile_total(gemm_profile, precision);
      if (gemms.seconds > 0) {
        const double other_flops = std::max(0.0, flops_per_token * tokens - gemms.flops);
        const double bound_time =
            gemms.seconds + other_flops / (gemm.median_gflops * 1e9) + t_clip + t_optimizer;
        std::snprintf(line, sizeof line,
                      "ceiling with the GEMMs as measured (other FLOPs at the reference rate, "
                      "clip and optimizer as measured, nothing else costing time): %.1f tokens/s, "
                      "MFU %.1f%%\n",
                      tokens / bound_time,
                      100.0 * flops_per_token * tokens / bound_time / (gemm.median_gflops * 1e9));
        std::cout << line;
      }
    }
  }
  if (precisions.size() == 2 && precisions[0] != precisions[1]) {
    // The two reference rates above, measured in interleaved rounds under one load.
    const size_t f32_index = precisions[0] == "f32" ? 0 : 1, bf16_index = 1 - f32_index;
    const onednn::GemmRate& f32_gemm = reference[f32_index];
    const onednn::GemmRate& bf16_gemm = reference[bf16_index];
    const double f32_rate = rates[f32_index], bf16_rate = rates[bf16_index];
    const double gemm_ratio = bf16_gemm.median_gflops / f32_gemm.median_gflops;
    const double target = 0.85 * gemm_ratio * f32_rate;
    char line[640];
    std::snprintf(line, sizeof line,
                  "-- bf16 vs f32 (GEMM rates: medians of %d interleaved f32/bf16 rounds, as above)\n"
                  "oneDNN GEMM: f32 %.2f GFLOP/s (%s), bf16 %.2f GFLOP/s (%s), ratio %.2f\n"
                  "tokens/s: f32 %.1f, bf16 %.1f, speed-up %.2fx\n"
                  "target: 0.85 x %.2f x %.1f = %.1f tokens/s (%.2fx f32): %s (%.0f%% of the target)\n",
                  kGemmRounds, f32_gemm.median_gflops, f32_gemm.implementation.c_str(), bf16_gemm.median_gflops,
                  bf16_gemm.implementation.c_str(), gemm_ratio, f32_rate, bf16_rate, bf16_rate / f32_rate, gemm_ratio,
                  f32_rate, target, target / f32_rate, bf16_rate >= target ? "reached" : "NOT reached",
                  100.0 * bf16_rate / target);
    std::cout << line;
    // The target as a time budget: what an update may spend beyond every FLOP at the bf16
    // reference rate plus the clip and optimizer phases, against what each precision spent
    // there (the GEMMs' shortfall from the reference, element-wise ops, the loss, attention's
    // non-GEMM work, waits). Most of that work costs about the same in either precision, so a
    // budget well below f32's overhead asks bf16 for less of it than f32 spends.
    // ms per update that precision i spends beyond its bound, if its updates took `seconds`.
    auto overhead = [&](size_t i, double seconds) {
      const double ideal = flops_per_token * tokens / (reference[i].median_gflops * 1e9);
      return (seconds - ideal - phase_times[i].clip - phase_times[i].optimizer) * 1e3 /
             static_cast<double>(steps);
    };
    std::snprintf(line, sizeof line,
                  "beyond the bound (every FLOP at the reference rate + clip and optimizer as "
                  "measured), ms per update: f32 %.4g, bf16 %.4g; the target leaves bf16 %.4g\n",
                  overhead(f32_index, phase_times[f32_index].total()),
                  overhead(bf16_index, phase_times[bf16_index].total()),
                  overhead(bf16_index, tokens / target));
    std::cout << line;
  }
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"bench train", "Training throughput, FLOP/s and MFU against oneDNN's GEMM rate", run_bench_train});

}  // namespace patchbay::cli
