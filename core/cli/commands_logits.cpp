// `patchbay logits CHECKPOINT (--ids 1,2,3 | --text TEXT) --out FILE.safetensors`: the model's
// logits [T, V] (f32) on one sequence, with the ids [T] (i32), in a safetensors file. For
// comparing with another implementation (scripts/hf_check/ compares with transformers).
// An encoder-decoder run also takes the encoder's input (--source-ids | --source TEXT); the
// ids / text are then the decoder inputs as given (start token included), and the file also
// holds source_ids [S] (scripts/seq2seq/check_t5_export.py compares with transformers' T5).
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
#include "model/encoder_decoder.hpp"
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

// Ids from a comma-separated list, or from text encoded with the run's tokenizer; empty when
// neither is given.
std::vector<int32_t> parse_ids_or_text(const std::string& ids_text, const std::string& text,
                                       const train::Checkpoint& checkpoint,
                                       const config::ResolvedConfig& config,
                                       runtime::Registry& registry) {
  if (!ids_text.empty() && !text.empty())
    throw Error(ErrorKind::kInvalidArgument, "logits: give a source as ids or as text, not both");
  if (text.empty()) return ids_text.empty() ? std::vector<int32_t>() : parse_ids(ids_text);
  fs::path tokenizer_file = checkpoint.meta(train::kMetaTokenizerFile);
  if (!fs::exists(tokenizer_file))
    tokenizer_file = checkpoint.path().parent_path().parent_path() / "tokenizer.txt";
  data::TokenizerSettings settings;
  settings.kind = train::config_string(config, "tokenizer.kind");
  return data::load_tokenizer(registry, tokenizer_file, settings).encode(text);
}

// The encoder-decoder's logits [T, V] on decoder inputs `ids` given the source.
int write_seq2seq_logits(const train::Checkpoint& checkpoint, const config::ResolvedConfig& config,
                         const ComponentLookup& components, const std::vector<int32_t>& source,
                         const std::vector<int32_t>& ids, const std::string& out) {
  const int64_t vocab =
      (checkpoint.contains("shared.weight") ? checkpoint.tensor("shared.weight")
                                            : checkpoint.tensor("encoder.embed.weight"))
          .size(0);
  auto lm = model::LanguageModel::build_encoder_decoder(
      model::encoder_decoder_options_from_config(config, vocab),
      model::component_tables_from_config(config), *components.registry);
  std::vector<train::NamedTensor> params;
  for (const model::NamedParameter& p : lm->parameters()) params.push_back({p.name, p.tensor});
  checkpoint.load_into(params);
  engine::NoGradGuard no_grad;
  const auto s = static_cast<int64_t>(source.size()), t = static_cast<int64_t>(ids.size());
  model::Seq2SeqInputs inputs;
  inputs.source = engine::Tensor::from_data(source.data(), {1, s}, engine::DType::kI32);
  inputs.target_inputs = engine::Tensor::from_data(ids.data(), {1, t}, engine::DType::kI32);
  const engine::Tensor logits = lm->encoder_decoder()->forward(inputs, false).logits.contiguous();
  run::write_safetensors(
      out,
      {{"logits",
        run::StoredDType::kF32,
        {t, vocab},
        std::as_bytes(
            std::span<const float>(logits.data<float>(), static_cast<size_t>(logits.numel())))},
       {"ids", run::StoredDType::kI32, {t}, std::as_bytes(std::span<const int32_t>(ids))},
       {"source_ids",
        run::StoredDType::kI32,
        {s},
        std::as_bytes(std::span<const int32_t>(source))}},
      {{"checkpoint", checkpoint.path().string()}});
  std::cout << "logits [" << t << ", " << vocab << "] (source " << s << " ids) -> " << out << "\n";
  return kExitOk;
}

int run_logits(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string checkpoint_path, ids_text, text, out, source_ids_text, source_text;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("checkpoint", po::value(&checkpoint_path),
                                               "checkpoint or run directory")(
      "ids", po::value(&ids_text), "comma-separated token ids")(
      "text", po::value(&text), "text, encoded with the run's tokenizer")(
      "out", po::value(&out), "safetensors file to write (logits [T, V] f32, ids [T] i32)")(
      "source-ids", po::value(&source_ids_text),
      "encoder-decoder runs: the source's comma-separated ids (then --ids / --text are the "
      "decoder inputs, start token included)")("source", po::value(&source_text),
                                               "encoder-decoder runs: the source as text");
  po::positional_options_description positional;
  positional.add("checkpoint", 1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), values);
  po::notify(values);
  if (values.count("help") != 0 || checkpoint_path.empty() || out.empty() ||
      (ids_text.empty() == text.empty())) {
    std::cout << "Usage: patchbay logits CHECKPOINT (--ids 1,2,3 | --text TEXT) --out "
                 "FILE.safetensors\n"
                 "       patchbay logits SEQ2SEQ_RUN (--source-ids 1,2 | --source TEXT) (--ids "
                 "0,5,6 | --text TEXT) --out FILE\n\n"
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
  std::vector<int32_t> ids = parse_ids(ids_text);
  std::vector<int32_t> source_ids =
      parse_ids_or_text(source_ids_text, source_text, checkpoint, config, *components.registry);
  if (!text.empty()) ids = parse_ids_or_text("", text, checkpoint, config, *components.registry);
  if (ids.empty()) throw Error(ErrorKind::kInvalidArgument, "no token ids to run the model on");
  const bool encoder_decoder = model::model_architecture(config) == "encoder_decoder";
  if (encoder_decoder != !source_ids.empty())
    throw Error(ErrorKind::kInvalidArgument,
                encoder_decoder
                    ? "logits: " + checkpoint.path().string() +
                          " holds an encoder-decoder; give its source with --source-ids or "
                          "--source (--ids / --text are the decoder inputs)"
                    : "logits: --source-ids / --source are for encoder-decoder runs; " +
                          checkpoint.path().string() + " holds a single-stack model");
  if (encoder_decoder)
    return write_seq2seq_logits(checkpoint, config, components, source_ids, ids, out);
  const int64_t vocab = checkpoint.tensor("wte.weight").size(0);
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
