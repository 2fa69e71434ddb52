// [train], [optimizer] and [eval]: what `patchbay train`, `patchbay eval` and
// `patchbay bench train` read. The run's name, folder and seed stay in [run]; the optimizer's
// own coefficients (betas, eps, weight_decay, momentum) are the [optimizer] component's keys,
// so they are validated against the plugin's schema like [tokenizer]'s.
#include "config/host_schema.hpp"
#include "patchbay/component.hpp"

namespace patchbay::config {

namespace {

constexpr double kMaxInt = 9007199254740992.0;  // 2^53: exact in a double

HostSection train_section() {
  HostSection section;
  section.path = "train";
  section.summary = "training loop: batch shape, steps, learning-rate schedule, clipping, cadences";
  section.fields = {
      Field::integer("batch_size", "8", "sequences per micro-batch").range(1, 1 << 20),
      Field::integer("seq_len", "128", "tokens per sequence (at most model.context_length)")
          .range(1, 1 << 20),
      Field::integer("grad_accum_steps", "1", "micro-batches summed into one optimizer update")
          .range(1, 1 << 16),
      Field::integer("max_steps", "1000", "optimizer updates of the whole run").range(1, kMaxInt),
      Field::real("lr", "0.001", "peak learning rate (reached at the end of warmup)")
          .range(0.0, 1e6),
      Field::real("min_lr", "0.0", "floor of the linear / cosine decay").range(0.0, 1e6),
      Field::integer("warmup_steps", "0", "updates of linear warmup from 0 to lr")
          .range(0, kMaxInt),
      Field::string("schedule", "\"cosine\"",
                    "learning-rate schedule after warmup (patchbay schedule CONFIG plots it)")
          .choices("cosine|linear|constant|inverse_sqrt|wsd"),
      Field::integer(
          "decay_steps", "0",
          "wsd: updates of the final decay (0: decay_fraction of the updates after warmup)")
          .range(0, kMaxInt),
      Field::real("decay_fraction", "0.2",
                  "wsd: fraction of the post-warmup updates spent decaying")
          .range(0.0, 1.0),
      Field::string("decay_shape", "\"1-sqrt\"", "wsd: shape of the decay tail")
          .choices("linear|cosine|1-sqrt"),
      Field::real("grad_clip", "1.0", "global gradient-norm limit (0: no clipping)")
          .range(0.0, 1e12),
      Field::integer("eval_every", "200", "updates between validation passes (0: only at the end)")
          .range(0, kMaxInt),
      Field::integer("eval_batches", "20",
                     "validation batches per evaluation (fixed, evenly spaced windows)")
          .range(1, kMaxInt),
      Field::integer("checkpoint_every", "500", "updates between checkpoints (0: only at the end)")
          .range(0, kMaxInt),
      Field::integer("keep_checkpoints", "0",
                     "step checkpoints kept in the run's checkpoints/ folder: the newest N, older "
                     "ones deleted after each save (0: keep all)")
          .range(0, kMaxInt),
      Field::integer("log_every", "10", "updates between metrics.jsonl records").range(1, kMaxInt),
      Field::integer("sample_every", "0", "updates between printed samples (0: only at the end)")
          .range(0, kMaxInt),
      Field::string("sample_prompt", "\"\"",
                    "text the samples continue (empty: start from the first token)"),
      Field::integer("sample_tokens", "200", "tokens per sample (0: no samples)").range(0, 1 << 20),
      Field::real("sample_temperature", "0.8", "softmax temperature of the samples (0: greedy)")
          .range(0.0, 100.0),
      Field::string("out_dir", "\"\"", "run directory (empty: <run.output_dir>/<run.name>)"),
      Field::string("device", "\"cpu\"",
                    "kept for old configs (only \"cpu\"); the device is run.device")
          .choices("cpu"),
      // The names are checked against core/train/objective.cpp's table (a new objective is a
      // new file there, not a new choice here).
      Field::string("objective", "\"clm\"",
                    "training objective (core/train/objective.cpp): clm: next-token prediction "
                    "(needs model.causal = true); mlm: BERT masked-token prediction (needs "
                    "model.causal = false; masking in [train.mlm])"),
      Field::string(
          "precision", "\"f32\"",
          "matmul precision: f32, or bf16 mixed precision (bf16 GEMMs with f32 accumulation; "
          "f32 master weights, optimizer state, reductions and checkpoints)")
          .choices("f32|bf16"),
      Field::string("init_from", "\"\"",
                    "weights to start from: a run, a checkpoint, a Hugging Face directory or a "
                    "GGUF file (weights only: step 0, fresh optimizer; docs/finetuning.md)"),
      Field::strings("freeze", "[]",
                     "name patterns of parameters that do not train (\"wte\", \"blocks.0-3.*\"; "
                     "docs/finetuning.md)"),
      Field::strings("lr_scale", "[]",
                     "per-parameter learning-rate factors \"PATTERN=FACTOR\" (patterns as freeze; "
                     "e.g. \"*relative_bias=10\"; docs/training.md)"),
  };
  return section;
}

HostSection optimizer_section() {
  HostSection section;
  section.path = "optimizer";
  section.summary = "the optimizer component and its settings (learning rate: [train] lr and schedule)";
  section.component_kind = PB_KIND_OPTIMIZER;
  // Not always_present: a config without [optimizer] gets `kind = "adamw"` from the trainer
  // before validation (train/train_config.hpp), so config tests need no optimizer plugin.
  section.fields = {
      Field::string("kind", nullptr, "optimizer component name, e.g. \"adamw\" or \"sgd\" (patchbay plugins list)")
          .required(),
  };
  return section;
}

HostSection eval_section() {
  HostSection section;
  section.path = "eval";
  section.summary =
      "evaluation by `patchbay eval` (training uses [train] eval_batches), and downstream tasks "
      "scored at training's evaluation steps (docs/evaluation.md)";
  section.fields = {
      Field::string("split", "\"val\"", "split evaluated").choices("val|train"),
      Field::integer("batches", "0", "batches evaluated (0: train.eval_batches)").range(0, kMaxInt),
      Field::integer("batch_size", "0", "sequences per batch (0: train.batch_size)").range(0, 1 << 20),
      // Checked by core/train/training_tasks.hpp (names resolve, files read, documents build)
      // when the config is checked, a sweep validates its jobs, and training starts.
      Field::strings("tasks", "[]",
                     "downstream tasks scored at each evaluation during training: shipped names "
                     "or YAML task files, \"name:N\" for N documents (metrics.jsonl task.<name>.*)"),
      Field::integer("task_limit", "0", "documents per task unless its entry says \":N\" (0: all)")
          .range(0, kMaxInt),
      Field::integer("task_every", "0",
                     "updates between task evaluations (0: at every evaluation; the last step "
                     "always)")
          .range(0, kMaxInt),
      Field::integer("task_num_fewshot", "-1", "few-shot examples per prompt (-1: each task file's)")
          .range(-1, 1 << 20),
      Field::integer("task_batch_size", "32", "request rows per forward when scoring tasks")
          .range(1, 1 << 20),
      Field::integer("task_fewshot_seed", "1234", "seed of the few-shot sampler (lm-eval's default)")
          .range(0, kMaxInt),
  };
  return section;
}

}  // namespace

void declare_train_sections(SchemaRegistry& schema) {
  schema.add_section(train_section());
  schema.add_section(optimizer_section());
  schema.add_section(eval_section());
  // Each objective's own section ([train.mlm]) is declared by its file in core/train
  // (objective.hpp: ObjectiveEntry::declare_options), through train::make_training_schema.
}

}  // namespace patchbay::config
