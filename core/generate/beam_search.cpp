// beam_search() (semantics in beam_search.hpp): the finished-hypothesis set, candidate
// selection over all beams and the step loop.
#include "generate/beam_search.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>

#include "common/error.hpp"

namespace patchbay::generate {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The num_beams best finished hypotheses (HF BeamHypotheses).
class FinishedSet {
 public:
  FinishedSet(const BeamSearchOptions& o) : o_(o) {}

  double normalise(double sum_log_probs, int64_t length) const {
    return sum_log_probs / std::pow(static_cast<double>(length), o_.length_penalty);
  }

  void add(std::vector<int32_t> tokens, double sum_log_probs, int64_t length, bool by_eos) {
    const double score = normalise(sum_log_probs, length);
    if (static_cast<int64_t>(hyps_.size()) >= o_.num_beams && score <= worst_) return;
    hyps_.push_back(BeamHypothesis{std::move(tokens), score, sum_log_probs, by_eos});
    if (static_cast<int64_t>(hyps_.size()) > o_.num_beams) {
      const auto worst = std::min_element(hyps_.begin(), hyps_.end(),
                                          [](const auto& a, const auto& b) { return a.score < b.score; });
      hyps_.erase(worst);
    }
    worst_ = std::min_element(hyps_.begin(), hyps_.end(), [](const auto& a, const auto& b) {
               return a.score < b.score;
             })->score;
  }

  // best_running: the best running sum of log-probabilities; generated: tokens generated.
  bool done(double best_running, int64_t generated) const {
    if (static_cast<int64_t>(hyps_.size()) < o_.num_beams) return false;
    switch (o_.early_stopping) {
      case EarlyStopping::kEarly:
        return true;
      case EarlyStopping::kHeuristic:
        return worst_ >= normalise(best_running, generated);
      case EarlyStopping::kNever: {
        const int64_t length = o_.length_penalty > 0 ? o_.max_new_tokens : generated;
        return worst_ >= normalise(best_running, length);
      }
    }
    return false;
  }

  std::vector<BeamHypothesis> best(int64_t n) const {
    std::vector<BeamHypothesis> sorted = hyps_;
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.score > b.score; });
    sorted.resize(std::min<size_t>(sorted.size(), static_cast<size_t>(n)));
    return sorted;
  }

 private:
  const BeamSearchOptions& o_;
  std::vector<BeamHypothesis> hyps_;
  double worst_ = std::numeric_limits<double>::infinity();
};

void log_softmax_in_place(std::vector<float>& x) {
  const float m = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (float v : x) sum += std::exp(static_cast<double>(v - m));
  const float lse = m + static_cast<float>(std::log(sum));
  for (float& v : x) v -= lse;
}

struct Candidate {
  double score;
  int64_t beam;
  int32_t token;
};

void check_options(const BeamSearchOptions& o, size_t prompt_len) {
  auto fail = [](const std::string& m) { throw Error(ErrorKind::kInvalidArgument, "beam search: " + m); };
  if (prompt_len == 0) fail("the prompt is empty: give at least one token to condition on");
  if (o.num_beams < 1) fail("num_beams = " + std::to_string(o.num_beams) + " must be >= 1");
  if (o.num_return_sequences < 1 || o.num_return_sequences > o.num_beams) {
    fail("num_return_sequences = " + std::to_string(o.num_return_sequences) + " must lie in [1, num_beams = " +
         std::to_string(o.num_beams) + "]");
  }
  if (o.max_new_tokens < 1) fail("max_new_tokens = " + std::to_string(o.max_new_tokens) + " must be >= 1");
  if (!std::isfinite(o.length_penalty)) fail("length_penalty must be finite");
}

}  // namespace

EarlyStopping early_stopping_from_name(const std::string& name) {
  if (name == "true") return EarlyStopping::kEarly;
  if (name == "false") return EarlyStopping::kHeuristic;
  if (name == "never") return EarlyStopping::kNever;
  throw Error(ErrorKind::kInvalidArgument,
              "early stopping '" + name + "' is not one of true (stop once num_beams hypotheses finished), false "
                                          "(stop when no running beam can beat them, HF's default) or never");
}

BeamSearchResult beam_search(BeamDecoder& decoder, std::span<const int32_t> prompt, const BeamSearchOptions& o,
                             const BeamProcessors* processors) {
  check_options(o, prompt.size());
  const auto is_eos = [&](int32_t t) { return std::find(o.eos_tokens.begin(), o.eos_tokens.end(), t) != o.eos_tokens.end(); };
  const size_t beams = static_cast<size_t>(o.num_beams);
  const size_t keep = static_cast<size_t>(std::max<int64_t>(2, 1 + static_cast<int64_t>(o.eos_tokens.size())) * o.num_beams);

  std::vector<std::vector<float>> logits(beams, decoder.prefill(prompt, o.num_beams));
  std::vector<std::vector<int32_t>> history(beams, std::vector<int32_t>(prompt.begin(), prompt.end()));
  std::vector<double> running(beams, kNegInf);
  running[0] = 0.0;
  std::vector<std::unique_ptr<BeamProcessors>> chains(beams);
  if (processors != nullptr)
    for (auto& c : chains) c = processors->clone();

  FinishedSet finished(o);
  BeamSearchResult result;
  bool done = false;
  int64_t generated = 0;
  std::vector<Candidate> candidates;
  while (!done && generated < o.max_new_tokens) {
    ++generated;
    candidates.clear();
    for (size_t b = 0; b < beams; ++b) {
      if (running[b] == kNegInf) continue;
      std::vector<float>& s = logits[b];
      log_softmax_in_place(s);
      if (chains[b]) chains[b]->apply(s, history[b], prompt.size());
      for (size_t t = 0; t < s.size(); ++t) {
        if (s[t] == -std::numeric_limits<float>::infinity()) continue;
        candidates.push_back(Candidate{running[b] + s[t], static_cast<int64_t>(b), static_cast<int32_t>(t)});
      }
    }
    if (candidates.empty()) break;  // every continuation of every beam is banned
    const size_t top = std::min(keep, candidates.size());
    std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(top), candidates.end(),
                      [](const Candidate& a, const Candidate& b) {
                        return a.score > b.score || (a.score == b.score && (a.beam < b.beam ||
                                                                            (a.beam == b.beam && a.token < b.token)));
                      });
    std::vector<Candidate> next;
    for (size_t rank = 0; rank < top && next.size() < beams; ++rank) {
      const Candidate& c = candidates[rank];
      if (is_eos(c.token)) {
        if (rank >= beams) continue;  // not among the best num_beams: dropped (HF)
        std::vector<int32_t> tokens(history[static_cast<size_t>(c.beam)].begin() + static_cast<std::ptrdiff_t>(prompt.size()),
                                    history[static_cast<size_t>(c.beam)].end());
        finished.add(std::move(tokens), c.score, generated, true);
      } else {
        next.push_back(c);
      }
    }
    done = finished.done(candidates[0].score, generated);
    if (done || next.empty() || generated == o.max_new_tokens) {
      // Running beams still count at the end (HF's finalize): the ones chosen this step.
      if (!done) {
        for (const Candidate& c : next) {
          std::vector<int32_t> tokens(history[static_cast<size_t>(c.beam)].begin() + static_cast<std::ptrdiff_t>(prompt.size()),
                                      history[static_cast<size_t>(c.beam)].end());
          tokens.push_back(c.token);
          finished.add(std::move(tokens), c.score, generated, false);
        }
      }
      break;
    }
    // Fewer candidates than beams (tiny vocabularies, constraints): the missing beams die.
    std::vector<int64_t> source(beams, next.front().beam);
    std::vector<int32_t> tokens(beams, next.front().token);
    std::vector<std::vector<int32_t>> new_history(beams);
    std::vector<std::unique_ptr<BeamProcessors>> new_chains(beams);
    for (size_t i = 0; i < beams; ++i) {
      const bool alive = i < next.size();
      const Candidate& c = alive ? next[i] : next.front();
      source[i] = c.beam;
      tokens[i] = c.token;
      running[i] = alive ? c.score : kNegInf;
      new_history[i] = history[static_cast<size_t>(c.beam)];
      new_history[i].push_back(c.token);
      if (chains[static_cast<size_t>(c.beam)]) {
        new_chains[i] = chains[static_cast<size_t>(c.beam)]->clone();
        new_chains[i]->accept(c.token);
      }
    }
    history = std::move(new_history);
    chains = std::move(new_chains);
    decoder.reorder(source);
    logits = decoder.step(tokens);
    ++result.steps;
  }
  result.sequences = finished.best(o.num_return_sequences);
  return result;
}

}  // namespace patchbay::generate
