// `patchbay logits CHECKPOINT (--ids 1,2,3 | --text TEXT) --out FILE.safetensors`: the model's
// logits [T, V] (f32) on one sequence, with the ids [T] (i32), in a safetensors file. For
// comparing with another implementation (scripts/hf_check/ compares with transformers).
#include <boost/program_options.hpp>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/component_lookup.hpp"
#include "cli/int_list.hpp"
#include "common/error.hpp"
#include "config/config_loader.hpp"
#include "data/tokenizer_io.hpp"
#include "engine/autograd.hpp"
#include "model/language_model.hpp"
#include "run/safetensors.hpp"
#include "train/checkpoint.hpp"
#include "train/train_config.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  for (const int64_t id : parse_int_list(text, "--ids", 0, INT32_MAX))
    ids.push_back(static_cast<int32_t>(id));
  return ids;
}

int run_logits(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string checkpoint_path, ids_text, text, out;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("checkpoint", po::value(&checkpoint_path),
                                               "checkpoint or run directory")(
      "ids", po::value(&ids_text), "comma-separated token ids")(
      "text", po::value(&text), "text, encoded with the run's tokenizer")(
      "out", po::value(&out), "safetensors file to write (logits [T, V] f32, ids [T] i32)");
  po::positional_options_description positional;
  positional.add("checkpoint", 1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), values);
  po::notify(values);
  if (values.count("help") != 0 || checkpoint_path.empty() || out.empty() ||
      (ids_text.empty() == text.empty())) {
    std::cout << "Usage: patchbay logits CHECKPOINT (--ids 1,2,3 | --text TEXT) --out "
                 "FILE.safetensors\n\n"
                 "Writes the model's logits on one sequence (no sampling), to compare "
                 "implementations.\n\n"
              << options;
    return values.count("help") != 0 ? kExitOk : kExitUsage;
  }
  const train::Checkpoint checkpoint = train::load_checkpoint(checkpoint_path);
  config::ResolvedConfig config = config::load_config_text(
      checkpoint.config_text(), checkpoint.path().string() + " (stored config)");
  const ComponentLookup components =
      make_component_lookup(global, config, recorded_plugins(checkpoint));
  if (!components.registry) throw Error(ErrorKind::kInternal, components.unavailable_reason);
  train::validate_training_config(config, components.lookup);
  const int64_t vocab = checkpoint.tensor("wte.weight").size(0);
  std::vector<int32_t> ids = parse_ids(ids_text);
  if (!text.empty()) {
    fs::path tokenizer_file = checkpoint.meta(train::kMetaTokenizerFile);
    if (!fs::exists(tokenizer_file))
      tokenizer_file = checkpoint.path().parent_path().parent_path() / "tokenizer.txt";
    data::TokenizerSettings settings;
    settings.kind = train::config_string(config, "tokenizer.kind");
    ids = data::load_tokenizer(*components.registry, tokenizer_file, settings).encode(text);
  }
  if (ids.empty()) throw Error(ErrorKind::kInvalidArgument, "no token ids to run the model on");
  auto lm = model::LanguageModel::build(model::model_options_from_config(config, vocab),
                                        model::component_tables_from_config(config),
                                        *components.registry);
  std::vector<train::NamedTensor> params;
  for (const model::NamedParameter& p : lm->parameters()) params.push_back({p.name, p.tensor});
  checkpoint.load_into(params);
  engine::NoGradGuard no_grad;
  const auto t = static_cast<int64_t>(ids.size());
  const engine::Tensor logits =
      lm->forward(engine::Tensor::from_data(ids.data(), {1, t}, engine::DType::kI32), false)
          .logits.contiguous();
  run::write_safetensors(
      out,
      {{"logits",
        run::StoredDType::kF32,
        {t, vocab},
        std::as_bytes(
            std::span<const float>(logits.data<float>(), static_cast<size_t>(logits.numel())))},
       {"ids", run::StoredDType::kI32, {t}, std::as_bytes(std::span<const int32_t>(ids))}},
      {{"checkpoint", checkpoint.path().string()}});
  std::cout << "logits [" << t << ", " << vocab << "] -> " << out << "\n";
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"logits",
                           "Write a checkpoint's logits on given ids or text (for comparisons)",
                           run_logits});

}  // namespace patchbay::cli
