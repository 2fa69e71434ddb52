// `patchbay import HF_DIR RUN/`: a Hugging Face transformers directory (GPT-2 or LLaMA shape,
// a tokenizer that maps onto a Patchbay tokenizer) as a run with a step-0 checkpoint that
// eval, generate and `train --resume RUN` accept (core/interop/hf_io.hpp); `patchbay import
// FILE.gguf RUN/`: the same from a llama.cpp GGUF file (core/interop/gguf_import.hpp).
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/component_lookup.hpp"
#include "common/error.hpp"
#include "config/config_document.hpp"
#include "interop/gguf_import.hpp"
#include "interop/hf_io.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;

int run_import(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string hf_dir, run, tokenizer;
  std::vector<std::string> overrides;
  bool overwrite = false;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")(
      "hf-dir", po::value(&hf_dir), "transformers model directory")("run", po::value(&run),
                                                                    "run directory to create")(
      "set", po::value(&overrides)->composing(),
      "override a key of the new run's config (repeatable)")(
      "tokenizer", po::value(&tokenizer),
      "a Patchbay tokenizer file to use instead of the directory's")(
      "overwrite", po::bool_switch(&overwrite), "replace a run already in RUN");
  po::positional_options_description positional;
  positional.add("hf-dir", 1).add("run", 1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), values);
  po::notify(values);
  if (values.count("help") != 0 || hf_dir.empty() || run.empty()) {
    std::cout
        << "Usage: patchbay import HF_DIR RUN/ [--set key=value ...] [--tokenizer FILE]\n"
           "       patchbay import FILE.gguf RUN/ [--set key=value ...]\n\n"
           "Turns a transformers GPT2LMHeadModel, LlamaForCausalLM or T5ForConditionalGeneration\n"
           "directory (config.json,\n"
           "model.safetensors, tokenizer.json in Patchbay's char or native BPE layout) into a "
           "run:\n"
           "config.toml, tokenizer.txt and checkpoints/step_0.safetensors. Then: patchbay eval "
           "RUN,\n"
           "patchbay generate RUN, patchbay train --resume RUN --set train.max_steps=N "
           "(fine-tuning;\n"
           "[data] and [train] take their defaults unless set here). See docs/interop.md.\n"
           "A .gguf file (llama.cpp, LLaMA architecture; F32/F16/BF16/Q8_0/Q4_0/Q4_1 tensors\n"
           "dequantised to f32, its tokenizer and chat template) imports the same way; see\n"
           "docs/gguf_import.md.\n\n"
        << options;
    return values.count("help") != 0 ? kExitOk : kExitUsage;
  }
  const ComponentLookup components = make_component_lookup(global, config::ResolvedConfig{}, {});
  if (!components.registry) throw Error(ErrorKind::kInternal, components.unavailable_reason);
  interop::HfImportOptions import_options;
  import_options.overrides = overrides;
  import_options.tokenizer = tokenizer;
  import_options.overwrite = overwrite;
  const bool gguf = std::filesystem::is_regular_file(hf_dir);
  const interop::HfImportResult r =
      gguf ? interop::import_from_gguf(hf_dir, run, *components.registry, components.lookup,
                                       import_options)
           : interop::import_from_hf(hf_dir, run, *components.registry, components.lookup,
                                     import_options);
  std::cout << "imported " << hf_dir << " ("
            << (gguf ? std::string("GGUF llama") : interop::hf_architecture(r.shape.family))
            << (interop::kv_heads_of(r.shape) != r.shape.options.n_heads
                    ? ", " + std::to_string(r.shape.options.n_heads) + " query heads sharing " +
                          std::to_string(interop::kv_heads_of(r.shape)) + " key/value heads"
                    : std::string())
            << ", " << r.parameters << " parameters, tokenizer '" << r.tokenizer_kind << "' from "
            << r.tokenizer_source << ")\nrun: " << r.run_dir.string()
            << "\ncheckpoint: " << r.checkpoint.string() << "\n";
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"import", "Import a Hugging Face transformers model as a run",
                           run_import});

}  // namespace patchbay::cli
