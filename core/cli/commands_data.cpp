// `patchbay data prepare` (corpus -> train.txt, val.txt, manifest.json; or, with --source,
// the streaming preparation into token shards: data/prepare.hpp) and `patchbay data encode`
// (a split -> token cache with a saved tokenizer).
#include <sys/resource.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <optional>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "common/error.hpp"
#include "data/corpus.hpp"
#include "data/prepare.hpp"
#include "data/split.hpp"
#include "data/tokenizer_io.hpp"
#include "run/progress_bar.hpp"
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

runtime::TokenizerHandle load_prepare_tokenizer(runtime::Registry& registry, const std::string& file,
                                                data::TokenizerSettings& settings) {
  if (settings.kind.empty()) settings.kind = data::detect_tokenizer_kind(file);
  // Preparation encodes documents on every core itself: a tokenizer with threads of its own
  // (a declared encode_threads key) is asked for one, so the two do not multiply.
  const runtime::ComponentEntry& entry = registry.find(PB_KIND_TOKENIZER, settings.kind);
  for (size_t i = 0; i < entry.descriptor->config_field_count; ++i)
    if (std::string(entry.descriptor->config_fields[i].key) == "encode_threads") settings.encode_threads = 1;
  return data::load_tokenizer(registry, file, settings);
}

double peak_resident_mib() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // kilobytes on Linux
}

// `patchbay data prepare --source ...`: data/prepare.hpp.
int run_prepare_shards(const po::variables_map& values, data::PrepareOptions o, const GlobalOptions& global) {
  const std::string tokenizer_file = values["tokenizer"].as<std::string>();
  data::TokenizerSettings settings;
  if (values.count("kind") != 0) settings.kind = values["kind"].as<std::string>();
  runtime::Registry registry;
  runtime::SearchPathOptions search;
  search.cli_paths = global.plugin_paths;
  registry.scan(runtime::plugin_search_path(search));
  const runtime::TokenizerHandle tokenizer = load_prepare_tokenizer(registry, tokenizer_file, settings);
  std::optional<run::ProgressBar> bar;
  const auto start = std::chrono::steady_clock::now();
  auto progress = [&](const data::PrepareProgress& p) {
    if (values.count("no-progress") != 0) return;
    if (!bar) bar.emplace("prepare MB", static_cast<int64_t>((p.total_bytes + 999999) / 1000000));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    char suffix[96];
    std::snprintf(suffix, sizeof suffix, "%.1f MB/s | %.2fM tokens",
                  seconds > 0 ? static_cast<double>(p.bytes_read) / 1e6 / seconds : 0.0,
                  static_cast<double>(p.tokens_written) / 1e6);
    bar->update(static_cast<int64_t>(p.bytes_read / 1000000), suffix);
  };
  const data::PrepareReport r =
      data::prepare_dataset(o, {&tokenizer, settings.kind, tokenizer_file}, progress);
  if (bar) bar->finish();
  if (r.already_complete) {
    std::cout << o.out.string() << " is already prepared with these sources and options ("
              << r.manifest.string() << "); nothing to do\n";
    return kExitOk;
  }
  uint64_t duplicates = 0, empty = 0, bad = 0;
  for (const data::SourceReport& s : r.sources) {
    std::cout << "source " << s.path << ": " << s.files << " files, " << s.documents << " documents, " << s.bytes
              << " bytes, " << s.tokens << " tokens\n";
    duplicates += s.duplicates;
    empty += s.empty;
    bad += s.bad;
  }
  for (const data::SplitReport& s : r.splits)
    if (s.shards > 0)
      std::cout << s.name << ": " << s.documents << " documents, " << s.tokens << " tokens in " << s.shards
                << " shards (uint" << r.bytes_per_id * 8 << ")\n";
  std::cout << "dropped: " << duplicates << " exact duplicates" << (o.dedup_exact ? "" : " (--dedup none)") << ", "
            << empty << " empty documents, " << bad << " bad lines" << (o.skip_bad ? " (--skip-bad)" : "") << "\n";
  if (r.resumed_shards > 0) std::cout << "resumed: " << r.resumed_shards << " shards of an earlier run kept\n";
  uint64_t text_bytes = 0;
  for (const data::SourceReport& s : r.sources) text_bytes += s.bytes;
  char figures[200];
  std::snprintf(figures, sizeof figures,
                "%.1f MB of files (%.1f MB of kept text) in %.2f s: %.1f MB/s of files, %.1f MB/s of text, "
                "peak resident memory %.0f MiB\n",
                static_cast<double>(r.input_bytes) / 1e6, static_cast<double>(text_bytes) / 1e6, r.seconds,
                r.seconds > 0 ? static_cast<double>(r.input_bytes) / 1e6 / r.seconds : 0.0,
                r.seconds > 0 ? static_cast<double>(text_bytes) / 1e6 / r.seconds : 0.0, peak_resident_mib());
  std::cout << figures << "manifest: " << r.manifest.string() << "\n";
  return kExitOk;
}

int run_prepare(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string corpus_source = "kjv", out;
  data::SplitOptions split_options;
  std::vector<std::string> sources, include, exclude;
  data::PrepareOptions shards;
  std::string jsonl_field = "text", dedup = "none";
  double shard_mb = 64, block_kb = 0;
  po::options_description options("Options");
  options.add_options()
      ("corpus", po::value(&corpus_source), "kjv (default: Debian's bible-kjv through `bible`) or a text file / folder")
      ("out", po::value(&out), "output folder (default data/kjv, or data/<name of the file or folder>)")
      ("val-fraction", po::value(&split_options.val_fraction), "share of documents for validation, in [0, 1) (default 0.05)")
      ("seed", po::value(&split_options.seed), "seed of the document hash split (default 0)");
  po::options_description streaming("Token shards (with --source)");
  streaming.add_options()
      ("source", po::value(&sources), "text file, folder (recursive) or JSON Lines file (.jsonl/.ndjson; .gz and .zst read too); repeatable")
      ("tokenizer", po::value<std::string>(), "saved tokenizer file (required with --source)")
      ("kind", po::value<std::string>(), "tokenizer component (default: detected from the file)")
      ("include", po::value(&include), "glob a folder's files must match (path inside the folder or file name); repeatable")
      ("exclude", po::value(&exclude), "glob of files to leave out; repeatable")
      ("jsonl-field", po::value(&jsonl_field), "JSON Lines: the string field holding the text (default text)")
      ("test-fraction", po::value(&shards.test_fraction), "share of documents for a test split (default 0)")
      ("shard-mb", po::value(&shard_mb), "token bytes per shard, in MB (default 64; whole documents)")
      ("block-kb", po::value(&block_kb), "cut text files into documents of about this many KB at newlines (default: one per file)")
      ("dedup", po::value(&dedup), "none (default) or exact: drop documents whose text was seen before")
      ("skip-bad", "skip JSON Lines lines that are not JSON or lack the field (counted) instead of stopping")
      ("threads", po::value(&shards.threads), "worker threads (default: every core)")
      ("eot", po::value(&shards.eot_token), "special token ending each document (default <|endoftext|>)")
      ("overwrite", "replace what --out holds instead of resuming")
      ("no-progress", "no progress bar");
  options.add(streaming);
  po::variables_map values;
  if (!parse_args(args, options, values,
                  "patchbay data prepare [--corpus kjv|PATH] [--out DIR] [--val-fraction F] [--seed S]\n"
                  "       patchbay data prepare --source PATH [--source PATH ...] --tokenizer FILE --out DIR [...]",
                  "Without --source: reads a corpus, splits it by documents (KJV: chapters; files: ~16 KiB\n"
                  "blocks) into train.txt and val.txt deterministically, with manifest.json beside them.\n"
                  "With --source: streams the sources through the tokenizer into token shards per split\n"
                  "(every core, bounded memory), each document ending with the end-of-text token, with a\n"
                  "document index per shard and manifest.json; a killed run resumes when run again.")) {
    return kExitOk;
  }
  if (!sources.empty()) {
    if (values.count("tokenizer") == 0) throw Error(ErrorKind::kInvalidArgument, "--source needs --tokenizer FILE");
    if (out.empty()) throw Error(ErrorKind::kInvalidArgument, "--source needs --out DIR");
    if (dedup != "none" && dedup != "exact")
      throw Error(ErrorKind::kInvalidArgument, "--dedup must be none or exact, not '" + dedup + "'");
    for (const std::string& s : sources) shards.sources.push_back({s, include, exclude, jsonl_field});
    shards.out = out;
    shards.val_fraction = split_options.val_fraction;
    shards.seed = split_options.seed;
    shards.dedup_exact = dedup == "exact";
    shards.skip_bad = values.count("skip-bad") != 0;
    shards.overwrite = values.count("overwrite") != 0;
    shards.shard_bytes = static_cast<uint64_t>(shard_mb * 1e6);
    shards.block_bytes = static_cast<size_t>(block_kb * 1e3);
    return run_prepare_shards(values, shards, global);
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
