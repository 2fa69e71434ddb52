// The training loop and its run directory; see trainer.hpp.
#include "train/trainer.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "common/logging.hpp"
#include "config/component_view.hpp"
#include "config/config_printer.hpp"
#include "data/split.hpp"
#include "data/tokenizer_io.hpp"
#include "engine/autograd.hpp"
#include "engine/device.hpp"
#include "engine/ops.hpp"
#include "model/encoder_decoder.hpp"
#include "parallel/gradient_reducer.hpp"
#include "parallel/parallel_run.hpp"
#include "parallel/tensor_parallel.hpp"
#include "parallel/zero1.hpp"
#include "patchbay/abi.h"
#include "run/atomic_file.hpp"
#include "run/metrics_log.hpp"
#include "run/progress_bar.hpp"
#include "run/run_directory.hpp"
#include "train/checkpoint.hpp"
#include "train/device_step.hpp"
#include "train/grad_clip.hpp"
#include "train/mixture_evaluation.hpp"
#include "train/mixture_sampler.hpp"
#include "train/objective.hpp"
#include "train/training_data.hpp"
#include "train/training_tasks.hpp"
#include "eval/tokenizer_codec.hpp"

namespace patchbay::train {

namespace fs = std::filesystem;

std::string components_json(const config::ResolvedConfig& config, runtime::Registry& registry,
                            const std::string& optimizer) {
  std::set<std::pair<pb_component_kind, std::string>> used{{PB_KIND_TOKENIZER, config_string(config, "tokenizer.kind")},
                                                           {PB_KIND_OPTIMIZER, optimizer}};
  if (model::model_architecture(config) == "encoder_decoder") {
    const model::EncoderDecoderOptions e = model::encoder_decoder_options_from_config(config, 1);
    used.insert({PB_KIND_ATTENTION, e.cross_attention});
    for (const auto* kinds : {&e.base.feedforward_kinds, &e.encoder_feedforward, &e.decoder_feedforward})
      for (const std::string& kind : *kinds) used.insert({PB_KIND_FEEDFORWARD, kind});
  } else {
    const model::ModelOptions model_options = model::model_options_from_config(config, 1);
    for (const std::string& kind : model_options.attention_kinds) used.insert({PB_KIND_ATTENTION, kind});
    for (const std::string& kind : model_options.feedforward_kinds) used.insert({PB_KIND_FEEDFORWARD, kind});
  }
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [kind, name] : used) {
    const runtime::ComponentEntry& entry = registry.find(kind, name);
    const runtime::PluginEntry& plugin = registry.plugin_of(entry);
    list.push_back({{"kind", runtime::kind_name(kind)},
                    {"name", entry.name},
                    {"version", entry.version},
                    {"plugin", plugin.metadata.name},
                    {"plugin_version", plugin.metadata.version},
                    {"plugin_file", std::filesystem::absolute(plugin.file).lexically_normal().string()},
                    {"plugin_abi", std::to_string(plugin.metadata.abi_major) + "." +
                                       std::to_string(plugin.metadata.abi_minor)}});
  }
  return list.dump();
}

std::string plugin_search_path_json(const runtime::Registry& registry) {
  nlohmann::json list = nlohmann::json::array();
  for (const std::filesystem::path& p : registry.searched())
    list.push_back(std::filesystem::absolute(p).lexically_normal().string());
  return list.dump();
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// unread_from >= 0: a device run, whose step values were last read before step unread_from
// (0-based; train/device_step.hpp), so the first non-finite value lies in [unread_from, step].
std::string numeric_failure_message(int64_t step, const StepResult& r, const TrainOptions& o,
                                    const fs::path& last_checkpoint, int64_t unread_from = -1) {
  std::ostringstream m;
  m << "training stopped at step " << step + 1 << ": ";
  if (!std::isfinite(r.loss)) {
    m << "the loss is " << r.loss;
  } else if (!std::isfinite(r.aux_loss)) {
    m << "the auxiliary loss is " << r.aux_loss;
  } else {
    m << "the gradient norm is " << r.grad_norm << " (loss " << r.loss << ")";
  }
  if (unread_from >= 0) {
    m << ". On the device the step values are read at logging steps: the first non-finite value "
         "came at one of steps "
      << unread_from + 1 << " to " << step + 1
      << ", whose updates were made; no checkpoint was written since; ";
  } else {
    m << ". No update was made and no checkpoint was written; ";
  }
  if (last_checkpoint.empty()) {
    m << "there is no earlier checkpoint. ";
  } else {
    m << "the last good checkpoint is " << last_checkpoint.string() << ". ";
  }
  m << "Try: a lower train.lr (now " << o.schedule.lr << ")";
  if (o.grad_clip <= 0) {
    m << ", gradient clipping (train.grad_clip = 1.0; now off)";
  } else {
    m << ", a tighter train.grad_clip (now " << o.grad_clip << ")";
  }
  if (o.schedule.warmup_steps == 0) m << ", a warmup (train.warmup_steps)";
  m << "; then resume with --resume " << (last_checkpoint.empty() ? "(none)" : last_checkpoint.string()) << ".";
  return m.str();
}

// Resuming at a checkpoint: metrics.jsonl loses the records the interrupted run wrote after
// the checkpoint's step (they are trained again, and would otherwise appear twice), and the
// returned offset lets elapsed_seconds continue: the checkpoint's own count, or, for a
// checkpoint written before it stored one, the last kept record's.
double resume_metrics(const fs::path& metrics_file, const Checkpoint& checkpoint) {
  const int64_t step = checkpoint.step();
  const std::size_t dropped = run::drop_metrics_after(metrics_file, step);
  if (dropped > 0)
    spdlog::info("{}: dropped {} records the interrupted run wrote after step {}", metrics_file.string(), dropped,
                 step);
  const auto stored = checkpoint.metadata().find(kMetaElapsedSeconds);
  if (stored != checkpoint.metadata().end()) return std::stod(stored->second);
  double elapsed = 0;
  if (fs::exists(metrics_file))
    for (const nlohmann::json& record : run::read_metrics(metrics_file))
      if (record.contains("elapsed_seconds") && record["elapsed_seconds"].is_number())
        elapsed = record["elapsed_seconds"].get<double>();
  return elapsed;
}

// Tensor-parallel resume: copies each of this rank's slices of the checkpoint's full tensors
// into its parameter, after checking all of them (present, same shape and dtype).
void copy_slices_into(const std::vector<NamedTensor>& slices,
                      const std::vector<NamedTensor>& params, const fs::path& file) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (!slices[i].tensor.defined())
      throw Error(ErrorKind::kInvalidArgument, file.string() + ": checkpoint has no tensor '" +
                                                   params[i].name +
                                                   "' (model and checkpoint differ)");
    if (slices[i].tensor.shape() != params[i].tensor.shape() ||
        slices[i].tensor.dtype() != params[i].tensor.dtype())
      throw Error(ErrorKind::kInvalidArgument, file.string() + ": tensor '" + params[i].name +
                                                   "' gives this rank " + slices[i].tensor.str() +
                                                   ", its slice of the model has " +
                                                   params[i].tensor.str());
  }
  engine::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    engine::Tensor destination = params[i].tensor;
    engine::copy_(destination, slices[i].tensor);
  }
}

TrainOptions with_run_dir(TrainOptions options, const fs::path& run_dir) {
  if (!run_dir.empty() && run_dir.lexically_normal() != options.run_dir.lexically_normal()) {
    spdlog::info("writing into {} (the run resumed), not the config's {}", run_dir.string(),
                 options.run_dir.string());
    options.run_dir = run_dir;
  }
  return options;
}

// `checkpoint` when it loads and verifies, else the newest intact one beside it (or none), so
// a failure message never points at a checkpoint that cannot be resumed.
fs::path intact_or_newest_intact(const fs::path& checkpoint) {
  if (checkpoint.empty()) return checkpoint;
  try {
    return Checkpoint(checkpoint).path();
  } catch (const Error&) {
    const std::optional<Checkpoint> intact =
        newest_intact_checkpoint(checkpoint.parent_path(), checkpoint);
    return intact ? intact->path() : fs::path();
  }
}

// A fresh run must not mix its metrics and checkpoints with an earlier run's.
void claim_fresh_run_dir(const fs::path& run_dir, bool overwrite) {
  const fs::path produced[] = {run_dir / "checkpoints", run_dir / "metrics.jsonl",
                               run_dir / "samples.txt", run_dir / "train.log"};
  bool used = false;
  for (const fs::path& p : produced) used = used || fs::exists(p);
  if (!used) return;
  if (!overwrite) {
    throw Error(ErrorKind::kInvalidArgument,
                "run directory '" + run_dir.string() +
                    "' already holds a run (metrics or checkpoints). Continue it with --resume " +
                    run_dir.string() + ", start a new one under another name (--set run.name=...), "
                    "or replace it with --overwrite.");
  }
  for (const fs::path& p : produced) fs::remove_all(p);
}

// Fine-tuning under the parallel strategies: freezing works with all of them (frozen parameters
// are left out of reducers and shards); init_from is read as full tensors, which tensor
// parallelism would have to slice; LoRA runs in one process or data parallel (the reducer
// averages the targeted weights' gradients, then each rank folds them into the adapters), not
// with ZeRO-1 or tensor parallelism, whose shards and slices are of the model's parameters.
void check_fine_tuning_supported(const TrainOptions& o, const parallel::ParallelRun& par,
                                 bool tensor_parallel) {
  if (!o.init_from.empty() && tensor_parallel)
    throw Error(ErrorKind::kInvalidArgument,
                "train.init_from is not supported with tensor parallelism yet (the weights would "
                "have to be sliced per rank); fine-tune with parallelism.kind = \"mpi_data\" or in "
                "one process");
  if (o.lora.enabled && par.distributed() && par.strategy() != PB_PARALLEL_DATA)
    throw Error(ErrorKind::kInvalidArgument,
                "[train.lora] runs in one process or with parallelism.kind = \"mpi_data\" (ZeRO-1 "
                "shards and tensor-parallel slices are of the model's weights, not the adapters'); "
                "use mpi_data, or full fine-tuning (train.init_from without [train.lora])");
}

// The training loop of one process; `par` says which rank it is (parallel/parallel_run.hpp):
// only the writer (rank 0) writes files, each rank trains on its shard of every batch.
TrainSummary train_model_in(const config::ResolvedConfig& config, runtime::Registry& registry,
                            const config::ComponentSchemaLookup& lookup, const TrainRequest& request,
                            parallel::ParallelRun& par) {
  const TrainOptions o = with_run_dir(train_options_from_config(config), request.run_dir);
  // [eval] tasks (training_tasks.hpp): read and built now, so a bad one stops the run before
  // any data is prepared or any step is taken.
  const TrainingTasks tasks(training_task_settings(config));
  TrainSummary summary;
  summary.run_dir = o.run_dir;
  summary.writer = par.writer();
  std::optional<run::RunDirectoryLock> run_dir_lock;  // one writer per run directory
  if (par.writer()) {
    run_dir_lock.emplace(o.run_dir);
    for (const fs::path& folder : {o.run_dir, o.run_dir / "checkpoints"})
      for (const fs::path& left : run::remove_stale_temporaries(folder))
        spdlog::info("removed {}, left by a write that was killed", left.string());
  }
  if (request.resume.empty() && par.writer()) claim_fresh_run_dir(o.run_dir, request.overwrite);
  fs::create_directories(o.run_dir);
  if (par.writer()) logging::add_run_log_file(o.run_dir / "train.log");
  if (!par.writer()) spdlog::set_level(spdlog::level::warn);  // rank 0 reports for the job
  const std::string config_text = config::to_toml(config);
  if (par.writer()) run::write_text_atomically(o.run_dir / "config.toml", config_text);

  if (!par.writer()) par.barrier();  // rank 0 prepares (and caches) the data first
  TrainingData data = prepare_training_data(config, registry, lookup);
  if (par.writer()) par.barrier();
  const fs::path run_tokenizer = o.run_dir / "tokenizer.txt";
  if (par.writer() && (!fs::exists(run_tokenizer) ||
                       data::fnv1a64(data::read_text_file(run_tokenizer)) != data.tokenizer_hash))
    fs::copy_file(data.tokenizer_file, run_tokenizer, fs::copy_options::overwrite_existing);
  const TokenBytes target_bytes = token_bytes(data.tokenizer);  // bits per byte of evaluated targets
  const double val_tokens_per_byte =
      static_cast<double>(data.val.size()) / static_cast<double>(std::max<uint64_t>(1, data.val_bytes));

  // Tensor parallelism: the layers split over the ranks (rank r of W); every rank sees the full
  // batch.
  const bool tensor_parallel = par.distributed() && par.strategy() == PB_PARALLEL_TENSOR;
  check_fine_tuning_supported(o, par, tensor_parallel);
  // train.init_from: the weights are read for a fresh run; a resumed one has them in its
  // checkpoint, except under LoRA, whose checkpoints hold only the adapters.
  std::optional<InitialWeights> initial;
  if (!o.init_from.empty() && (request.resume.empty() || o.lora.enabled))
    initial = request.read_initial_weights ? request.read_initial_weights(o.init_from)
                                           : read_checkpoint_weights(o.init_from);
  TrainableModel trainable = build_trainable_model(
      config, registry, lookup, data.tokenizer.vocab_size(), tensor_parallel ? par.rank() : 0,
      tensor_parallel ? par.world_size() : 1, initial ? &*initial : nullptr);
  initial.reset();  // the model holds the weights now
  // The objective (objective.hpp) makes each batch from the data's windows, says which
  // positions carry loss, what evaluation reports and whether samples make sense. Batches are
  // made on the full global batch, then sharded: they do not depend on the ranks.
  // Which windows each micro-batch reads is the data's business (data.sampling,
  // window_sampler.hpp): a pure function of (seed, step, micro) and the global batch shape.
  const std::unique_ptr<TrainingObjective> objective = make_objective(config, o, data.tokenizer);
  if (!tasks.empty() && !objective->makes_samples())
    throw Error(ErrorKind::kInvalidArgument,
                "eval.tasks: task scoring reads left-to-right log-likelihoods, and train.objective = \"" +
                    o.objective + "\" trains a model that does not make them; set eval.tasks = []");
  const eval::TextCodec task_codec = eval::text_codec_of(data.tokenizer);
  const WindowSampler sampler(data.train, data.train.document_starts(), data.sampling, o.batch_size,
                              o.grad_accum_steps, o.seq_len);
  // [[data.sources]]: each row's source from the blend (mixture_sampler.hpp).
  std::optional<MixtureSampler> mixture;
  if (!data.mixture.empty()) {
    std::vector<const data::TokenSequence*> streams;
    std::vector<double> shares;  // weights, or epochs per pass when the sources give epochs
    const bool by_epochs = data.mixture.front().epochs > 0;
    for (const MixtureData& m : data.mixture) {
      streams.push_back(&m.train);
      shares.push_back(by_epochs ? m.epochs : m.weight);
    }
    mixture.emplace(streams, shares, by_epochs, data.sampling, o.batch_size, o.grad_accum_steps, o.seq_len);
    if (by_epochs)
      spdlog::info("mixture by epochs: one pass (every source its epochs) is {} samples, {:.2f} steps; max_steps = {}",
                   mixture->schedule().period(),
                   static_cast<double>(mixture->schedule().period()) / static_cast<double>(o.batch_size * o.grad_accum_steps),
                   o.max_steps);
  }
  // [data] pack_documents: every window marked with its documents' segments (the model then
  // attends within documents only; docs/packing.md). Refused up front when the objective's
  // batches would drop the segments or a layer cannot honour them.
  if (data.pack_documents) {
    if (!objective->packs_segments())
      throw Error(ErrorKind::kInvalidArgument,
                  "data.pack_documents = true, but train.objective = \"" + objective->name() +
                      "\" makes its batches without the windows' segments; turn packing off");
    trainable.model->require_packing();
  }
  if (objective->packs_examples()) trainable.model->require_packing();
  auto packed = [&](TokenWindows windows, const data::TokenSequence& stream) {
    return data.pack_documents
               ? with_document_segments(std::move(windows), stream.document_starts())
               : windows;
  };
  auto micro_batch_at = [&](int64_t step, int64_t micro) {
    return objective->training_batch(
        mixture ? mixture->training_windows(o.seed, step, micro)
                : packed(sampler.training_windows(o.seed, step, micro), data.train),
        o.seed, step, micro);
  };
  const ValidationWindows validation = [&](int64_t b) {
    return packed(validation_windows(data.val, b, o.eval_batches, o.batch_size, o.seq_len),
                  data.val);
  };
  model::LanguageModel& model = *trainable.model;
  if (o.seq_len > model.options().context_length)
    throw Error(ErrorKind::kInvalidArgument, "train.seq_len (" + std::to_string(o.seq_len) +
                                                 ") exceeds model.context_length (" +
                                                 std::to_string(model.options().context_length) + ")");
  // Under tensor parallelism the model holds this rank's slices: W equal slices per split tensor.
  auto full_parameter_count = [&](bool exclude_embeddings) {
    int64_t sliced = 0;
    for (const model::NamedParameter& p : trainable.parameters)
      if (model.tensor_parallel_partitions().count(p.name) != 0) sliced += p.tensor.numel();
    return model.parameter_count(exclude_embeddings) + (model.options().tp_size - 1) * sliced;
  };
  summary.parameter_count = full_parameter_count(false);
  // The whole model's training FLOPs: the layer's count covers this rank's slices, so the
  // other ranks' slices (the same matmuls, 6 FLOPs per parameter and token) are added back.
  const double flops_per_token =
      model.flops_per_token(o.seq_len) +
      6.0 * static_cast<double>(full_parameter_count(true) - model.parameter_count(true));
  // Model size for reports (`patchbay compare`, `patchbay scaling fit`).
  if (par.writer())
    run::write_text_atomically(
        o.run_dir / "model_size.json",
        nlohmann::json{{"parameters", full_parameter_count(false)},
                       {"non_embedding_parameters", full_parameter_count(true)},
                       {"flops_per_token", flops_per_token},
                       {"seq_len", o.seq_len},
                       {"tokens_per_step", o.batch_size * o.seq_len * o.grad_accum_steps}}
                .dump() +
            "\n");
  spdlog::info(
      "model: {} parameters ({} without embeddings), {:.3g} training FLOPs per token at T={}",
      full_parameter_count(false), full_parameter_count(true), flops_per_token, o.seq_len);
  if (tensor_parallel)
    spdlog::info(
        "tensor parallel: {} ranks, {} parameters split (heads and hidden units), the rest "
        "replicated; "
        "the parameter and FLOP counts above are the whole model's",
        par.world_size(), model.tensor_parallel_partitions().size());
  spdlog::info("data: train {} tokens, val {} tokens ({:.4f} tokens/byte), vocab {}", data.train.size(),
               data.val.size(), val_tokens_per_byte, data.tokenizer.vocab_size());
  if (o.precision == "bf16")
    spdlog::info("precision: bf16 mixed (bf16 matmuls with f32 accumulation; f32 weights, optimizer state, "
                 "reductions and checkpoints; evaluation in f32)");

  std::map<std::string, std::string> metadata{
      {kMetaConfig, config_text},
      {kMetaComponents, components_json(config, registry, trainable.optimizer_name)},
      {kMetaSdkAbi, std::to_string(PB_ABI_VERSION_MAJOR) + "." + std::to_string(PB_ABI_VERSION_MINOR)},
      {kMetaSourceRevision, source_revision()},
      {kMetaTokenizerFile, run_tokenizer.string()},
      {kMetaTokenizerHash, std::to_string(data.tokenizer_hash)},
      {kMetaPluginSearchPath, plugin_search_path_json(registry)}};
  if (!o.init_from.empty())
    metadata[kMetaInitFrom] = fs::absolute(o.init_from).lexically_normal().string();
  if (trainable.lora) metadata[kMetaLora] = trainable.lora->describe_json();
  par.check_agreement(config_text, metadata[kMetaComponents]);
  std::unique_ptr<parallel::GradientReducer> reducer;
  std::unique_ptr<parallel::Zero1> zero;
  std::unique_ptr<parallel::TensorParallel> tp;
  std::vector<engine::Tensor> tp_sliced, tp_replicated;  // this rank's parameters, by kind
  std::map<std::string, engine::Tensor> tp_parameters;   // by name (optimizer state shapes)
  if (tensor_parallel) {
    if (trainable.optimizer_name != "adamw" && trainable.optimizer_name != "sgd" &&
        trainable.optimizer_name != "lion")
      throw Error(ErrorKind::kInvalidArgument,
                  "tensor parallelism gives each rank's optimizer slices of the weight matrices, "
                  "which is exact "
                  "only for element-wise optimizers (adamw, sgd, lion); '" +
                      trainable.optimizer_name +
                      "' is not one (adafactor factors by rows and columns). Use parallelism.kind "
                      "= \"mpi_data\"");
    std::map<std::string, parallel::ShardLayout> layouts;
    for (const auto& [name, p] : model.tensor_parallel_partitions())
      layouts[name] = {p.dim, p.stride};
    tp = std::make_unique<parallel::TensorParallel>(par.group(), std::move(layouts));
    for (const model::NamedParameter& p : trainable.parameters) {
      tp_parameters[p.name] = p.tensor;
      if (!p.tensor.requires_grad()) continue;  // non-trainable state: no gradient, not broadcast
      (tp->partitioned(p.name) ? tp_sliced : tp_replicated).push_back(p.tensor);
    }
    // Global norm: every element of the full model once. The slices' squares are summed over
    // ranks (in rank order, the same double on every rank); the replicated parameters' gradients
    // are identical on every rank (tensor_parallel.hpp), so they count once, from this rank.
    // The clip factor from this norm is then folded into the (unchanged) optimizer's update.
    trainable.grad_norm = [&] {
      return std::sqrt(par.sum(grad_square_sum(tp_sliced)) + grad_square_sum(tp_replicated));
    };
  } else if (par.distributed() && par.strategy() == PB_PARALLEL_ZERO1) {
    if (trainable.optimizer_name != "adamw" && trainable.optimizer_name != "sgd" && trainable.optimizer_name != "lion")
      throw Error(ErrorKind::kInvalidArgument,
                  "ZeRO-1 shards parameters element by element, which is exact only for element-wise optimizers "
                  "(adamw, sgd, lion); '" + trainable.optimizer_name +
                      "' is not one (adafactor factors by rows and columns). Use parallelism.kind = \"mpi_data\"");
    // The trained parameters with their groups and lr factors (non-trainable state is not
    // sharded, not updated).
    const std::vector<runtime::OptimizerHandle::Parameter>& params = trainable.optimizer_parameters;
    trainable.optimizer.reset();  // the shard's own optimizer replaces the full one
    zero = std::make_unique<parallel::Zero1>(par.group(), params, [&] {
      const config::SelectedComponent selected =
          config::select_component(config, make_training_schema(), lookup, "optimizer");
      return std::make_unique<runtime::OptimizerHandle>(
          registry.create(PB_KIND_OPTIMIZER, selected.name, *selected.config.view()), registry.host());
    });
    trainable.after_backward = [&](StepResult& r) {
      zero->reduce_scatter_gradients();
      const std::vector<double> mean = par.average({r.loss, r.aux_loss});
      r.loss = mean[0];
      r.aux_loss = mean[1];
    };
    trainable.grad_norm = [&] { return std::sqrt(par.sum(grad_square_sum(zero->pieces()))); };
    trainable.optimizer_step = [&](double lr, double grad_scale) {
      optimizer_step_scaled(zero->optimizer(), zero->pieces(), lr, grad_scale);
      zero->all_gather_parameters();
    };
  } else if (par.distributed()) {
    if (par.strategy() != PB_PARALLEL_DATA)
      throw Error(ErrorKind::kInvalidArgument, "parallelism strategy '" +
                                                   runtime::parallel_strategy_name(par.strategy()) +
                                                   "' is not implemented by the trainer; use "
                                                   "parallelism.kind = \"mpi_data\", \"mpi_zero1\" "
                                                   "or \"mpi_tensor\"");
    // LoRA: the adapters are the parameters (their gradients come from backward directly).
    reducer = std::make_unique<parallel::GradientReducer>(
        par.group(), trainable.parameter_tensors,
        static_cast<int64_t>(par.options().bucket_mb * 1048576.0), par.options().overlap);
    trainable.before_backward = [&](int64_t micro, int64_t accum) {
      if (micro == accum - 1) reducer->begin();  // earlier micro-batches only accumulate
    };
    trainable.after_backward = [&](StepResult& r) {
      reducer->finish();
      const std::vector<double> mean = par.average({r.loss, r.aux_loss});
      r.loss = mean[0];
      r.aux_loss = mean[1];
    };
  }
  // Each rank's batch: its rows of the global batch (all of it in one process).
  auto rank_batch = [&](Batch b) {
    if (tensor_parallel)
      return b;  // every rank computes its slice of the layers on the whole batch
    b.inputs = par.shard_rows(b.inputs);
    b.targets = par.shard_rows(b.targets);
    for (engine::Tensor* t : {&b.source, &b.source_padding, &b.target_padding, &b.segment_ids})
      if (t->defined()) *t = par.shard_rows(*t);
    return b;
  };

  int64_t start_step = 0;
  double elapsed_before = 0;  // training seconds of the earlier parts of a resumed run
  if (!request.resume.empty()) {
    const Checkpoint checkpoint = load_checkpoint(
        request.resume, request.resume_from_intact ? CorruptCheckpoint::kUseNewestIntact
                                                   : CorruptCheckpoint::kRefuse);
    start_step = checkpoint.step();
    if (o.dropout && start_step > 0) {
      // Advance every dropout generator (model and plugins) exactly as the first run did. This
      // runs before the restore below, so state that training forwards advance and the
      // checkpoint carries (Performer's redraw count) ends at the stored value, not past it.
      // About a third of the time the steps took: a bar, so a long replay is not taken for a hang.
      spdlog::info("replaying {} forward passes to restore the dropout random streams", start_step * o.grad_accum_steps);
      std::optional<run::ProgressBar> replay_progress;
      if (request.show_progress && par.writer()) replay_progress.emplace("replay", start_step);
      engine::NoGradGuard no_grad;
      for (int64_t s = 0; s < start_step; ++s) {
        for (int64_t m = 0; m < o.grad_accum_steps; ++m)
          forward_batch(model, rank_batch(micro_batch_at(s, m)), true);
        if (replay_progress) replay_progress->update(s + 1, "forward passes without gradients");
      }
      if (replay_progress) replay_progress->finish();
    }
    std::vector<NamedTensor> params;
    for (const model::NamedParameter& p : trainable.parameters) params.push_back({p.name, p.tensor});
    if (tp) {
      // Full tensors in the checkpoint (any world size): this rank's slices of them.
      std::vector<NamedTensor> slices;
      for (const NamedTensor& p : params)
        slices.push_back({p.name, checkpoint.contains(p.name)
                                      ? tp->slice(p.name, checkpoint.tensor(p.name))
                                      : engine::Tensor()});
      copy_slices_into(slices, params, checkpoint.path());
      trainable.optimizer->restore_state(tp->local_state(
          checkpoint.optimizer_state(), trainable.optimizer->state(), tp_parameters));
    } else {
      checkpoint.load_into(params);
    }
    if (zero) {
      zero->restore_full_state(checkpoint.optimizer_state());
    } else if (!tp) {  // tensor parallelism restored its slices of the state above
      trainable.optimizer->restore_state(checkpoint.optimizer_state());
    }
    summary.last_checkpoint = checkpoint.path();
    if (checkpoint.config_text() != config_text)
      spdlog::warn("resuming {} with a config that differs from the checkpoint's (it was stored in its metadata)",
                   checkpoint.path().string());
    spdlog::info("resumed from {} at step {}", checkpoint.path().string(), start_step);
    if (par.writer()) elapsed_before = resume_metrics(o.run_dir / "metrics.jsonl", checkpoint);
  }
  {  // every rank starts from rank 0's values (identical replicas; slices stay each rank's own)
    std::vector<engine::Tensor> replicated = tp ? tp_replicated : trainable.parameter_tensors;
    par.broadcast_from_writer(replicated);
  }
  summary.start_step = start_step;
  summary.steps_done = start_step;

  const auto start = Clock::now();
  auto elapsed_seconds = [&] { return elapsed_before + seconds_since(start); };
  std::optional<run::MetricsLog> metrics;
  if (par.writer()) metrics.emplace(o.run_dir / "metrics.jsonl");
  std::ofstream samples_file;
  if (par.writer()) samples_file.open(o.run_dir / "samples.txt", std::ios::app);
  const int64_t tokens_per_step = o.batch_size * o.seq_len * o.grad_accum_steps;
  std::optional<run::ProgressBar> progress;
  if (request.show_progress && par.writer()) progress.emplace("train", o.max_steps);

  auto save = [&](int64_t step) {
    // ZeRO-1 gathers the sharded optimizer state, tensor parallelism the slices of parameters and
    // their state, on every rank (collectives) first: checkpoints hold full tensors.
    const std::vector<runtime::OptimizerHandle::StateTensor> state =
        zero ? zero->full_state()
        : tp ? tp->full_state(trainable.optimizer->state(), tp_parameters)
             : trainable.optimizer->state();
    std::vector<NamedTensor> tensors;
    for (const model::NamedParameter& p : trainable.parameters)
      tensors.push_back({p.name, tp ? tp->gather(p.name, p.tensor) : p.tensor});
    if (!par.writer()) return;
    for (const auto& s : state) tensors.push_back({kOptimizerPrefix + s.name, s.tensor});
    metadata[kMetaTokensSeen] = std::to_string(step * tokens_per_step);
    metadata[kMetaElapsedSeconds] = nlohmann::json(elapsed_seconds()).dump();
    metadata[kMetaRng] =
        nlohmann::json{{"batch_seed", o.seed},
                       {"batch_rule", mixture ? mixture->rule() : sampler.rule()},
                       {"objective_rule", objective->batch_rule()},
                       {"dropout", o.dropout ? "replayed from step 0 on resume" : "off"}}
            .dump();
    summary.last_checkpoint = save_checkpoint(o.run_dir, step, tensors, metadata);
    spdlog::info("checkpoint {}", summary.last_checkpoint.string());
    if (o.keep_checkpoints > 0)
      for (const std::filesystem::path& old_file :
           prune_step_checkpoints(summary.last_checkpoint.parent_path(), o.keep_checkpoints))
        spdlog::debug("train.keep_checkpoints: deleted {}", old_file.string());
  };
  auto run_eval = [&](int64_t step) {
    // Replicas hold the same parameters: rank 0 evaluates for all. Tensor parallelism: every rank
    // runs the split forward (its collectives need them all); rank 0 writes.
    if (!par.writer() && !tensor_parallel) return;
    EvalSettings settings{o.eval_batches, o.batch_size, o.seq_len, &target_bytes};
    nlohmann::json per_source = nlohmann::json::object();
    const ObjectiveEvaluation evaluation = mixture ? evaluate_mixture(*objective, model, data, settings, per_source)
                                                   : objective->evaluate(model, validation, settings);
    const EvalResult& r = evaluation.eval;
    nlohmann::json record = {{"step", step}, {"val_loss", r.loss}, {"val_ppl", r.perplexity},
                             {"val_bpb", r.bits_per_byte}, {"val_tokens", r.tokens}, {"val_bytes", r.bytes}};
    record.update(per_source);  // val_loss.<source>, val_bpb.<source>, ... (mixtures)
    record.update(evaluation.extra);  // the objective's own fields (mlm: val_accuracy, objective)
    if (!evaluation.summary.empty()) spdlog::info("step {}: {}", step, evaluation.summary);
    r.layer_stats.write_to(record, "val_");
    if (tasks.due(step, step == o.max_steps)) {
      const TaskEvaluation scored = tasks.evaluate(model, task_codec);
      record.update(scored.fields);  // task.<task>.<metric>[_stderr], task.<task>.items
      spdlog::info("step {}: tasks: {}", step, scored.summary);
    }
    if (metrics) metrics->append(record);
    spdlog::info("step {}: val loss {:.4f}, ppl {:.3f}, {:.4f} bits/byte", step, r.loss, r.perplexity,
                 r.bits_per_byte);
    summary.last_eval = r;
  };
  auto run_sample = [&](int64_t step) {
    // A bidirectional model does not continue text. Tensor parallelism: every rank decodes (the
    // same seed and the same summed logits give the same tokens), rank 0 writes.
    if (o.sample_tokens <= 0 || !objective->makes_samples() || (!par.writer() && !tensor_parallel))
      return;
    SampleSettings settings{o.sample_prompt, o.sample_tokens, o.sample_temperature, o.seed + static_cast<uint64_t>(step)};
    summary.last_sample = sample_text(model, data.tokenizer, settings);
    if (!par.writer()) return;
    samples_file << "--- step " << step << " ---\n" << summary.last_sample << "\n";
    samples_file.flush();
    if (request.print_samples && par.writer())
      std::cout << "--- sample at step " << step << " ---\n" << summary.last_sample << "\n";
  };

  if (request.checkpoint_at_start && start_step == 0) save(0);  // before any step's timing
  auto window_start = Clock::now();
  int64_t window_tokens = 0;
  PendingStepValues pending_values;  // device runs: the steps since the last read
  double train_seconds = 0;  // inside training steps only (no eval, checkpoint, sample)
  for (int64_t step = start_step; step < o.max_steps; ++step) {
    if (request.before_step) request.before_step(step, trainable.parameters);
    const auto step_start = Clock::now();
    StepResult r =
        train_step(trainable, o, step, [&](int64_t micro) {
          Batch batch = micro_batch_at(step, micro);
          if (request.on_batch) request.on_batch(step, micro, batch);
          return rank_batch(std::move(batch));
        });
    train_seconds += seconds_since(step_start);
    window_tokens += tokens_per_step;
    const int64_t done = step + 1;
    const bool last = done == o.max_steps;
    // A device step's values are read only where they are printed or decided on
    // (train/device_step.hpp): logging, evaluation, sampling and checkpoint steps, the last.
    int64_t unread_from = -1;
    if (r.values_pending) {
      pending_values.add(r, step);
      const bool read_now = done % o.log_every == 0 || last ||
                            (o.eval_every > 0 && done % o.eval_every == 0) ||
                            (o.sample_every > 0 && done % o.sample_every == 0) ||
                            (o.checkpoint_every > 0 && done % o.checkpoint_every == 0);
      if (read_now) {
        unread_from = pending_values.first_step();
        pending_values.read_into(r);
      }
    }
    if (!r.finite || done % o.log_every == 0 || last) {
      const double window_seconds = seconds_since(window_start);
      const double tokens_per_second = window_seconds > 0 ? static_cast<double>(window_tokens) / window_seconds : 0;
      nlohmann::json record = {{"step", done},
                      {"loss", r.loss},
                      {"aux_loss", r.aux_loss},
                      {"lr", r.lr},
                      {"grad_norm", r.grad_norm},
                      {"tokens_per_second", tokens_per_second},
                      {"elapsed_seconds", elapsed_seconds()},
                      {"train_seconds", train_seconds},
                      {"tokens", done * tokens_per_step},  // tokens seen
                      {"peak_memory_bytes", engine::memory_stats(engine::cpu()).peak_bytes}};
      if (const std::optional<double> epoch = sampler.epochs_after(done); epoch && !mixture) record["epoch"] = *epoch;
      for (size_t i = 0; mixture && i < data.mixture.size(); ++i) {
        record["samples." + data.mixture[i].name] = mixture->samples_after(i, done);
        record["epoch." + data.mixture[i].name] = mixture->epochs_after(i, done);
      }
      r.layer_stats.write_to(record);
      // Data parallel: seconds spent waiting for gradient all-reduces after backward, summed
      // since the start (communication not hidden behind backward; `patchbay bench parallel`).
      if (reducer) record["comm_unhidden_seconds"] = reducer->unhidden_seconds();
      if (metrics) metrics->append(record);
      if (const std::string moe = r.layer_stats.summary(); !moe.empty()) spdlog::info("step {}: {}", done, moe);
      window_start = Clock::now();
      window_tokens = 0;
      if (progress) {
        char suffix[160];
        std::snprintf(suffix, sizeof suffix, "loss %.4f | lr %.2e | %.0f tok/s", r.loss, r.lr, tokens_per_second);
        progress->update(done, suffix);
      }
    }
    if (!r.finite) {
      summary.numeric_failure = true;
      summary.failure_message = numeric_failure_message(
          step, r, o, intact_or_newest_intact(summary.last_checkpoint), unread_from);
      summary.last_loss = r.loss;
      if (progress) progress->finish("stopped: non-finite values");
      spdlog::error("{}", summary.failure_message);
      return summary;
    }
    if (!r.values_pending) summary.last_loss = r.loss;
    summary.steps_done = done;
    if ((o.eval_every > 0 && done % o.eval_every == 0) || last) run_eval(done);
    if ((o.sample_every > 0 && done % o.sample_every == 0 && !last)) run_sample(done);
    if ((o.checkpoint_every > 0 && done % o.checkpoint_every == 0) || last) save(done);
  }
  summary.seconds = seconds_since(start);
  const int64_t steps_run = summary.steps_done - start_step;
  summary.tokens_per_second =
      summary.seconds > 0 ? static_cast<double>(steps_run * tokens_per_step) / summary.seconds : 0;
  if (progress) progress->finish();
  if (steps_run > 0 || start_step == o.max_steps) run_sample(summary.steps_done);
  return summary;
}

}  // namespace

TrainSummary train_model(const config::ResolvedConfig& config, runtime::Registry& registry,
                         const config::ComponentSchemaLookup& lookup, const TrainRequest& request) {
  const std::unique_ptr<parallel::ParallelRun> par =
      parallel::ParallelRun::from_config(config, registry, make_training_schema(), lookup);
  if (!par->distributed()) return train_model_in(config, registry, lookup, request, *par);
  try {
    return train_model_in(config, registry, lookup, request, *par);
  } catch (const std::exception& e) {
    // One rank failing must end every rank: the others may be waiting in a collective.
    par->fail(1, e.what());
    throw;
  }
}

}  // namespace patchbay::train
