// `patchbay bench tokenizer`: encode throughput (MB/s of input text) of the BPE plugin with
// a large and a small vocabulary, with one thread and with all hardware threads, beside
// the char plugin as the floor of what a tokenizer costs; all loaded through the registry.
//
// The corpus (default: the KJV) is both the training text and the encoded text. Trained
// tokenizers are cached under --cache-dir by kind, requested vocab size and corpus hash, so
// reruns skip training (--retrain forces it). Each figure is the best of --repeat runs.
#include <boost/program_options.hpp>
#include <time.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
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
namespace rt = patchbay::runtime;
using Clock = std::chrono::steady_clock;

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

fs::path default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return fs::path(xdg) / "patchbay" / "bench";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return fs::path(home) / ".cache" / "patchbay" / "bench";
  }
  return fs::temp_directory_path() / "patchbay-bench";
}

std::string load_average() {
  std::ifstream file("/proc/loadavg");
  std::string one, five;
  file >> one >> five;
  return one.empty() ? std::string("unknown") : one + " (1 min), " + five + " (5 min)";
}

// CPU seconds used by all threads of this process so far.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Row {
  std::string tokenizer;
  std::string vocab;
  int threads = 1;
  size_t tokens = 0;
  double seconds = 0;      // wall clock, best run
  double cpu_seconds = 0;  // process CPU time of that run (all threads)
  std::string note;
};

// Best wall-clock time over `repeat` runs, with the CPU time of that run.
void time_encode(const rt::TokenizerHandle& tokenizer, const std::string& text, int repeat, Row& row) {
  row.seconds = 1e300;
  for (int r = 0; r < repeat; ++r) {
    const double cpu_start = process_cpu_seconds();
    const auto start = Clock::now();
    const std::vector<int32_t> ids = tokenizer.encode(text, false);
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    const double cpu = process_cpu_seconds() - cpu_start;
    if (wall < row.seconds) {
      row.seconds = wall;
      row.cpu_seconds = cpu;
    }
    row.tokens = ids.size();
  }
}

// Trains (or takes from the cache) a tokenizer of `kind` with `vocab_size` (0: none).
// Returns the saved file; `train_note` says what happened.
fs::path trained_file(rt::Registry& registry, const std::string& kind, int64_t vocab_size, const std::string& text,
                      uint64_t text_hash, const fs::path& cache_dir, bool retrain, std::string& train_note) {
  std::ostringstream name;
  name << kind << "-" << (vocab_size > 0 ? std::to_string(vocab_size) : std::string("default")) << "-" << std::hex
       << text_hash << ".tok";
  const fs::path file = cache_dir / name.str();
  if (!retrain && fs::exists(file)) {
    train_note = "cached " + file.string();
    return file;
  }
  data::TokenizerSettings settings;
  settings.kind = kind;
  if (vocab_size > 0) settings.vocab_size = vocab_size;
  rt::TokenizerHandle tokenizer = data::create_tokenizer(registry, settings);
  const auto start = Clock::now();
  tokenizer.train(text);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  fs::create_directories(cache_dir);
  tokenizer.save(file.string());
  std::ostringstream note;
  note << "trained in " << std::fixed << std::setprecision(2) << seconds << " s";
  train_note = note.str();
  return file;
}

int run_bench_tokenizer(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string corpus_source = "kjv", cache_dir = default_cache_dir().string(), gpt2_dir, native_file;
  int64_t large_vocab = 32768, small_vocab = 1024;
  int repeat = 3;
  po::options_description options("Options");
  options.add_options()
      ("corpus", po::value(&corpus_source), "kjv (default) or a text file / folder; trained on and encoded")
      ("large-vocab", po::value(&large_vocab), "large BPE vocabulary requested (default 32768; training stops\n"
                                               "where no pair occurs twice, the reached size is printed)")
      ("small-vocab", po::value(&small_vocab), "small BPE vocabulary (default 1024)")
      ("repeat", po::value(&repeat), "encode runs per figure; the best is reported (default 3)")
      ("cache-dir", po::value(&cache_dir), "where trained tokenizers are cached (default ~/.cache/patchbay/bench)")
      ("retrain", "train again even when a cached tokenizer exists")
      ("gpt2-dir", po::value(&gpt2_dir), "also encode with GPT-2's published encoder.json + vocab.bpe from this\n"
                                         "folder (scripts/tokenizers/fetch_gpt2.sh), loaded by the bpe plugin")
      ("native-file", po::value(&native_file), "also encode with this saved bpe file (e.g. GPT-2's merges in\n"
                                               "Patchbay's own numbering: scripts/tokenizers/gpt2_to_native.py)")
      ("help,h", "this help");
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).run(), values);
  if (values.count("help") != 0) {
    std::cout << "Usage: patchbay bench tokenizer [--corpus kjv|PATH] [--large-vocab N] [--small-vocab N]\n\n"
              << "BPE encode throughput (1 thread and all threads) for two vocabulary sizes, beside the\n"
              << "char tokenizer as a floor.\n\n"
              << options;
    return kExitOk;
  }
  po::notify(values);
  if (repeat < 1) throw Error(ErrorKind::kInvalidArgument, "--repeat must be at least 1");

  const data::Corpus corpus = data::load_corpus(corpus_source);
  std::string text;
  for (size_t i = 0; i < corpus.documents.size(); ++i) {
    if (i != 0) text += corpus.separator;
    text += corpus.documents[i].text;
  }
  const uint64_t text_hash = data::fnv1a64(text);
  const int hardware_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  rt::Registry registry;
  rt::SearchPathOptions search;
  search.cli_paths = global.plugin_paths;
  registry.scan(rt::plugin_search_path(search));

  std::cout << "machine: " << cpu_model() << ", " << hardware_threads << " hardware threads, load average "
            << load_average() << "\n"
            << "corpus: " << corpus.description << ", " << text.size() << " bytes\n"
            << "encode: whole corpus, allow_special=0, best of " << repeat << "\n\n";

  std::vector<Row> rows;
  auto measure = [&](const std::string& kind, int64_t vocab_request) {
    std::string train_note;
    const fs::path file = trained_file(registry, kind, vocab_request, text, text_hash, cache_dir,
                                       values.count("retrain") != 0, train_note);
    std::vector<int> thread_counts = {1};
    if (kind == "bpe" && hardware_threads > 1) thread_counts.push_back(hardware_threads);
    for (int threads : thread_counts) {
      data::TokenizerSettings settings;
      settings.kind = kind;
      if (kind == "bpe") settings.encode_threads = threads;
      const rt::TokenizerHandle tokenizer = data::load_tokenizer(registry, file, settings);
      Row row;
      row.tokenizer = kind;
      row.vocab = std::to_string(tokenizer.vocab_size());
      if (vocab_request > 0) row.vocab += " (asked " + std::to_string(vocab_request) + ")";
      row.threads = threads;
      time_encode(tokenizer, text, repeat, row);
      row.note = train_note;
      // Equality of the multi-thread ids with the single-thread ids is a unit test
      // (tests/tokenizers); here only the count is compared, as a cheap guard.
      if (threads > 1 && !rows.empty() && rows.back().tokens != row.tokens) {
        throw Error(ErrorKind::kInternal, "multi-thread encode gave " + std::to_string(row.tokens) +
                                              " tokens, single-thread " + std::to_string(rows.back().tokens));
      }
      rows.push_back(row);
    }
  };
  measure("bpe", large_vocab);
  measure("bpe", small_vocab);
  measure("char", 0);
  // Published or ready-made vocabularies: no training, the same encode path.
  auto measure_ready = [&](const std::string& label, const data::TokenizerSettings& base, const fs::path& file) {
    std::vector<int> thread_counts = {1};
    if (hardware_threads > 1) thread_counts.push_back(hardware_threads);
    for (int threads : thread_counts) {
      data::TokenizerSettings settings = base;
      settings.encode_threads = threads;
      const rt::TokenizerHandle tokenizer =
          file.empty() ? data::create_tokenizer(registry, settings) : data::load_tokenizer(registry, file, settings);
      Row row;
      row.tokenizer = "bpe";
      row.vocab = std::to_string(tokenizer.vocab_size()) + " (" + label + ")";
      row.threads = threads;
      time_encode(tokenizer, text, repeat, row);
      row.note = label == "gpt2 files" ? gpt2_dir : file.string();
      rows.push_back(row);
    }
  };
  if (!gpt2_dir.empty()) {
    data::TokenizerSettings settings;
    settings.kind = "bpe";
    settings.vocab_file = (fs::path(gpt2_dir) / "encoder.json").string();
    settings.merges_file = (fs::path(gpt2_dir) / "vocab.bpe").string();
    measure_ready("gpt2 files", settings, {});
  }
  if (!native_file.empty()) {
    data::TokenizerSettings settings;
    settings.kind = "bpe";
    measure_ready("native file", settings, native_file);
  }

  std::cout << std::left << std::setw(6) << "kind" << std::setw(26) << "vocab" << std::right << std::setw(8)
            << "threads" << std::setw(11) << "tokens" << std::setw(11) << "bytes/tok" << std::setw(10) << "MB/s"
            << std::setw(13) << "MB/s/thread" << std::setw(12) << "MB/cpu-s" << "  training\n";
  for (const Row& row : rows) {
    const double mb_per_s = static_cast<double>(text.size()) / row.seconds / 1e6;
    std::cout << std::left << std::setw(6) << row.tokenizer << std::setw(26) << row.vocab << std::right
              << std::setw(8) << row.threads << std::setw(11) << row.tokens << std::setw(11) << std::fixed
              << std::setprecision(2) << static_cast<double>(text.size()) / static_cast<double>(row.tokens)
              << std::setw(10) << std::setprecision(1) << mb_per_s << std::setw(13) << mb_per_s / row.threads << std::setw(12)
              << static_cast<double>(text.size()) / row.cpu_seconds / 1e6 << "  " << row.note << "\n";
  }
  std::cout << "\nMB/s: input bytes per wall-clock second; MB/cpu-s: per second of process CPU time (all\n"
               "threads), roughly what one thread reaches on an otherwise idle core.\n"
               "reference: tiktoken (GPT-2 vocab, Rust) ~6.4 MB/s on 1 thread per its README plot.\n";
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"bench tokenizer", "BPE and char encode throughput (MB/s) on the KJV, 1 and all threads",
                           run_bench_tokenizer});

}  // namespace patchbay::cli
