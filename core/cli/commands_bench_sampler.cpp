// `patchbay bench sampler`: the per-token cost of a grammar constraint (plugin
// sampler_grammar) at a GPT-2-sized vocabulary, beside the unconstrained chain it is added
// to, both measured in the same run on the same logits.
//
//   reference:   temperature 0.8 -> top_k 40 -> sample
//   constrained: grammar(FILE or REGEX) -> temperature 0.8 -> top_k 40 -> sample
//
// The vocabulary is synthetic and GPT-2-like (default 50257 ids): the 256 single bytes,
// words with and without a leading space, numbers, punctuation runs as they appear in JSON
// and code, accented and CJK characters (some split inside a character), one end-of-sequence
// id. Logits are random (splitmix64, fixed seed): the constrained chain then walks random
// valid documents, deep nesting included, restarting at end-of-sequence or --max-length.
// The index build (trie + automaton start, once per grammar and vocabulary) is reported
// apart; per-token figures include every cold mask computation of new grammar states.
#include <time.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "common/error.hpp"
#include "generate/sampler_config.hpp"
#include "generate/sampler_vocabulary.hpp"
#include "runtime/plugin_search_path.hpp"
#include "runtime/registry.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;
namespace rt = patchbay::runtime;
using Clock = std::chrono::steady_clock;

// Milliseconds on the chosen clock: this thread's CPU time (default; steady on a shared,
// overloaded machine, where wall-clock figures mostly measure preemption) or wall time.
double now_ms(bool cpu_clock) {
  if (cpu_clock) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
  }
  return std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch()).count();
}

struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
};

// A GPT-2-like byte vocabulary of `size` ids; the last one is end-of-sequence.
generate::TokenVocabulary synthetic_vocabulary(size_t size, uint64_t seed) {
  generate::TokenVocabulary v;
  std::set<std::string> seen;
  const auto add = [&](const std::string& t) {
    if (v.size() + 1 >= size || t.empty() || !seen.insert(t).second) return;
    v.add(t, false);
  };
  for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
  const char* punctuation[] = {
      "{\"",  "\":",   "\",",  "\"}",   "},",   "[{",    "}]",     "]}",     "\":\"", "\":[",
      "\":{", "\",\"", "\n",   "\n\n",  "  ",   "    ",  "\n  ",   "\n    ", "\"\n",  ",\n",
      "{\n",  "}\n",   "[]",   "{}",    ", ",   ": ",    "\": ",   "\", \"", "=\"",   "();",
      "()",   "->",    "==",   "!=",    "//",   "/*",    "*/",     "...",    "--",    "\\n",
      "\\\"", "\\u",   "true", "false", "null", " true", " false", " null"};
  for (const char* p : punctuation) add(p);
  const std::string letters = "etaoinshrdlcumwfgypbvkjxqz";
  const char* accented[] = {"é",  "è",  "ü",  "ö",  "ß",  "ñ",  "ç", "中",
                            "文", "字", "日", "本", "語", "한", "국"};
  SplitMix rng{seed};
  while (v.size() + 1 < size) {
    const double kind = rng.uniform();
    std::string t;
    if (kind < 0.08) {  // numbers
      if (rng.uniform() < 0.3) t += ' ';
      const size_t n = 1 + rng.below(4);
      for (size_t i = 0; i < n; ++i) t += static_cast<char>('0' + rng.below(10));
    } else if (kind < 0.12) {  // non-ASCII, sometimes split inside a character
      const std::string c = accented[rng.below(std::size(accented))];
      if (rng.uniform() < 0.5) t += letters[rng.below(8)];
      t += rng.uniform() < 0.3 ? c.substr(0, c.size() - 1) : c;
    } else {  // words; letters drawn with a rough English frequency skew
      if (rng.uniform() < 0.55) t += ' ';
      const size_t n = 2 + rng.below(9);
      for (size_t i = 0; i < n; ++i) {
        const double u = rng.uniform();
        char c = letters[static_cast<size_t>(u * u * static_cast<double>(letters.size()))];
        if (i == 0 && rng.uniform() < 0.1) c = static_cast<char>(c - 'a' + 'A');
        t += c;
      }
      if (rng.uniform() < 0.05) t += rng.uniform() < 0.5 ? "\"" : ",";
    }
    add(t);
  }
  v.add("", true);  // <|endoftext|>
  return v;
}

struct Stats {
  std::vector<double> ms;
  double mean() const {
    double s = 0;
    for (double x : ms) s += x;
    return ms.empty() ? 0 : s / static_cast<double>(ms.size());
  }
  double quantile(double q) const {
    if (ms.empty()) return 0;
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    return sorted[std::min(sorted.size() - 1,
                           static_cast<size_t>(q * static_cast<double>(sorted.size())))];
  }
};

std::string load_average() {
  std::ifstream file("/proc/loadavg");
  std::string one, five;
  file >> one >> five;
  return one.empty() ? std::string("unknown") : one + " (1 min), " + five + " (5 min)";
}

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

int run_bench_sampler(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string grammar_file = "configs/grammars/json.gbnf", regex;
  size_t vocab_size = 50257;
  int64_t tokens = 2000, max_length = 256;
  uint64_t seed = 1;
  std::string clock_name = "cpu";
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("grammar", po::value(&grammar_file),
                                               "GBNF file (default configs/grammars/json.gbnf)")(
      "regex", po::value(&regex), "a regex constraint instead of --grammar")(
      "vocab", po::value(&vocab_size), "synthetic vocabulary size (default 50257, GPT-2's)")(
      "tokens", po::value(&tokens), "tokens timed (default 2000)")(
      "max-length", po::value(&max_length),
      "restart a document after this many tokens (default 256)")(
      "seed", po::value(&seed), "seed of the logits, the vocabulary and the selector (default 1)")(
      "clock", po::value(&clock_name), "cpu (this thread's CPU time, default) or wall");
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).run(), values);
  if (values.count("help") != 0) {
    std::cout << "Usage: patchbay bench sampler [--grammar FILE.gbnf | --regex R] [--vocab N] "
                 "[--tokens N]\n\n"
                 "Per-token cost of the grammar constraint at a GPT-2-sized synthetic vocabulary, "
                 "beside the\n"
                 "unconstrained chain temperature -> top_k 40 -> sample on the same logits.\n\n"
              << options;
    return kExitOk;
  }
  po::notify(values);
  if (clock_name != "cpu" && clock_name != "wall") {
    throw Error(ErrorKind::kInvalidArgument,
                "bench sampler: --clock is cpu or wall, not " + clock_name);
  }
  const bool cpu_clock = clock_name == "cpu";
  if (vocab_size < 512 || tokens < 1 || max_length < 1) {
    throw Error(ErrorKind::kInvalidArgument,
                "bench sampler: --vocab must be >= 512, --tokens and --max-length >= 1");
  }
  if (regex.empty() && !fs::exists(grammar_file)) {
    throw Error(ErrorKind::kNotFound,
                "bench sampler: grammar file " + grammar_file +
                    " not found (run from the repository root or pass --grammar)");
  }

  rt::Registry registry;
  rt::SearchPathOptions search;
  search.cli_paths = global.plugin_paths;
  registry.scan(rt::plugin_search_path(search));

  const generate::TokenVocabulary vocabulary = synthetic_vocabulary(vocab_size, seed);
  const auto s = static_cast<int64_t>(seed);
  toml::array reference_entries{toml::table{{"name", "temperature"}, {"temperature", 0.8}},
                                toml::table{{"name", "top_k"}, {"k", 40}},
                                toml::table{{"name", "sample"}, {"seed", s}}};
  toml::array constrained_entries = reference_entries;
  constrained_entries.insert(constrained_entries.begin(),
                             regex.empty()
                                 ? toml::table{{"name", "grammar"}, {"gbnf_file", grammar_file}}
                                 : toml::table{{"name", "grammar"}, {"regex", regex}});
  rt::SamplerChain reference =
      generate::build_sampler_chain(reference_entries, registry, "reference");
  rt::SamplerChain constrained =
      generate::build_sampler_chain(constrained_entries, registry, "constrained");
  const double build_start = now_ms(cpu_clock);
  constrained.set_vocabulary(vocabulary.view());
  const double build_ms = now_ms(cpu_clock) - build_start;
  // The grammar processor alone, fed the constrained chain's tokens: apply + accept timed.
  toml::array alone_entries{constrained_entries[0], toml::table{{"name", "greedy"}}};
  rt::SamplerChain alone = generate::build_sampler_chain(alone_entries, registry, "grammar alone");
  alone.set_vocabulary(vocabulary.view());
  std::vector<float> scratch(vocabulary.size());

  SplitMix rng{seed * 7919 + 1};
  std::vector<float> logits(vocabulary.size());
  std::vector<int32_t> history{0}, reference_history{0};
  Stats plain, grammar, processor;
  int64_t documents = 0, finished = 0, generated_bytes = 0;
  std::string text;
  for (int64_t step = 0; step < tokens; ++step) {
    for (float& z : logits) z = static_cast<float>(4.0 * rng.uniform() - 2.0);
    const double t0 = now_ms(cpu_clock);
    const int32_t a = reference.next(logits, reference_history, 1);
    const double t1 = now_ms(cpu_clock);
    const int32_t b = constrained.next(logits, history, 1);
    const double t2 = now_ms(cpu_clock);
    scratch = logits;
    const double t3 = now_ms(cpu_clock);
    alone.apply(scratch, history, 1);
    alone.accept(b);
    const double t4 = now_ms(cpu_clock);
    plain.ms.push_back(t1 - t0);
    grammar.ms.push_back(t2 - t1);
    processor.ms.push_back(t4 - t3);
    reference_history.push_back(a);
    const bool end = vocabulary.end_of_sequence[static_cast<size_t>(b)] != 0;
    if (!end) {
      history.push_back(b);
      const size_t begin = vocabulary.offsets[static_cast<size_t>(b)];
      text.append(vocabulary.bytes, begin, vocabulary.offsets[static_cast<size_t>(b) + 1] - begin);
    }
    if (end || static_cast<int64_t>(history.size()) > max_length) {
      ++documents;
      finished += end ? 1 : 0;
      if (documents == 1)
        std::cout << "first document (" << text.size() << " bytes): " << text.substr(0, 160)
                  << (text.size() > 160 ? "..." : "") << "\n";
      generated_bytes += static_cast<int64_t>(text.size());
      text.clear();
      history.assign(1, 0);
      constrained.reset();
      alone.reset();
    }
  }

  std::cout << std::fixed << std::setprecision(4);
  std::cout
      << "machine: " << cpu_model() << ", load average " << load_average() << "\n"
      << "vocabulary: synthetic GPT-2-like, " << vocabulary.size() << " ids ("
      << vocabulary.bytes.size() << " bytes of token text), end-of-sequence id "
      << vocabulary.size() - 1 << "\n"
      << "constraint: " << (regex.empty() ? grammar_file : "regex " + regex) << "\n"
      << "clock: " << (cpu_clock ? "thread CPU time" : "wall") << "\n"
      << "index build (trie + start state, once per grammar and vocabulary): " << build_ms
      << " ms\n"
      << "tokens timed: " << tokens << ", documents: " << documents << " (" << finished
      << " ended by end-of-sequence, the rest cut at --max-length " << max_length << ")\n\n"
      << "ms per token                              mean      p50       p90       p99       max\n";
  const auto row = [](const char* name, const Stats& st) {
    std::cout << name << std::setw(10) << st.mean() << std::setw(10) << st.quantile(0.5)
              << std::setw(10) << st.quantile(0.9) << std::setw(10) << st.quantile(0.99)
              << std::setw(10) << st.quantile(1.0) << "\n";
  };
  row("reference: temperature->top_k->sample", plain);
  row("constrained: grammar->same chain     ", grammar);
  row("grammar processor alone (apply+accept)", processor);
  std::cout << "grammar overhead per token: " << processor.mean() << " ms mean (processor alone), "
            << grammar.mean() - plain.mean()
            << " ms (constrained minus reference chain); reference chain " << plain.mean()
            << " ms\n";
  (void)generated_bytes;
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND(
    {"bench sampler",
     "grammar-constraint cost per token at a 50K vocabulary, beside the plain chain",
     run_bench_sampler});

}  // namespace patchbay::cli
