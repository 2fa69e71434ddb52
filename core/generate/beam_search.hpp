// Beam search with the semantics of Hugging Face's `generate(num_beams=...)`
// (transformers BeamSearchScorer / BeamHypotheses), over any decoder that can prefill a
// prompt, step one token per beam and reorder its per-beam decoding states.
//
//   logits = decoder.prefill(prompt, num_beams)                           every beam = prompt
//   running scores: beam 0 = 0, the others -inf (step 1 expands beam 0 only)
//   each step (cur = tokens generated after this step, 1, 2, ...):
//     per beam b: s_b = log_softmax(logits_b); processors(s_b, history_b) (penalties, n-grams,
//                 constraints, in chain order, on log-probabilities as HF does); s_b += score_b
//     candidates = the best max(2, 1 + |eos|) * num_beams of all (b, token), by score
//     in rank order: an EOS candidate of rank < num_beams finishes hypothesis history_b (EOS
//       not included) with score / cur^length_penalty; an EOS candidate of lower rank is
//       dropped; other candidates fill the next num_beams running beams
//     stop when the finished set is done (below), or after max_new_tokens steps
//   at the end, running beams join the finished set with score / generated^length_penalty;
//   the best num_return_sequences are returned, best first.
// The finished set keeps the num_beams best hypotheses; it is done once it holds num_beams
// and, by early_stopping:
//   kEarly ("true")      at once;
//   kHeuristic ("false") when its worst score >= best running score / cur^length_penalty;
//   kNever ("never")     when its worst score >= best running score / L^length_penalty with
//                        L = max_new_tokens if length_penalty > 0 (the best attainable), else cur.
// Lengths count generated tokens (the prompt excluded, as HF since 4.36), EOS included.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace patchbay::generate {

enum class EarlyStopping { kEarly, kHeuristic, kNever };

// "true" | "false" | "never" (HF's values) -> EarlyStopping; Error(kInvalidArgument) otherwise.
EarlyStopping early_stopping_from_name(const std::string& name);

struct BeamSearchOptions {
  int64_t num_beams = 4;             // >= 1
  double length_penalty = 1.0;       // exponent on the generated length (> 0 favours long)
  EarlyStopping early_stopping = EarlyStopping::kHeuristic;
  int64_t num_return_sequences = 1;  // 1 <= n <= num_beams
  int64_t max_new_tokens = 50;       // >= 1
  std::vector<int32_t> eos_tokens;   // end-of-sequence ids (may be empty)
};

// What beam search drives. Tokens and logits are per beam, beam order as the last reorder.
class BeamDecoder {
 public:
  virtual ~BeamDecoder() = default;
  // Starts `beams` sequences, each holding the prompt; returns the logits [V] of the next
  // token (the same for every beam).
  virtual std::vector<float> prefill(std::span<const int32_t> prompt, int64_t beams) = 0;
  // Beam i takes the decoding state of beam source[i] (source.size() == beams).
  virtual void reorder(std::span<const int64_t> source) = 0;
  // Appends tokens[i] to beam i; returns each beam's next-token logits [beams][V].
  virtual std::vector<std::vector<float>> step(std::span<const int32_t> tokens) = 0;
};

// Rewrites one beam's log-probabilities in place given its history (prompt + generated, the
// first prompt_len being the prompt) — the chain's processors; clone() copies any state
// (a stateful processor follows its beam through reorders), accept() records the chosen token.
class BeamProcessors {
 public:
  virtual ~BeamProcessors() = default;
  virtual void apply(std::span<float> log_probs, std::span<const int32_t> history, size_t prompt_len) = 0;
  virtual void accept(int32_t token) = 0;
  virtual std::unique_ptr<BeamProcessors> clone() const = 0;
};

struct BeamHypothesis {
  std::vector<int32_t> tokens;  // generated ids (prompt and a finishing EOS excluded)
  double score = 0;             // sum of log-probabilities / length^length_penalty
  double sum_log_probs = 0;
  bool finished_by_eos = false;
};

struct BeamSearchResult {
  std::vector<BeamHypothesis> sequences;  // num_return_sequences, best first
  int64_t steps = 0;                      // decoder steps run
};

// Throws Error(kInvalidArgument) for options out of range or an empty prompt. `processors`
// is nullable (no processors).
BeamSearchResult beam_search(BeamDecoder& decoder, std::span<const int32_t> prompt, const BeamSearchOptions& options,
                             const BeamProcessors* processors);

}  // namespace patchbay::generate
