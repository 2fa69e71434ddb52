// The training loop: a model and an optimizer built from a validated config, micro-batches
// with gradient accumulation, global-norm clipping, the learning-rate schedule, periodic
// evaluation, checkpoints, samples and metrics — in a run directory:
//   <run_dir>/config.toml     the resolved config (every default written out)
//   <run_dir>/train.log       everything logged while the run worked
//   <run_dir>/metrics.jsonl   per log step: step, loss, lr, grad_norm, tokens_per_second,
//                             elapsed_seconds, tokens, peak_memory_bytes, and the layers'
//                             statistics ("blocks.<i>.ffn.expert_load", ...: layer_stats.hpp);
//                             per evaluation: step, val_loss, val_ppl, val_bpb, val_tokens,
//                             val_bytes, and the statistics prefixed "val_", over the targets
//                             that carry loss, plus the objective's own fields
//                             (objective.hpp; mlm: val_accuracy and "objective": "mlm"),
//                             plus [eval] tasks' metrics ("task.<task>.acc", ...;
//                             training_tasks.hpp)
//   <run_dir>/model_size.json parameters (with and without embeddings), FLOPs per token
//   <run_dir>/tokenizer.txt   copy of the tokenizer file the run uses
//   <run_dir>/checkpoints/    train/checkpoint.hpp
//   <run_dir>/samples.txt     every printed sample, with its step
// The objective (train.objective, objective.hpp) makes every batch from the data's windows;
// the loop never asks which objective it is.
// One update (step s, 0-based):
//   for micro m in [0, G): objective.training_batch(windows(seed, s, m)) -> logits
//                          -> loss_m = CE over the targets that carry loss (+ aux loss);
//                          backward(loss_m / G)          (gradients accumulate)
//   norm = clip_grad_norm(params, grad_clip) (or the plain norm when grad_clip = 0)
//   optimizer.step(learning_rate(schedule, s)); gradients dropped
// A NaN/Inf loss or gradient norm stops the run before the update: no checkpoint is written
// over the last good one, metrics keep the failing record, TrainSummary::numeric_failure says
// what happened and what to try.
// Resuming (TrainRequest::resume) loads parameters and optimizer state and continues at the
// stored step. Batches are counter-based (batches.hpp); dropout generators live inside the
// model and its plugins and are not exported through the ABI, so when any dropout is on, the
// resume replays the earlier forward passes without gradients to advance them: on CPU the
// resumed run is then bit-identical to one that never stopped (tested).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config_document.hpp"
#include "config/schema_registry.hpp"
#include "model/language_model.hpp"
#include "runtime/optimizer_handle.hpp"
#include "runtime/registry.hpp"
#include "train/batches.hpp"
#include "train/bf16_weight_copies.hpp"
#include "train/evaluator.hpp"
#include "train/fine_tuning.hpp"
#include "train/layer_stats.hpp"
#include "train/lora.hpp"
#include "train/train_config.hpp"

namespace patchbay::train {

struct StepResult;

// A model with its optimizer, as a config describes them.
struct TrainableModel {
  std::unique_ptr<model::LanguageModel> model;
  std::unique_ptr<runtime::OptimizerHandle> optimizer;
  // What checkpoints store and a resume restores: every model parameter (frozen ones too), or
  // with LoRA the adapters (train/lora.hpp) and the layers' non-trainable state (Performer's).
  std::vector<model::NamedParameter> parameters;
  std::vector<engine::Tensor> parameter_tensors;  // the leaves that require grad (trained)
  // Those leaves as the optimizer takes them: weight-decay group and lr factor
  // (param_groups.hpp, [train] lr_scale in lr_scale.hpp); in parameter_tensors' order.
  std::vector<runtime::OptimizerHandle::Parameter> optimizer_parameters;
  // [train.lora]: the adapters, attached to the model's weights through the engine's low-rank
  // adapter path (train/lora.hpp; the base weights stay frozen); null without LoRA.
  std::shared_ptr<LoraAdapters> lora;
  std::string optimizer_name;
  // Multi-process hooks (core/parallel, set by train_model when the run is distributed; empty
  // in one process): before the backward of micro-batch m of G, and after the last backward
  // (there gradients are averaged over ranks and the step's loss values too).
  std::function<void(int64_t micro, int64_t accum)> before_backward;
  std::function<void(StepResult& result)> after_backward;
  // ZeRO-1 (core/parallel/zero1.hpp) and tensor parallelism (core/parallel/tensor_parallel.hpp):
  // the global gradient norm (over every rank's shard or slices), and for ZeRO-1 the sharded
  // update with the gradients read times grad_scale (the clip factor, 1: none); empty:
  // train_step's own.
  std::function<double()> grad_norm;
  std::function<void(double lr, double grad_scale)> optimizer_step;
  // bf16 precision: the weights' bf16 copies, written by the optimizer's update pass
  // (train/bf16_weight_copies.hpp); made at the first bf16 step (after any restore), never with
  // optimizer_step set (ZeRO-1 writes parameters by all-gather). false: every bf16 scope
  // rounds the weights itself (the comparison the tests make).
  std::shared_ptr<Bf16WeightCopies> bf16_copies;
  bool use_bf16_copies = true;
};

// Builds the model ([model] sections, vocab_size from the tokenizer) and the [optimizer]
// component, registering every parameter with its group (train/param_groups.hpp). With
// tp_size > 1 the layers are split for tensor parallelism (this process is rank tp_rank) and
// the optimizer gets this rank's slices (model::ModelOptions::tp_size).
// Fine-tuning (docs/finetuning.md), in this order: `initial` (train.init_from's weights, read by
// the caller) is copied into the model, names mismatching refused (fine_tuning.hpp); then
// [train.lora] attaches adapters and freezes the rest (lora.hpp), or train.freeze freezes its
// patterns; only what still requires a gradient is handed to the optimizer, at lr times its
// [train] lr_scale factor (lr_scale.hpp).
TrainableModel build_trainable_model(const config::ResolvedConfig& config,
                                     runtime::Registry& registry,
                                     const config::ComponentSchemaLookup& lookup,
                                     int64_t vocab_size, int64_t tp_rank = 0, int64_t tp_size = 1,
                                     const InitialWeights* initial = nullptr);

// The parameters that require a gradient, as the optimizer takes them: each with its
// weight-decay group (param_groups.hpp) and lr factor (lr_scale.hpp; `lr_scales` checked
// against every name here, frozen ones included).
std::vector<runtime::OptimizerHandle::Parameter> optimizer_parameters(
    const std::vector<model::NamedParameter>& parameters, const std::vector<LrScale>& lr_scales);

// Right after opening an update's bf16 autocast scope: hands the scope the weights' bf16
// copies that the optimizer keeps (creating and registering them on first use), unless
// use_bf16_copies is false or a custom optimizer_step writes the parameters.
void use_bf16_weight_copies(TrainableModel& trainable);
// Before an f32 update of a model that also takes bf16 updates (bench train alternates them):
// the optimizer stops writing the copies (Bf16WeightCopies::pause).
void pause_bf16_weight_copies(TrainableModel& trainable);

struct StepResult {
  double loss = 0;       // mean over the micro-batches (without the aux loss)
  double aux_loss = 0;   // mean over the micro-batches (0 when the model has none)
  double grad_norm = 0;  // before clipping
  double lr = 0;
  bool finite = true;    // false: loss or norm is NaN/Inf and no update was made
  LayerStats layer_stats;  // feed-forward statistics (MoE load, drops, ...), mean over micro-batches
  // Device runs (train/device_step.hpp): the step's values stay on the device, f32 [4] =
  // {loss, aux_loss, grad_norm, poison (0, or NaN when one of them is not finite)}, and
  // values_pending is true until the trainer reads them (at logging steps); loss, aux_loss,
  // grad_norm and finite above are then filled. Undefined / false on the CPU.
  engine::Tensor device_values;
  bool values_pending = false;
};

// One optimizer update at step `step` (0-based) with micro-batches from `micro_batch(m)`.
StepResult train_step(TrainableModel& trainable, const TrainOptions& options, int64_t step,
                      const std::function<Batch(int64_t micro_step)>& micro_batch);

struct TrainRequest {
  std::filesystem::path resume;  // empty: a fresh run
  // The run directory to write; empty: the config's (train.out_dir or run.output_dir/run.name).
  // `patchbay train --resume DIR` sets it to DIR's run directory, so a moved or copied run
  // resumes in place (run/run_directory.hpp). The writer holds DIR's lock while it trains.
  std::filesystem::path run_dir;
  // A corrupt checkpoint to resume from: refused naming the newest intact one (false), or that
  // one used (true; `--resume-from-intact`).
  bool resume_from_intact = false;
  // A fresh run refuses a run directory that already holds metrics or checkpoints unless
  // this is set; then those files are removed first.
  bool overwrite = false;
  bool show_progress = true;
  bool print_samples = true;     // to stdout (always written to samples.txt)
  // Reads train.init_from's weights (fine_tuning.hpp); empty: read_checkpoint_weights (Patchbay
  // runs and checkpoints). `patchbay train` passes core/interop's reader (HF, GGUF too).
  InitialWeightsReader read_initial_weights;
  // Called before each update with its step (tests inject NaN into a parameter here).
  std::function<void(int64_t step, const std::vector<model::NamedParameter>&)> before_step;
  // Called with each training micro-batch of the whole global batch (before a rank keeps its
  // rows): tests compare what runs on different numbers of ranks, or resumed, read.
  std::function<void(int64_t step, int64_t micro, const Batch& global_batch)> on_batch;
  // A fresh run writes checkpoints/step_0.safetensors before its first update (`patchbay train
  // --checkpoint-at-start`): the starting point, e.g. LoRA's initial adapters, for comparisons.
  bool checkpoint_at_start = false;
};

struct TrainSummary {
  std::filesystem::path run_dir;
  int64_t start_step = 0;
  int64_t steps_done = 0;  // the step the run ended at (updates made in total)
  double last_loss = 0;
  std::optional<EvalResult> last_eval;
  std::filesystem::path last_checkpoint;  // empty when none was written
  bool numeric_failure = false;
  std::string failure_message;  // what happened and what to try
  double seconds = 0;
  double tokens_per_second = 0;
  std::string last_sample;
  int64_t parameter_count = 0;
  bool writer = true;  // false on ranks other than 0 of a multi-process run (they write nothing)
};

// Checkpoint metadata every run records (also written by `patchbay import`, core/interop):
// the components the config uses with their plugins (kMetaComponents, a JSON array), and the
// folders and files the registry searched, absolute (kMetaPluginSearchPath, a JSON array).
std::string components_json(const config::ResolvedConfig& config, runtime::Registry& registry,
                            const std::string& optimizer);
std::string plugin_search_path_json(const runtime::Registry& registry);

// Trains as described above. Throws patchbay::Error for configuration, data or plugin
// problems; a numeric failure is reported in the summary (the CLI maps it to kExitNumeric).
TrainSummary train_model(const config::ResolvedConfig& config, runtime::Registry& registry,
                         const config::ComponentSchemaLookup& lookup, const TrainRequest& request = {});

}  // namespace patchbay::train
