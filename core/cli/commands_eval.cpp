// `patchbay eval CHECKPOINT [--split val|train] [--batches N] [--batch-size B]`: validation
// loss, perplexity and bits per byte of a checkpoint, on the data its stored config names
// (for a masked-LM run: of the masked tokens, with their accuracy).
// With --tasks: downstream tasks scored as lm-evaluation-harness scores them (eval_tasks.hpp).
#include <boost/program_options.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/component_lookup.hpp"
#include "cli/device_option.hpp"
#include "cli/eval_seq2seq.hpp"
#include "cli/eval_tasks.hpp"
#include "config/config_loader.hpp"
#include "model/encoder_decoder.hpp"
#include "train/checkpoint.hpp"
#include "train/evaluator.hpp"
#include "train/objective.hpp"
#include "train/train_config.hpp"
#include "train/training_data.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;

int run_eval(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string checkpoint_path, split, device;
  int64_t batches = 0, batch_size = 0;
  EvalTasksArgs tasks;
  int64_t num_fewshot = -1, limit = -1;
  bool no_context_cache = false;
  Seq2SeqTestArgs test;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("checkpoint", po::value(&checkpoint_path),
                                               "checkpoint or run directory")(
      "split", po::value(&split), "val (default: [eval] split) or train")(
      "batches", po::value(&batches),
      "batches to evaluate (default: [eval] batches, else train.eval_batches)")(
      "batch-size", po::value(&batch_size),
      "sequences per batch (default: [eval] batch_size, else train.batch_size; with --tasks: 32 "
      "requests)")("tasks", po::value(&tasks.tasks),
                   "NAME|FILE[,...]: lm-eval style tasks (configs/tasks/NAME.yaml or a YAML file)")(
      "num-fewshot", po::value(&num_fewshot),
      "with --tasks: few-shot examples per prompt (default: the task's)")(
      "limit", po::value(&limit), "with --tasks: the first N docs of each task")(
      "log-samples", po::value(&tasks.log_samples),
      "with --tasks: per-item prompts, choices, log-likelihoods (JSON Lines)")(
      "fewshot-seed", po::value(&tasks.fewshot_seed),
      "with --tasks: few-shot sampling seed (default 1234, as lm-eval)")(
      "output", po::value(&tasks.output),
      "with --tasks: results JSON (default RUN/eval_tasks.json)")(
      "no-context-cache", po::bool_switch(&no_context_cache),
      "with --tasks: forward every request whole instead of prefilling a shared context once "
      "and forking its decoding state per choice")(
      "compare-context-cache", po::bool_switch(&tasks.compare_context_cache),
      "with --tasks: score each task both ways in this run; print both times, tokens forwarded "
      "and the largest log-likelihood difference")(
      "test", po::value(&test.test_file),
      "encoder-decoder runs: JSON Lines {\"source\", \"target\"}: loss, BLEU and chrF of the "
      "decodes and of the copy-the-source baseline (docs/encoder_decoder.md)")(
      "num-beams", po::value(&test.num_beams),
      "with --test: 1 = greedy decoding (default), N > 1 = beam search with N beams")(
      "length-penalty", po::value(&test.length_penalty), "with --test and beams: default 1")(
      "max-new-tokens", po::value(&test.max_new_tokens),
      "with --test: tokens per decode (default model.context_length)")(
      "outputs", po::value(&test.outputs), "with --test: write the decodes, one per line")(
      "samples", po::value(&test.samples),
      "with --test: source/reference/output triples printed (default 3)");
  add_device_option(options, device);
  po::positional_options_description positional;
  positional.add("checkpoint", 1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), values);
  po::notify(values);  // fills the bound variables (no option is required)
  if (values.count("help") != 0 || checkpoint_path.empty()) {
    std::cout
        << "Usage: patchbay eval CHECKPOINT [--split val|train] [--batches N] [--batch-size B]\n"
           "       patchbay eval CHECKPOINT --tasks NAME|FILE[,...] [--num-fewshot N] [--limit N]\n"
           "                     [--log-samples FILE] [--batch-size B]\n"
           "       patchbay eval CHECKPOINT --test PAIRS.jsonl [--num-beams N] [--limit N] "
           "[--outputs FILE]   (encoder-decoder runs)\n\n"
           "Evaluates a checkpoint (a .safetensors file or a run directory: its latest) on fixed,\n"
           "evenly spaced windows of the split: loss (nats/token), perplexity, bits per byte.\n"
           "With --tasks: multiple-choice, cloze, perplexity and generation tasks scored as\n"
           "lm-evaluation-harness scores them (acc and acc_norm both reported; "
           "docs/evaluation.md).\n\n"
        << options;
    return checkpoint_path.empty() && values.count("help") == 0 ? kExitUsage : kExitOk;
  }
  if (values.count("tasks") != 0) {
    if (!device.empty() && device != "cpu")
      throw Error(ErrorKind::kInvalidArgument,
                  "--device " + device +
                      " with --tasks: task evaluation runs on the CPU in this "
                      "build; drop --device (or pass --device cpu)");
    tasks.checkpoint = checkpoint_path;
    if (num_fewshot >= 0) tasks.num_fewshot = num_fewshot;
    if (limit >= 0) tasks.limit = limit;
    if (batch_size > 0) tasks.batch_size = batch_size;
    tasks.share_contexts = !no_context_cache;
    return run_eval_tasks(tasks, global);
  }
  for (const char* test_only :
       {"num-beams", "length-penalty", "max-new-tokens", "outputs", "samples"})
    if (values.count(test_only) != 0 && values.count("test") == 0)
      throw Error(ErrorKind::kInvalidArgument,
                  std::string("--") + test_only + " applies to a test set: add --test FILE");
  const bool with_test = values.count("test") != 0;
  if (with_test && limit >= 0) test.limit = limit;
  for (const char* task_only : {"num-fewshot", "log-samples", "fewshot-seed", "output"})
    if (values.count(task_only) != 0)
      throw Error(ErrorKind::kInvalidArgument,
                  std::string("--") + task_only + " applies to task evaluation: add --tasks");
  if (values.count("limit") != 0 && !with_test)
    throw Error(ErrorKind::kInvalidArgument,
                "--limit applies to task evaluation or a test set: add --tasks or --test");
  for (const char* task_only : {"no-context-cache", "compare-context-cache"})
    if (values.count(task_only) != 0 && !values[task_only].defaulted())
      throw Error(ErrorKind::kInvalidArgument,
                  std::string("--") + task_only + " applies to task evaluation: add --tasks");
  const train::Checkpoint checkpoint = train::load_checkpoint(checkpoint_path);
  config::ResolvedConfig config = config::load_config_text(
      checkpoint.config_text(), checkpoint.path().string() + " (stored config)");
  (void)apply_device_option(config, device);
  const ComponentLookup components =
      make_component_lookup(global, config, recorded_plugins(checkpoint));
  if (!components.registry) throw Error(ErrorKind::kInternal, components.unavailable_reason);
  train::validate_training_config(config, components.lookup);
  const train::TrainOptions o = train::train_options_from_config(config);
  if (split.empty()) split = train::config_string(config, "eval.split");
  if (split != "val" && split != "train")
    throw Error(ErrorKind::kInvalidArgument, "--split must be val or train");
  if (batches <= 0) batches = train::config_int(config, "eval.batches");
  if (batches <= 0) batches = o.eval_batches;
  if (batch_size <= 0) batch_size = train::config_int(config, "eval.batch_size");
  if (batch_size <= 0) batch_size = o.batch_size;

  train::TrainingData data =
      train::prepare_training_data(config, *components.registry, components.lookup);
  if (std::to_string(data.tokenizer_hash) != checkpoint.meta(train::kMetaTokenizerHash))
    throw Error(ErrorKind::kInvalidArgument,
                "the tokenizer prepared from the checkpoint's config (" +
                    data.tokenizer_file.string() + ") differs from the one the run used (" +
                    checkpoint.meta(train::kMetaTokenizerFile) + ")");
  // An encoder-decoder run is scored by its objective (span_corruption, seq2seq) the same way.
  auto model =
      model::model_architecture(config) == "encoder_decoder"
          ? model::LanguageModel::build_encoder_decoder(
                model::encoder_decoder_options_from_config(config, data.tokenizer.vocab_size()),
                model::component_tables_from_config(config), *components.registry)
          : model::LanguageModel::build(
                model::model_options_from_config(config, data.tokenizer.vocab_size()),
                model::component_tables_from_config(config), *components.registry);
  std::vector<train::NamedTensor> params;
  for (const model::NamedParameter& p : model->parameters()) params.push_back({p.name, p.tensor});
  checkpoint.load_into(params);
  if (with_test) {
    if (values.count("batch-size") != 0) test.batch_size = batch_size;
    std::cout << "checkpoint: " << checkpoint.path().string() << " (step " << checkpoint.step()
              << ")\n";
    return run_eval_seq2seq_test(*model, data.tokenizer, test);
  }

  const data::TokenSequence& tokens = split == "val" ? data.val : data.train;
  const train::TokenBytes target_bytes = train::token_bytes(data.tokenizer);
  train::EvalSettings settings{batches, batch_size, o.seq_len, &target_bytes};
  // The run's objective (objective.hpp) makes the validation batches from the split's fixed
  // windows and scores them, as the trainer's evaluation does (masked targets of fixed masks
  // for "mlm", every next token for "clm").
  const std::unique_ptr<train::TrainingObjective> objective =
      train::make_objective(config, o, data.tokenizer);
  const train::ObjectiveEvaluation evaluation = objective->evaluate(
      *model,
      [&](int64_t b) {
        return train::validation_windows(tokens, b, batches, batch_size, o.seq_len);
      },
      settings);
  const train::EvalResult& r = evaluation.eval;
  std::cout << "checkpoint: " << checkpoint.path().string() << " (step " << checkpoint.step()
            << ")\n"
            << "split: " << split << ", " << batches << " batches x " << batch_size << " x "
            << o.seq_len << " = " << r.tokens << " " << evaluation.target_unit
            << "s (train.objective = \"" << objective->name() << "\")\n";
  if (!evaluation.summary.empty()) std::cout << evaluation.summary << "\n";
  std::cout << "loss: " << r.loss << " nats per " << evaluation.target_unit << "\n"
            << "perplexity: " << r.perplexity << "\n"
            << "bits per byte: " << r.bits_per_byte << " (over the " << r.bytes
            << " bytes of the evaluated tokens)\n";
  if (!r.layer_stats.empty()) {  // feed-forward statistics (MoE), mean over the batches
    if (const std::string moe = r.layer_stats.summary(); !moe.empty()) std::cout << moe << "\n";
    for (const auto& [name, mean] : r.layer_stats.means()) {
      std::cout << name << ":";
      for (double v : mean) std::cout << " " << v;
      std::cout << "\n";
    }
  }
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"eval", "Evaluate a checkpoint: loss, perplexity, bits per byte",
                           run_eval});

}  // namespace patchbay::cli
