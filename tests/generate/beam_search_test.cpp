// beam_search() on hand-built toy distributions: a case where greedy and 2-beam search
// disagree, the length penalty flipping the winner, the three early-stopping behaviours on
// cases where they give different answers, an EOS candidate outside the best num_beams being
// dropped, num_return_sequences ordering, a processor banning continuations per beam (with its
// state following the beam), the decoder's reorders, and option checks.
#include "generate/beam_search.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "common/error.hpp"

namespace gen = patchbay::generate;

namespace {

constexpr int32_t kEos = 0, kA = 1, kB = 2, kC = 3;
using Dist = std::map<int32_t, double>;  // token -> probability (missing: impossible)

// A decoder whose next-token distribution is a function of the generated tokens (prompt = [9]).
class ToyDecoder : public gen::BeamDecoder {
 public:
  explicit ToyDecoder(std::function<Dist(const std::vector<int32_t>&)> table) : table_(std::move(table)) {}
  std::vector<float> prefill(std::span<const int32_t>, int64_t beams) override {
    beams_.assign(static_cast<size_t>(beams), {});
    return logits({});
  }
  void reorder(std::span<const int64_t> source) override {
    std::vector<std::vector<int32_t>> next;
    for (int64_t s : source) next.push_back(beams_.at(static_cast<size_t>(s)));
    beams_ = next;
    ++reorders;
  }
  std::vector<std::vector<float>> step(std::span<const int32_t> tokens) override {
    std::vector<std::vector<float>> out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      beams_[i].push_back(tokens[i]);
      out.push_back(logits(beams_[i]));
    }
    return out;
  }
  int reorders = 0;

 private:
  std::vector<float> logits(const std::vector<int32_t>& generated) const {
    std::vector<float> l(4, -std::numeric_limits<float>::infinity());
    for (const auto& [token, p] : table_(generated)) l[static_cast<size_t>(token)] = static_cast<float>(std::log(p));
    return l;
  }
  std::function<Dist(const std::vector<int32_t>&)> table_;
  std::vector<std::vector<int32_t>> beams_;
};

const std::vector<int32_t> kPrompt = {9};

gen::BeamSearchOptions options(int64_t beams, int64_t max_new, double length_penalty = 1.0,
                               gen::EarlyStopping stop = gen::EarlyStopping::kHeuristic) {
  gen::BeamSearchOptions o;
  o.num_beams = beams;
  o.max_new_tokens = max_new;
  o.length_penalty = length_penalty;
  o.early_stopping = stop;
  o.eos_tokens = {kEos};
  return o;
}

// Greedy takes A (0.5) then at best 0.35; B (0.4) then B (0.9) is worth 0.36.
Dist greedy_trap(const std::vector<int32_t>& g) {
  if (g.empty()) return {{kA, 0.5}, {kB, 0.4}, {kEos, 0.1}};
  if (g.size() == 1 && g[0] == kA) return {{kA, 0.35}, {kB, 0.35}, {kEos, 0.3}};
  if (g.size() == 1 && g[0] == kB) return {{kB, 0.9}, {kEos, 0.1}};
  return {{kEos, 1.0}};
}

// [A, EOS] has the larger total log-probability (-0.734) but [B, B, EOS] (-1.022 over 3) the
// larger per-token one.
Dist length_choice(const std::vector<int32_t>& g) {
  if (g.empty()) return {{kA, 0.6}, {kB, 0.4}};
  if (g.size() == 1 && g[0] == kA) return {{kEos, 0.8}, {kA, 0.1}, {kB, 0.1}};
  if (g.size() == 1 && g[0] == kB) return {{kB, 0.9}, {kEos, 0.1}};
  return {{kEos, 1.0}};
}

// After A or B, EOS (p_a, p_b) beats C; after C only EOS. Both EOS hypotheses finish at step 2.
std::function<Dist(const std::vector<int32_t>&)> two_finish(double p_a, double p_b) {
  return [=](const std::vector<int32_t>& g) -> Dist {
    if (g.empty()) return {{kA, 0.5}, {kB, 0.5}};
    if (g.size() == 1) {
      const double p = g[0] == kA ? p_a : p_b;
      return {{kEos, p}, {kC, 1 - p}};
    }
    return {{kEos, 1.0}};
  };
}

std::vector<int32_t> best(const gen::BeamSearchResult& r) { return r.sequences.at(0).tokens; }

}  // namespace

TEST_CASE("2-beam search finds the sequence greedy misses") {
  ToyDecoder greedy(greedy_trap), beam(greedy_trap);
  const auto g = gen::beam_search(greedy, kPrompt, options(1, 2), nullptr);
  CHECK(best(g) == std::vector<int32_t>{kA, kA});  // A (0.5) then A/B tie (0.35): lowest id
  const auto b = gen::beam_search(beam, kPrompt, options(2, 2), nullptr);
  CHECK(best(b) == std::vector<int32_t>{kB, kB});
  CHECK(b.sequences[0].sum_log_probs == doctest::Approx(std::log(0.4) + std::log(0.9)));
  CHECK(b.sequences[0].score == doctest::Approx((std::log(0.4) + std::log(0.9)) / 2));
  CHECK(beam.reorders == 1);  // before step 2 (step 1 expands the prefilled beams)
}

TEST_CASE("the length penalty decides between a short and a long hypothesis") {
  ToyDecoder d0(length_choice), d1(length_choice);
  const auto none = gen::beam_search(d0, kPrompt, options(2, 5, 0.0), nullptr);
  CHECK(best(none) == std::vector<int32_t>{kA});  // EOS not included in the tokens
  CHECK(none.sequences[0].finished_by_eos);
  CHECK(none.sequences[0].score == doctest::Approx(std::log(0.6) + std::log(0.8)));
  const auto per_token = gen::beam_search(d1, kPrompt, options(2, 5, 1.0), nullptr);
  CHECK(best(per_token) == std::vector<int32_t>{kB, kB});
  CHECK(per_token.sequences[0].score == doctest::Approx((std::log(0.4) + std::log(0.9)) / 3));
}

TEST_CASE("early stopping: true stops at num_beams finished, false by the heuristic, never by the bound") {
  SUBCASE("true vs false: p(EOS) 0.6 after A, 0.55 after B") {
    ToyDecoder early(two_finish(0.6, 0.55)), heuristic(two_finish(0.6, 0.55));
    // After step 2, [A] scores -0.602 and [B] -0.6455; the best running total is -1.204, so the
    // heuristic bound -1.204 / 2 = -0.602 exceeds the worst finished: it goes on, and [B, C]
    // (-1.492 / 3 = -0.497) wins.
    CHECK(best(gen::beam_search(early, kPrompt, options(2, 5, 1.0, gen::EarlyStopping::kEarly), nullptr)) ==
          std::vector<int32_t>{kA});
    CHECK(best(gen::beam_search(heuristic, kPrompt, options(2, 5, 1.0, gen::EarlyStopping::kHeuristic), nullptr)) ==
          std::vector<int32_t>{kB, kC});
  }
  SUBCASE("false vs never: p(EOS) 0.6 after both") {
    ToyDecoder heuristic(two_finish(0.6, 0.6)), never(two_finish(0.6, 0.6));
    // Worst finished -0.602 == -1.204 / 2: the heuristic stops; never compares with the best
    // attainable -1.204 / 5 and goes on to [A, C] (-1.609 / 3 = -0.536).
    CHECK(best(gen::beam_search(heuristic, kPrompt, options(2, 5, 1.0, gen::EarlyStopping::kHeuristic), nullptr)) ==
          std::vector<int32_t>{kA});
    const auto r = gen::beam_search(never, kPrompt, options(2, 5, 1.0, gen::EarlyStopping::kNever), nullptr);
    CHECK(best(r) == std::vector<int32_t>{kA, kC});
    CHECK(r.sequences[0].score == doctest::Approx((std::log(0.5) + std::log(0.4)) / 3));
  }
}

TEST_CASE("an EOS candidate below the best num_beams is dropped") {
  // Two EOS ids. Step 1 ranks A (0.5), EOS0 (0.3), EOS3 (0.12), B (0.08): EOS0 (rank 1) finishes
  // the empty hypothesis, EOS3 (rank 2 >= num_beams) is dropped. With early stopping "true"
  // a second finished hypothesis would end the search at once; instead step 2 runs and [A]
  // finishes (-0.693 / 2) as the best.
  static constexpr int32_t kEos3 = 3;
  ToyDecoder d([](const std::vector<int32_t>& g) {
    if (g.empty()) return Dist{{kA, 0.5}, {kEos, 0.3}, {kEos3, 0.12}, {kB, 0.08}};
    return Dist{{kEos, 1.0}};
  });
  auto o = options(2, 5, 1.0, gen::EarlyStopping::kEarly);
  o.eos_tokens = {kEos, kEos3};
  o.num_return_sequences = 2;
  const auto r = gen::beam_search(d, kPrompt, o, nullptr);
  REQUIRE(r.sequences.size() == 2);
  CHECK(r.sequences[0].tokens == std::vector<int32_t>{kA});
  CHECK(r.sequences[0].score == doctest::Approx(std::log(0.5) / 2));
  CHECK(r.sequences[1].tokens.empty());
  CHECK(r.sequences[1].score == doctest::Approx(std::log(0.3)));
  CHECK(r.steps == 1);
}

TEST_CASE("running beams join the finished set at max length, best first") {
  ToyDecoder d([](const std::vector<int32_t>&) { return Dist{{kA, 0.5}, {kB, 0.45}, {kEos, 0.05}}; });
  auto o = options(2, 1);
  o.num_return_sequences = 2;
  const auto r = gen::beam_search(d, kPrompt, o, nullptr);
  REQUIRE(r.sequences.size() == 2);
  CHECK(r.sequences[0].tokens == std::vector<int32_t>{kA});
  CHECK(r.sequences[1].tokens == std::vector<int32_t>{kB});
  CHECK_FALSE(r.sequences[0].finished_by_eos);
  CHECK(r.sequences[1].score == doctest::Approx(std::log(0.45)));
}

TEST_CASE("processors act per beam and their state follows the beam") {
  // Bans a token that the beam already produced (a 1-gram no-repeat rule), counting accepts to
  // check that clones carry the state along reorders.
  struct NoRepeat : gen::BeamProcessors {
    int accepted = 0;
    void apply(std::span<float> s, std::span<const int32_t> history, size_t prompt_len) override {
      CHECK(static_cast<int>(history.size() - prompt_len) == accepted);
      for (size_t i = prompt_len; i < history.size(); ++i)
        s[static_cast<size_t>(history[i])] = -std::numeric_limits<float>::infinity();
    }
    void accept(int32_t) override { ++accepted; }
    std::unique_ptr<gen::BeamProcessors> clone() const override { return std::make_unique<NoRepeat>(*this); }
  };
  NoRepeat no_repeat;
  ToyDecoder d(greedy_trap);
  // B B is banned; the best is now B then EOS (0.04) vs A then B (0.175) or A then EOS (0.15).
  const auto r = gen::beam_search(d, kPrompt, options(2, 3, 0.0), &no_repeat);
  CHECK(best(r) == std::vector<int32_t>{kA, kB});
}

TEST_CASE("beam search options are checked") {
  ToyDecoder d(greedy_trap);
  auto o = options(2, 3);
  o.num_return_sequences = 3;
  CHECK_THROWS_WITH_AS(gen::beam_search(d, kPrompt, o, nullptr), doctest::Contains("num_return_sequences"),
                       patchbay::Error);
  CHECK_THROWS_WITH_AS(gen::beam_search(d, {}, options(2, 3), nullptr), doctest::Contains("prompt is empty"),
                       patchbay::Error);
  CHECK_THROWS_WITH_AS(gen::early_stopping_from_name("maybe"), doctest::Contains("never"), patchbay::Error);
}
