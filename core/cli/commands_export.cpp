// `patchbay export RUN --format hf OUT/`: a run's checkpoint as a Hugging Face transformers
// model directory (core/interop/hf_io.hpp). GPT-2- and LLaMA-shaped models map; anything else
// is refused naming the component without a counterpart (exit code 1: the work failed).
// `patchbay export RUN --merge-lora OUT/`: a LoRA run (docs/finetuning.md) as a plain run with
// the adapters merged into the weights (core/train/lora_merge.hpp).
#include <boost/program_options.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/component_lookup.hpp"
#include "common/error.hpp"
#include "config/config_loader.hpp"
#include "interop/hf_io.hpp"
#include "interop/init_weights.hpp"
#include "train/checkpoint.hpp"
#include "train/lora_merge.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;

int run_merge_lora(const std::string& run, const std::string& out, const GlobalOptions& global) {
  const train::Checkpoint checkpoint = train::load_checkpoint(run);
  const config::ResolvedConfig config =
      config::load_config_text(checkpoint.config_text(), checkpoint.path().string() + " (config)");
  const ComponentLookup components =
      make_component_lookup(global, config, recorded_plugins(checkpoint));
  if (!components.registry) throw Error(ErrorKind::kInternal, components.unavailable_reason);
  const train::LoraMergeResult r =
      train::merge_lora_run(checkpoint.path(), out, *components.registry, components.lookup,
                            interop::read_initial_weights);
  std::cout << "merged " << r.adapters << " LoRA adapters (step " << r.step << ") into "
            << r.checkpoint.string() << "\n";
  return kExitOk;
}

int run_export(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string run, out, format;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("run", po::value(&run),
                                               "run directory or checkpoint file")(
      "out", po::value(&out), "output directory")("format", po::value(&format),
                                                  "hf (Hugging Face transformers)")(
      "merge-lora", "a LoRA run as a plain run with the adapters merged into the weights");
  po::positional_options_description positional;
  positional.add("run", 1).add("out", 1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), values);
  po::notify(values);
  if (values.count("help") != 0 || run.empty() || out.empty()) {
    std::cout << "Usage: patchbay export RUN --format hf OUT/\n"
                 "       patchbay export RUN --merge-lora OUT/   (docs/finetuning.md)\n\n"
                 "Writes the run's latest checkpoint (or the given .safetensors) as a transformers "
                 "model:\n"
                 "config.json, model.safetensors (f32, transformers' names and layouts), "
                 "generation_config.json,\n"
                 "tokenizer.json (+ tokenizer_config.json, special_tokens_map.json) and "
                 "patchbay_export.json.\n"
                 "GPT-2 shape (LayerNorm, learned positions, gelu/relu mlp) -> GPT2LMHeadModel; "
                 "LLaMA shape\n"
                 "(RMSNorm, rotary, swiglu) -> LlamaForCausalLM; an encoder-decoder\n"
                 "(model.architecture = \"encoder_decoder\") -> T5ForConditionalGeneration "
                 "(docs/encoder_decoder.md).\nSee docs/interop.md.\n\n"
              << options;
    return values.count("help") != 0 ? kExitOk : kExitUsage;
  }
  if (values.count("merge-lora") != 0) {
    if (!format.empty())
      throw Error(
          ErrorKind::kInvalidArgument,
          "--merge-lora writes a Patchbay run; export that run with --format hf afterwards");
    return run_merge_lora(run, out, global);
  }
  if (format != "hf")
    throw Error(ErrorKind::kInvalidArgument,
                "--format must be hf (the only format so far), found '" + format + "'");
  interop::HfExportResult r;
  try {
    r = interop::export_to_hf(run, out);
  } catch (const Error& e) {
    // A model or tokenizer without a transformers counterpart: the command line was right,
    // the work cannot be done (exit 1, not 2). Missing files keep their own code (5).
    if (e.kind() != ErrorKind::kInvalidArgument) throw;
    std::cerr << "error: " << e.what() << "\n";
    return kExitFailure;
  }
  std::cout << "exported " << r.checkpoint.string() << " (step " << r.step << ") as "
            << interop::hf_architecture(r.shape.family) << "\n";
  for (const auto& file : r.files) std::cout << "  " << file.string() << "\n";
  std::cout << "tokenizer.json "
            << (r.tokenizer_exact ? "reproduces Patchbay's ids" : "does NOT reproduce every id")
            << "\n";
  for (const std::string& note : r.notes) std::cout << "note: " << note << "\n";
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"export",
                           "Export a run as a Hugging Face transformers model (--format hf)",
                           run_export});

}  // namespace patchbay::cli
