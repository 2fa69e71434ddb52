// `patchbay eval CHECKPOINT [--split val|train] [--batches N] [--batch-size B]`: validation
// loss, perplexity and bits per byte of a checkpoint, on the data its stored config names
// (for a masked-LM run: of the masked tokens, with their accuracy).
#include <boost/program_options.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/component_lookup.hpp"
#include "config/config_loader.hpp"
#include "train/checkpoint.hpp"
#include "train/evaluator.hpp"
#include "train/objective_mlm.hpp"
#include "train/train_config.hpp"
#include "train/training_data.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;

int run_eval(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string checkpoint_path, split;
  int64_t batches = 0, batch_size = 0;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("checkpoint", po::value(&checkpoint_path), "checkpoint or run directory")(
      "split", po::value(&split), "val (default: [eval] split) or train")(
      "batches", po::value(&batches), "batches to evaluate (default: [eval] batches, else train.eval_batches)")(
      "batch-size", po::value(&batch_size), "sequences per batch (default: [eval] batch_size, else train.batch_size)");
  po::positional_options_description positional;
  positional.add("checkpoint", 1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), values);
  po::notify(values);  // fills the bound variables (no option is required)
  if (values.count("help") != 0 || checkpoint_path.empty()) {
    std::cout << "Usage: patchbay eval CHECKPOINT [--split val|train] [--batches N] [--batch-size B]\n\n"
                 "Evaluates a checkpoint (a .safetensors file or a run directory: its latest) on fixed,\n"
                 "evenly spaced windows of the split: loss (nats/token), perplexity, bits per byte.\n\n"
              << options;
    return checkpoint_path.empty() && values.count("help") == 0 ? kExitUsage : kExitOk;
  }
  const train::Checkpoint checkpoint = train::load_checkpoint(checkpoint_path);
  config::ResolvedConfig config =
      config::load_config_text(checkpoint.config_text(), checkpoint.path().string() + " (stored config)");
  const ComponentLookup components = make_component_lookup(global, config, recorded_plugins(checkpoint));
  if (!components.registry) throw Error(ErrorKind::kInternal, components.unavailable_reason);
  train::validate_training_config(config, components.lookup);
  const train::TrainOptions o = train::train_options_from_config(config);
  if (split.empty()) split = train::config_string(config, "eval.split");
  if (split != "val" && split != "train") throw Error(ErrorKind::kInvalidArgument, "--split must be val or train");
  if (batches <= 0) batches = train::config_int(config, "eval.batches");
  if (batches <= 0) batches = o.eval_batches;
  if (batch_size <= 0) batch_size = train::config_int(config, "eval.batch_size");
  if (batch_size <= 0) batch_size = o.batch_size;

  train::TrainingData data = train::prepare_training_data(config, *components.registry, components.lookup);
  if (std::to_string(data.tokenizer_hash) != checkpoint.meta(train::kMetaTokenizerHash))
    throw Error(ErrorKind::kInvalidArgument, "the tokenizer prepared from the checkpoint's config (" +
                                                 data.tokenizer_file.string() +
                                                 ") differs from the one the run used (" +
                                                 checkpoint.meta(train::kMetaTokenizerFile) + ")");
  auto model = model::LanguageModel::build(model::model_options_from_config(config, data.tokenizer.vocab_size()),
                                           model::component_tables_from_config(config), *components.registry);
  std::vector<train::NamedTensor> params;
  for (const model::NamedParameter& p : model->parameters()) params.push_back({p.name, p.tensor});
  checkpoint.load_into(params);

  const data::TokenSequence& tokens = split == "val" ? data.val : data.train;
  const train::TokenBytes target_bytes = train::token_bytes(data.tokenizer);
  train::EvalSettings settings{batches, batch_size, o.seq_len, &target_bytes};
  // train.objective = "mlm": the masked targets of fixed masks (objective_mlm.hpp).
  const bool masked_lm = train::objective_from_config(config) == train::Objective::kMaskedLm;
  const train::MlmEvalResult masked =
      masked_lm ? train::evaluate_mlm(*model, tokens, settings, train::mlm_objective_from_config(config, data.tokenizer))
                : train::MlmEvalResult{};
  const train::EvalResult r = masked_lm ? masked.eval : train::evaluate(*model, tokens, settings);
  std::cout << "checkpoint: " << checkpoint.path().string() << " (step " << checkpoint.step() << ")\n"
            << "split: " << split << ", " << batches << " batches x " << batch_size << " x " << o.seq_len << " = "
            << r.tokens << (masked_lm ? " masked tokens (train.objective = \"mlm\")\n" : " tokens\n");
  if (masked_lm)
    std::cout << "masked-token accuracy: " << masked.accuracy << " (" << masked.correct << " of " << r.tokens
              << ")\n";
  std::cout << "loss: " << r.loss << (masked_lm ? " nats per masked token\n" : " nats/token\n")
            << "perplexity: " << r.perplexity << "\n"
            << "bits per byte: " << r.bits_per_byte << " (over the " << r.bytes << " bytes of the evaluated tokens)\n";
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

PATCHBAY_REGISTER_COMMAND({"eval", "Evaluate a checkpoint: loss, perplexity, bits per byte", run_eval});

}  // namespace patchbay::cli
