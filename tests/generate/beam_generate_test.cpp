// Beam search on a freshly built tiny model with the char tokenizer: decoding through the KV
// cache with per-beam state reordering (SDK attention 1.1) gives the same beams and scores as
// re-running the full forward of every beam at every step, and as rebuilding the state by
// re-prefilling (the path for layers that cannot reorder); a no-repeat-n-gram processor from
// the chain acts per beam; the context limit is refused with a message.
#include "generate/beam_generate.hpp"

#include <set>
#include <string>
#include <vector>

#include "engine/ops.hpp"
#include "generate/sampler_config.hpp"
#include "model_fixture.hpp"

namespace eng = patchbay::engine;
namespace gen = patchbay::generate;
namespace pm = patchbay::model;
namespace rt = patchbay::runtime;

namespace {

rt::TokenizerHandle& beam_tokenizer() {
  static rt::TokenizerHandle* instance = [] {
    rt::ComponentConfig config(*model_test::registry().find(PB_KIND_TOKENIZER, "char").descriptor);
    auto* t = new rt::TokenizerHandle(model_test::registry().create_tokenizer("char", config.view()));
    t->train("In the beginning God created the heaven and the earth.");
    return t;
  }();
  return *instance;
}

std::unique_ptr<pm::LanguageModel> beam_model(pm::PositionalKind positional) {
  pm::ModelOptions o = model_test::tiny_options();
  o.vocab_size = beam_tokenizer().vocab_size();
  o.context_length = 32;
  o.positional = positional;
  o.init_std = 0.5;  // peaked, varied distributions: beams diverge
  return pm::LanguageModel::build(o, {}, model_test::registry());
}

// The reference: every step runs forward() over each beam's whole sequence (no cache).
class FullForwardDecoder : public gen::BeamDecoder {
 public:
  explicit FullForwardDecoder(pm::LanguageModel& m) : model_(m) {}
  std::vector<float> prefill(std::span<const int32_t> prompt, int64_t beams) override {
    history_.assign(static_cast<size_t>(beams), std::vector<int32_t>(prompt.begin(), prompt.end()));
    return last(history_.front());
  }
  void reorder(std::span<const int64_t> source) override {
    std::vector<std::vector<int32_t>> next;
    for (int64_t s : source) next.push_back(history_.at(static_cast<size_t>(s)));
    history_ = next;
  }
  std::vector<std::vector<float>> step(std::span<const int32_t> tokens) override {
    std::vector<std::vector<float>> out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      history_[i].push_back(tokens[i]);
      out.push_back(last(history_[i]));
    }
    return out;
  }

 private:
  std::vector<float> last(const std::vector<int32_t>& ids) {
    eng::NoGradGuard no_grad;
    const eng::Tensor t = eng::Tensor::from_data(ids.data(), {1, static_cast<int64_t>(ids.size())}, eng::DType::kI32);
    const eng::Tensor logits = model_.forward(t, false).logits;
    return eng::narrow(logits, 1, logits.size(1) - 1, 1).to_vector();
  }
  pm::LanguageModel& model_;
  std::vector<std::vector<int32_t>> history_;
};

gen::BeamSearchOptions beam_options() {
  gen::BeamSearchOptions o;
  o.num_beams = 3;
  o.num_return_sequences = 3;
  o.max_new_tokens = 12;
  o.early_stopping = gen::EarlyStopping::kNever;
  return o;
}

void check_same(const gen::BeamSearchResult& a, const gen::BeamSearchResult& b) {
  REQUIRE(a.sequences.size() == b.sequences.size());
  for (size_t i = 0; i < a.sequences.size(); ++i) {
    CAPTURE(i);
    CHECK(a.sequences[i].tokens == b.sequences[i].tokens);
    CHECK(a.sequences[i].score == doctest::Approx(b.sequences[i].score).epsilon(1e-4));
  }
}

}  // namespace

TEST_CASE("beam decoding with the KV cache equals re-running the full forward for each beam") {
  for (pm::PositionalKind positional : {pm::PositionalKind::kLearned, pm::PositionalKind::kRotary}) {
    auto model = beam_model(positional);
    const std::vector<int32_t> prompt = beam_tokenizer().encode("the earth");
    FullForwardDecoder full(*model);
    gen::LanguageModelBeamDecoder cached(*model, 32), rebuilt(*model, 32, /*use_state_reorder=*/false);
    const auto reference = gen::beam_search(full, prompt, beam_options(), nullptr);
    const auto with_reorder = gen::beam_search(cached, prompt, beam_options(), nullptr);
    const auto with_rebuild = gen::beam_search(rebuilt, prompt, beam_options(), nullptr);
    check_same(reference, with_reorder);
    check_same(reference, with_rebuild);
    CHECK(cached.rebuilds() == 0);  // the dense layer reorders its cache in place of a rebuild
    CHECK(rebuilt.rebuilds() == with_rebuild.steps);
    // The beams really differ (the test would be vacuous with one repeated sequence).
    std::set<std::vector<int32_t>> distinct;
    for (const auto& s : reference.sequences) distinct.insert(s.tokens);
    CHECK(distinct.size() == 3);
  }
}

TEST_CASE("a chain's no-repeat-n-gram processor acts on every beam") {
  auto model = beam_model(pm::PositionalKind::kRotary);
  toml::array entries;
  entries.push_back(toml::table{{"name", "no_repeat_ngram"}, {"n", 2}, {"include_prompt", false}});
  entries.push_back(toml::table{{"name", "greedy"}});
  const rt::SamplerChain chain = gen::build_sampler_chain(entries, model_test::registry());
  auto options = beam_options();
  options.max_new_tokens = 20;
  const gen::BeamGenerateResult r = gen::beam_generate(*model, beam_tokenizer(), "the earth", options, false, &chain);
  REQUIRE(r.sequences.size() == 3);
  for (const gen::BeamText& s : r.sequences) {
    std::set<std::pair<int32_t, int32_t>> bigrams;
    for (size_t i = 1; i < s.tokens.size(); ++i) {
      CAPTURE(s.text);
      CHECK(bigrams.insert({s.tokens[i - 1], s.tokens[i]}).second);
    }
  }
}

TEST_CASE("beam_generate refuses a prompt and length beyond the context") {
  auto model = beam_model(pm::PositionalKind::kLearned);
  auto options = beam_options();
  options.max_new_tokens = 30;
  CHECK_THROWS_WITH_AS(gen::beam_generate(*model, beam_tokenizer(), "the earth", options, false, nullptr),
                       doctest::Contains("does not slide the window"), patchbay::Error);
}
