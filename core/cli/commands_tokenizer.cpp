// `patchbay tokenizer train | encode | decode`: tokenizers from the plugin registry (the
// real tokenizer_*.so files), trained on a text file and saved, or loaded from a saved
// file (kind detected from its first word unless --kind is given).
#include <boost/program_options.hpp>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "common/error.hpp"
#include "data/tokenizer_io.hpp"
#include "runtime/registry.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;
namespace rt = patchbay::runtime;

// Parses args; returns false when --help was answered.
bool parse_args(const std::vector<std::string>& args, po::options_description& options,
                const po::positional_options_description& positional, po::variables_map& values,
                const std::string& usage, const std::string& what) {
  options.add_options()("help,h", "this help");
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), values);
  if (values.count("help") != 0) {  // before notify(), which enforces required options
    std::cout << "Usage: " << usage << "\n\n" << what << "\n\n" << options;
    return false;
  }
  po::notify(values);
  return true;
}

rt::Registry& registry_for(const GlobalOptions& global) {
  static rt::Registry registry;
  static bool scanned = false;
  if (!scanned) {
    rt::SearchPathOptions search;
    search.cli_paths = global.plugin_paths;
    registry.scan(rt::plugin_search_path(search));
    scanned = true;
  }
  return registry;
}

int run_train(const std::vector<std::string>& args, const GlobalOptions& global) {
  data::TokenizerSettings settings;
  std::string input = "data/kjv/train.txt";
  std::string out;
  int64_t vocab_size = 0;
  std::vector<std::string> specials;
  po::options_description options("Options");
  options.add_options()
      ("kind", po::value(&settings.kind)->required(), "tokenizer component: bpe | char | any loaded one")
      ("vocab-size", po::value(&vocab_size), "target vocabulary size (components with a vocab_size key)")
      ("special", po::value(&specials)->composing(), "special token text (repeatable; replaces the default list)")
      ("no-specials", "no special tokens at all")
      ("input", po::value(&input), "training text file (default data/kjv/train.txt)")
      ("out", po::value(&out)->required(), "file to save the trained tokenizer to");
  po::variables_map values;
  if (!parse_args(args, options, {}, values,
                  "patchbay tokenizer train --kind bpe|char [--vocab-size N] [--input FILE] --out FILE",
                  "Trains a tokenizer on a text file and saves it (atomically).")) {
    return kExitOk;
  }
  if (values.count("vocab-size") != 0) settings.vocab_size = vocab_size;
  if (values.count("no-specials") != 0) {
    settings.special_tokens = std::vector<std::string>{};
  } else if (!specials.empty()) {
    settings.special_tokens = specials;
  }
  if (!std::filesystem::exists(input)) {
    throw Error(ErrorKind::kNotFound, "training text '" + input + "' does not exist; run `patchbay data prepare` "
                                      "first or pass --input FILE");
  }
  const std::string text = data::read_text_file(input);
  rt::TokenizerHandle tokenizer = data::create_tokenizer(registry_for(global), settings);
  const auto start = std::chrono::steady_clock::now();
  tokenizer.train(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  tokenizer.save(out);
  std::cout << "trained " << settings.kind << " on " << input << " (" << text.size() << " bytes) in "
            << seconds << " s: vocab_size " << tokenizer.vocab_size();
  if (settings.vocab_size) std::cout << " (requested " << *settings.vocab_size << ")";
  std::cout << ", " << tokenizer.special_tokens().size() << " special token(s); saved to " << out << "\n";
  return kExitOk;
}

int run_encode(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string file, input, text, vocab_file, merges_file;
  data::TokenizerSettings settings;
  po::options_description options("Options");
  options.add_options()
      ("tokenizer", po::value(&file), "saved tokenizer file (a bpe tokenizer.json needs --kind bpe)")
      ("kind", po::value(&settings.kind), "tokenizer component (default: detected from the file)")
      ("vocab-file", po::value(&vocab_file), "instead of --tokenizer: GPT-2 encoder.json (bpe, with --merges-file)")
      ("merges-file", po::value(&merges_file), "GPT-2 vocab.bpe, with --vocab-file")
      ("input", po::value(&input), "encode this file instead of TEXT")
      ("allow-special", "recognise special-token texts in the input")
      ("text", po::value(&text), "text to encode");
  po::positional_options_description positional;
  positional.add("text", 1);
  po::variables_map values;
  if (!parse_args(args, options, positional, values,
                  "patchbay tokenizer encode (--tokenizer FILE [--kind K] | --vocab-file F --merges-file F)\n"
                  "                          [--allow-special] (TEXT | --input FILE)",
                  "Prints the token ids of TEXT (or of a file), space-separated, then the count on stderr.")) {
    return kExitOk;
  }
  if (values.count("text") == values.count("input")) {
    throw Error(ErrorKind::kInvalidArgument, "give exactly one of TEXT or --input FILE");
  }
  if (!input.empty()) text = data::read_text_file(input);
  if (file.empty() == vocab_file.empty()) {
    throw Error(ErrorKind::kInvalidArgument, "give exactly one of --tokenizer FILE or --vocab-file + --merges-file");
  }
  rt::TokenizerHandle tokenizer = [&] {
    if (!file.empty()) return data::load_tokenizer(registry_for(global), file, settings);
    settings.kind = "bpe";
    settings.vocab_file = vocab_file;
    settings.merges_file = merges_file;
    return data::create_tokenizer(registry_for(global), settings);
  }();
  const std::vector<int32_t> ids = tokenizer.encode(text, values.count("allow-special") != 0);
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i != 0) line.push_back(' ');
    line += std::to_string(ids[i]);
  }
  std::cout << line << "\n";
  std::cerr << ids.size() << " tokens for " << text.size() << " bytes\n";
  return kExitOk;
}

int run_decode(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string file;
  std::vector<std::string> id_words;
  data::TokenizerSettings settings;
  po::options_description options("Options");
  options.add_options()
      ("tokenizer", po::value(&file)->required(), "saved tokenizer file")
      ("kind", po::value(&settings.kind), "tokenizer component (default: detected from the file)")
      ("ids", po::value(&id_words)->multitoken(), "token ids");
  po::positional_options_description positional;
  positional.add("ids", -1);
  po::variables_map values;
  if (!parse_args(args, options, positional, values, "patchbay tokenizer decode --tokenizer FILE [--kind K] IDS...",
                  "Writes the bytes of the ids to stdout (no newline added).")) {
    return kExitOk;
  }
  std::vector<int32_t> ids;
  for (const std::string& word : id_words) {
    size_t used = 0;
    long long id = 0;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || id < INT32_MIN || id > INT32_MAX) {
      throw Error(ErrorKind::kInvalidArgument, "'" + word + "' is not a token id (an integer)");
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  const rt::TokenizerHandle tokenizer = data::load_tokenizer(registry_for(global), file, settings);
  const std::string bytes = tokenizer.decode(ids);
  std::cout.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::cout.flush();
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"tokenizer train", "Train a tokenizer (bpe, char, ...) on a text file and save it", run_train});
PATCHBAY_REGISTER_COMMAND({"tokenizer encode", "Print the token ids of a text with a saved tokenizer", run_encode});
PATCHBAY_REGISTER_COMMAND({"tokenizer decode", "Print the text of token ids with a saved tokenizer", run_decode});

}  // namespace patchbay::cli
