// `patchbay generate CHECKPOINT --prompt TEXT [...]`: text from a checkpoint with the KV
// cache and an explicit sampler chain, printed as it is generated.
//
// The chain is the default one (temperature 0.8 -> top_k 40 -> sample(seed)), or the
// [[generate.chain]] entries of --config FILE; --temperature, --top-k, --top-p, --min-p,
// --repetition-penalty and --seed then edit it (generate/sampler_config.hpp says how;
// --temperature 0 is greedy decoding). The model, tokenizer and plugins are those the
// checkpoint's stored config names; the tokenizer file is the one the run saved
// (cli/checkpoint_model.hpp, shared with `patchbay chat`). --chat wraps the prompt in the run's
// chat template and stops at its end-of-turn marker.
#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli/checkpoint_model.hpp"
#include "cli/command.hpp"
#include "cli/component_lookup.hpp"
#include "cli/device_option.hpp"
#include "cli/generate_seq2seq.hpp"
#include "common/error.hpp"
#include "eval/seq2seq_pairs.hpp"
#include "generate/beam_generate.hpp"
#include "generate/generate.hpp"
#include "generate/sampler_config.hpp"
#include "generate/sampler_vocabulary.hpp"
#include "model/encoder_decoder.hpp"
#include "runtime/registry.hpp"
#include "train/checkpoint.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;

toml::array chain_entries(const std::string& chain_file,
                          const generate::SamplerOverrides& overrides) {
  toml::array entries;
  if (chain_file.empty()) {
    entries = generate::default_chain_entries(overrides.seed.value_or(0));
  } else {
    toml::table document;
    try {
      document = toml::parse_file(chain_file);
    } catch (const toml::parse_error& e) {
      throw Error(ErrorKind::kInvalidArgument, chain_file + ": " + std::string(e.description()));
    }
    std::optional<toml::array> found = generate::chain_entries_from_toml(document);
    if (!found) {
      throw Error(ErrorKind::kInvalidArgument, chain_file +
                                                   " has no [[generate.chain]] entries (see "
                                                   "core/generate/README.md for the format)");
    }
    entries = std::move(*found);
  }
  generate::apply_overrides(entries, overrides);
  return entries;
}

// --grammar FILE must be a readable regular file of at most kMaxGrammarFileBytes (a device
// such as /dev/zero would be read without end); --grammar '' and --regex '' are refused rather
// than silently generating without a constraint.
constexpr std::uintmax_t kMaxGrammarFileBytes = 16u << 20;

void check_constraint_options(bool grammar_given, const std::string& grammar_file, bool regex_given,
                              const std::string& regex) {
  if (grammar_given && grammar_file.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "generate: --grammar needs a .gbnf file; it was given ''");
  if (regex_given && regex.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "generate: --regex needs a regular expression; it was given '' (drop the option to "
                "generate without a constraint)");
  if (!grammar_given) return;
  std::error_code ec;
  const auto status = std::filesystem::status(grammar_file, ec);
  if (ec || !std::filesystem::exists(status))
    throw Error(ErrorKind::kNotFound, "generate: --grammar " + grammar_file + ": no such file");
  if (!std::filesystem::is_regular_file(status))
    throw Error(ErrorKind::kInvalidArgument,
                "generate: --grammar " + grammar_file +
                    ": not a regular file (expected a .gbnf text file)");
  if (std::filesystem::file_size(grammar_file, ec) > kMaxGrammarFileBytes)
    throw Error(ErrorKind::kInvalidArgument, "generate: --grammar " + grammar_file +
                                                 ": larger than " +
                                                 std::to_string(kMaxGrammarFileBytes >> 20) +
                                                 " MiB; a grammar is a short text file");
}

// Beam search's chain: only the processors asked for (a --config chain, command-line options),
// ending in a greedy selector that beam search does not use.
toml::array beam_chain_entries(const std::string& chain_file,
                               const generate::SamplerOverrides& overrides) {
  if (!chain_file.empty()) return chain_entries(chain_file, overrides);
  toml::array entries;
  entries.push_back(toml::table{{"name", "greedy"}});
  generate::apply_overrides(entries, overrides);
  return entries;
}

// The sources of an encoder-decoder generate: --source TEXT or --source-file FILE (not both);
// several returned sequences only for one source.
std::vector<std::string> seq2seq_sources(const po::variables_map& values, const std::string& source,
                                         const std::string& source_file,
                                         int64_t num_return_sequences) {
  if (values.count("source") != 0 && values.count("source-file") != 0)
    throw Error(ErrorKind::kInvalidArgument,
                "generate: give --source TEXT or --source-file FILE, not both");
  if (values.count("source") != 0) return {source};
  if (num_return_sequences > 1)
    throw Error(ErrorKind::kInvalidArgument,
                "generate --source-file prints one output per source line; "
                "--num-return-sequences > 1 goes with a single --source");
  std::vector<std::string> sources;
  for (eval::Seq2SeqRecord& r : eval::read_seq2seq_records(source_file, false))
    sources.push_back(std::move(r.source));
  return sources;
}

int run_generate(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string checkpoint_path, prompt, chain_file, source, source_file;
  int64_t max_new_tokens = 200;
  bool no_stop = false;
  double temperature = 0, top_p = 0, min_p = 0, repetition_penalty = 0;
  int64_t top_k = 0;
  uint64_t seed = 0;
  int64_t num_beams = 0, num_return_sequences = 1;
  double length_penalty = 1.0;
  std::string early_stopping = "false";
  std::string grammar_file, regex;
  std::string weights_dtype = "f32";
  std::string device;
  bool chat = false;
  std::string system, template_spec;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("checkpoint", po::value(&checkpoint_path),
                                               "checkpoint file or run directory (its latest)")(
      "prompt,p", po::value(&prompt), "text to continue (required)")(
      "source", po::value(&source),
      "encoder-decoder runs: the source to transform (instead of --prompt)")(
      "source-file", po::value(&source_file),
      "encoder-decoder runs: sources one per line, or JSON Lines {\"source\"}; one output per "
      "line")("max-new-tokens,n", po::value(&max_new_tokens), "tokens to generate (default 200)")(
      "seed", po::value(&seed), "seed of the random selector (default 0)")(
      "temperature", po::value(&temperature), "divide logits by T; 0 = greedy decoding")(
      "top-k", po::value(&top_k), "keep the k most likely tokens")(
      "top-p", po::value(&top_p), "nucleus: keep the smallest set with probability >= p")(
      "min-p", po::value(&min_p), "keep tokens with p >= min_p * p_max")(
      "repetition-penalty", po::value(&repetition_penalty), "CTRL repetition penalty (1 = off)")(
      "config", po::value(&chain_file),
      "TOML file with [[generate.chain]] entries (replaces the default chain)")(
      "no-stop", po::bool_switch(&no_stop), "do not stop at special tokens (<|endoftext|>)")(
      "num-beams", po::value(&num_beams),
      "beam search with this many beams (HF generate semantics)")(
      "length-penalty", po::value(&length_penalty),
      "beam score = sum log p / length^penalty (default 1; > 0 favours longer)")(
      "early-stopping", po::value(&early_stopping),
      "beam search stops: true (num_beams finished), false (heuristic, default), never")(
      "num-return-sequences", po::value(&num_return_sequences),
      "beams printed, best first (default 1)")(
      "grammar", po::value(&grammar_file),
      "constrain the output to a GBNF grammar file (plugin sampler_grammar; configs/grammars/)")(
      "regex", po::value(&regex), "constrain the whole output to match a regular expression")(
      "weights-dtype", po::value(&weights_dtype),
      "f32 (default) or bf16: weight matrices converted at load, f32 activations and accumulation")(
      "chat", po::bool_switch(&chat),
      "the prompt is a user message in the run's chat template; prints the reply "
      "(docs/finetuning.md)")("system", po::value(&system),
                              "with --chat: a system message before the prompt")(
      "template", po::value(&template_spec),
      "with --chat: chatml, llama3, a .jinja file or a model directory (default: the run's own)");
  add_device_option(options, device);
  po::positional_options_description positional;
  positional.add("checkpoint", 1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), values);
  const bool help = values.count("help") != 0;
  const bool has_source = values.count("source") != 0 || values.count("source-file") != 0;
  if (help || values.count("checkpoint") == 0 || (values.count("prompt") == 0 && !has_source)) {
    std::cout
        << "Usage: patchbay generate CHECKPOINT --prompt TEXT [--max-new-tokens N] [--seed S]\n"
           "       patchbay generate CHECKPOINT --source TEXT | --source-file FILE [...]   "
           "(encoder-decoder runs)\n"
           "                         [--temperature T] [--top-k K] [--top-p P] [--min-p M]\n"
           "                         [--repetition-penalty R] [--config CHAIN.toml] [--no-stop]\n"
           "                         [--num-beams N [--length-penalty L] [--early-stopping "
           "true|false|never]\n"
           "                          [--num-return-sequences K]]\n"
           "                         [--grammar FILE.gbnf | --regex REGEX] [--weights-dtype "
           "f32|bf16]\n"
           "                         [--chat [--system TEXT] [--template NAME|FILE]]\n\n"
           "Continues TEXT with the checkpoint's model, using the KV cache. Sampling runs an "
           "explicit\n"
           "chain: by default temperature 0.8 -> top_k 40 -> sample(seed); --config replaces it "
           "with\n"
           "[[generate.chain]] entries, and the options above edit whichever chain is used.\n"
           "--num-beams runs beam search instead: the chain's processors (penalties, no-repeat "
           "n-grams,\n"
           "constraints; from --config and the options above, not the default temperature/top-k) "
           "act on\n"
           "each beam's log-probabilities; its selector is not used.\n"
           "--grammar / --regex put a grammar entry first in the chain: only tokens that continue "
           "a\n"
           "string of the grammar are kept, and generation may end only where the text is "
           "complete.\n\n"
        << options;
    return help ? kExitOk : kExitUsage;
  }
  po::notify(values);
  generate::SamplerOverrides overrides;
  if (values.count("temperature") != 0) overrides.temperature = temperature;
  if (values.count("top-k") != 0) overrides.top_k = top_k;
  if (values.count("top-p") != 0) overrides.top_p = top_p;
  if (values.count("min-p") != 0) overrides.min_p = min_p;
  if (values.count("repetition-penalty") != 0) overrides.repetition_penalty = repetition_penalty;
  if (values.count("seed") != 0) overrides.seed = seed;
  if (values.count("grammar") != 0 && values.count("regex") != 0) {
    throw Error(ErrorKind::kInvalidArgument, "generate: give --grammar or --regex, not both");
  }
  check_constraint_options(values.count("grammar") != 0, grammar_file, values.count("regex") != 0,
                           regex);
  // A grammar entry goes first, so truncation (top_k, top_p) picks among allowed tokens.
  const auto add_constraint = [&](toml::array& entries) {
    if (!grammar_file.empty()) {
      entries.insert(entries.begin(),
                     toml::table{{"name", "grammar"}, {"gbnf_file", grammar_file}});
    } else if (!regex.empty()) {
      entries.insert(entries.begin(), toml::table{{"name", "grammar"}, {"regex", regex}});
    }
  };

  const auto beam_options = [&] {
    generate::BeamSearchOptions beam;
    beam.num_beams = num_beams;
    beam.length_penalty = length_penalty;
    beam.early_stopping = generate::early_stopping_from_name(early_stopping);
    beam.num_return_sequences = num_return_sequences;
    beam.max_new_tokens = max_new_tokens;
    return beam;
  };

  CheckpointModel run = open_checkpoint_run(checkpoint_path, global, device);
  const bool encoder_decoder = model::model_architecture(run.config) == "encoder_decoder";
  if (has_source || encoder_decoder) {
    if (!encoder_decoder)
      throw Error(ErrorKind::kInvalidArgument,
                  "generate --source: " + run.checkpoint.path().string() +
                      " holds a single-stack model (model.architecture = \"single_stack\"), "
                      "which has no encoder to read a source; continue text with --prompt");
    if (!has_source)
      throw Error(ErrorKind::kInvalidArgument,
                  "generate: " + run.checkpoint.path().string() +
                      " holds an encoder-decoder (model.architecture = \"encoder_decoder\"), "
                      "which transforms a source: give --source TEXT instead of --prompt");
    Seq2SeqGenerateRequest request;
    request.max_new_tokens = max_new_tokens;
    request.stop_at_special = !no_stop;
    request.sources = seq2seq_sources(values, source, source_file, num_return_sequences);
    request.from_file = !source_file.empty();
    if (values.count("prompt") != 0 || chat || !system.empty() || !template_spec.empty() ||
        weights_dtype != "f32")
      throw Error(ErrorKind::kInvalidArgument,
                  "generate --source: an encoder-decoder takes no --prompt, --chat, --system, "
                  "--template or --weights-dtype bf16; give --source TEXT or --source-file FILE");
    // Without --config or a sampling option an encoder-decoder decodes greedily (HF's default
    // for text-to-text models); --temperature, --top-k, --top-p, --min-p or --seed select
    // the default sampling chain, edited as for --prompt.
    const bool sampling = !chain_file.empty() || values.count("temperature") != 0 ||
                          values.count("top-k") != 0 || values.count("top-p") != 0 ||
                          values.count("min-p") != 0 || values.count("seed") != 0;
    toml::array entries = num_beams > 0 || !sampling ? beam_chain_entries(chain_file, overrides)
                                                     : chain_entries(chain_file, overrides);
    add_constraint(entries);
    runtime::SamplerChain chain = generate::build_sampler_chain(entries, *run.components.registry);
    generate::give_vocabulary_if_needed(chain, run.tokenizer);
    if (num_beams > 0) {
      request.beam = beam_options();
    }
    return generate_seq2seq(run, request, chain);
  }
  build_checkpoint_model(run, weights_dtype);
  const train::Checkpoint& checkpoint = run.checkpoint;
  const runtime::TokenizerHandle& tokenizer = run.tokenizer;
  model::LanguageModel* model = run.model.get();
  runtime::Registry& registry = *run.components.registry;
  // --chat: the prompt is a user message in the run's chat template (generation prompt
  // opened); the reply stops at the template's end-of-turn marker and is printed alone.
  std::vector<std::string> stop_strings;
  if (chat) {
    const eval::ChatTemplate chat_template = chat_template_of_run(run, template_spec);
    std::vector<eval::ChatMessage> messages;
    if (!system.empty()) messages.push_back({"system", system});
    messages.push_back({"user", prompt});
    prompt = eval::render_chat(chat_template, messages, true);
    stop_strings = eval::chat_stop_strings(chat_template);
  } else if (!system.empty() || !template_spec.empty()) {
    throw Error(ErrorKind::kInvalidArgument, "generate: --system and --template go with --chat");
  }
  const std::string echoed = chat ? std::string() : prompt;  // what is printed before the text

  if (num_beams > 0) {
    // Beam search: only the processors asked for (a --config chain, command-line options).
    toml::array entries = beam_chain_entries(chain_file, overrides);
    add_constraint(entries);
    runtime::SamplerChain beam_chain = generate::build_sampler_chain(entries, registry);
    generate::give_vocabulary_if_needed(beam_chain, tokenizer);
    const generate::BeamSearchOptions beam = beam_options();
    std::cerr << "checkpoint: " << checkpoint.path().string() << " (step " << checkpoint.step()
              << ")\n"
              << "beam search: " << num_beams << " beams, length penalty " << length_penalty
              << ", early stopping " << early_stopping << "; processors: " << beam_chain.describe()
              << " (selector unused)\n";
    const generate::BeamGenerateResult r =
        generate::beam_generate(*model, tokenizer, prompt, beam, !no_stop, &beam_chain);
    for (size_t i = 0; i < r.sequences.size(); ++i) {
      const generate::BeamText& s = r.sequences[i];
      if (r.sequences.size() > 1)
        std::cout << "[" << i + 1 << "] score " << s.score << (s.finished ? " (eos)" : "") << "\n";
      std::cout << echoed << s.text << "\n";
    }
    std::cerr << r.steps + 1 << " decoding steps of " << num_beams << " beams, prompt "
              << r.prompt_tokens << " tokens, " << r.seconds << " s"
              << (r.state_rebuilds > 0 ? ", states rebuilt by re-prefilling " +
                                             std::to_string(r.state_rebuilds) + " times"
                                       : std::string())
              << "\n";
    return kExitOk;
  }

  toml::array entries = chain_entries(chain_file, overrides);
  add_constraint(entries);
  runtime::SamplerChain chain = generate::build_sampler_chain(entries, registry);
  generate::give_vocabulary_if_needed(chain, tokenizer);
  std::cerr << "checkpoint: " << checkpoint.path().string() << " (step " << checkpoint.step()
            << ")\n"
            << "sampler chain: " << chain.describe() << "\n";

  generate::GenerateOptions generate_options;
  generate_options.max_new_tokens = max_new_tokens;
  generate_options.stop_at_special = !no_stop;
  generate_options.on_text = [](std::string_view piece) { std::cout << piece << std::flush; };
  generate_options.stop_strings = stop_strings;
  std::cout << echoed << std::flush;
  const generate::GenerateResult r =
      generate::generate(*model, tokenizer, prompt, generate_options, chain);
  // The text's newline must reach the terminal (or the file both streams share) before the
  // statistics on stderr, and the statistics end their own line: then neither runs into the
  // other or into the shell prompt, whatever is buffered or redirected.
  std::cout << "\n" << std::flush;
  const double seconds = r.decode_seconds > 0 ? r.decode_seconds : 1e-9;
  std::cerr << r.tokens.size() << " tokens ("
            << (r.stop_reason == generate::StopReason::kSpecialToken ? "stopped at a special token"
                : r.stop_reason == generate::StopReason::kStopString
                    ? "stopped at the end of the turn"
                    : "max-new-tokens")
            << "), prompt " << r.prompt_tokens << " tokens"
            << (r.prompt_tokens_dropped > 0
                    ? " (" + std::to_string(r.prompt_tokens_dropped) + " cut to fit the context)"
                    : std::string())
            << ", prefill " << r.prefill_seconds * 1e3 << " ms, "
            << static_cast<double>(r.tokens.size()) / seconds << " tokens/s"
            << (r.context_slides > 0 ? ", " + std::to_string(r.context_slides) + " context slides"
                                     : "")
            << "\n";
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"generate", "Generate text from a checkpoint (KV cache, sampler chain)",
                           run_generate});

}  // namespace patchbay::cli
