// `patchbay data prepare` (corpus -> train.txt, val.txt, manifest.json) and
// `patchbay data encode` (a split -> token cache with a saved tokenizer).
#include <boost/program_options.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "common/error.hpp"
#include "data/corpus.hpp"
#include "data/split.hpp"
#include "data/tokenizer_io.hpp"
#include "runtime/registry.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

bool parse_args(const std::vector<std::string>& args, po::options_description& options, po::variables_map& values,
                const std::string& usage, const std::string& what) {
  options.add_options()("help,h", "this help");
  po::store(po::command_line_parser(args).options(options).run(), values);
  if (values.count("help") != 0) {  // before notify(), which enforces required options
    std::cout << "Usage: " << usage << "\n\n" << what << "\n\n" << options;
    return false;
  }
  po::notify(values);
  return true;
}

std::string default_out_for(const std::string& corpus) {
  if (corpus == "kjv" || corpus == "KJV") return "data/kjv";
  fs::path p(corpus);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "folder/" -> "folder"
  return (fs::path("data") / p.stem()).string();
}

int run_prepare(const std::vector<std::string>& args, const GlobalOptions&) {
  std::string corpus_source = "kjv", out;
  data::SplitOptions split_options;
  po::options_description options("Options");
  options.add_options()
      ("corpus", po::value(&corpus_source), "kjv (default: Debian's bible-kjv through `bible`) or a text file / folder")
      ("out", po::value(&out), "output folder (default data/kjv, or data/<name of the file or folder>)")
      ("val-fraction", po::value(&split_options.val_fraction), "share of documents for validation, in [0, 1) (default 0.05)")
      ("seed", po::value(&split_options.seed), "seed of the document hash split (default 0)");
  po::variables_map values;
  if (!parse_args(args, options, values, "patchbay data prepare [--corpus kjv|PATH] [--out DIR] [--val-fraction F] [--seed S]",
                  "Reads a corpus, splits it by documents (KJV: chapters; files: ~16 KiB blocks) into\n"
                  "train.txt and val.txt deterministically, and writes manifest.json beside them.")) {
    return kExitOk;
  }
  if (out.empty()) out = default_out_for(corpus_source);
  const data::Corpus corpus = data::load_corpus(corpus_source);
  const data::CorpusSplit split = data::split_corpus(corpus, split_options);
  const data::PreparedFiles files = data::write_prepared_corpus(out, corpus, split, split_options);
  std::cout << "corpus: " << corpus.description << "\n"
            << "documents: " << corpus.documents.size() << " (" << corpus.document_rule << "), " << corpus.bytes()
            << " bytes\n"
            << "train: " << files.train.string() << " (" << split.train_documents << " documents, " << split.train.size()
            << " bytes)\n"
            << "val:   " << files.val.string() << " (" << split.val_documents << " documents, " << split.val.size()
            << " bytes)\n"
            << "manifest: " << files.manifest.string() << "\n";
  return kExitOk;
}

int run_encode(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string tokenizer_file, input, out;
  data::TokenizerSettings settings;
  po::options_description options("Options");
  options.add_options()
      ("tokenizer", po::value(&tokenizer_file)->required(), "saved tokenizer file")
      ("kind", po::value(&settings.kind), "tokenizer component (default: detected from the file)")
      ("input", po::value(&input)->required(), "text file to encode, e.g. data/kjv/train.txt")
      ("out", po::value(&out), "token cache to write (default: INPUT with .<kind>.tokens)");
  po::variables_map values;
  if (!parse_args(args, options, values, "patchbay data encode --tokenizer FILE --input FILE [--out FILE]",
                  "Encodes a text file into a memory-mappable token cache (uint16 ids when the vocabulary\n"
                  "fits, else uint32; header with the tokenizer's kind, vocab size and file hash).")) {
    return kExitOk;
  }
  if (settings.kind.empty()) settings.kind = data::detect_tokenizer_kind(tokenizer_file);
  if (out.empty()) out = (fs::path(input).replace_extension("." + settings.kind + ".tokens")).string();
  runtime::Registry registry;
  runtime::SearchPathOptions search;
  search.cli_paths = global.plugin_paths;
  registry.scan(runtime::plugin_search_path(search));
  const runtime::TokenizerHandle tokenizer = data::load_tokenizer(registry, tokenizer_file, settings);
  const auto start = std::chrono::steady_clock::now();
  const data::TokenCacheInfo info =
      data::encode_file_to_token_cache(tokenizer, settings.kind, tokenizer_file, input, out);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "wrote " << out << ": " << info.count << " ids (uint" << info.bytes_per_id * 8 << ", vocab "
            << info.vocab_size << ") in " << seconds << " s\n";
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"data prepare", "Split a corpus (default: KJV) into train/val text files with a manifest", run_prepare});
PATCHBAY_REGISTER_COMMAND({"data encode", "Encode a text file into a memory-mapped token cache", run_encode});

}  // namespace patchbay::cli
