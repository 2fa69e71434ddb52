// generate() on a freshly built tiny model with the char tokenizer: exactly max_new_tokens
// tokens, deterministic under a seed, streaming pieces that add up to the text, greedy
// decoding through the KV cache equal to argmax over full forwards, and the sliding window
// when the context fills up.
#include "generate/generate.hpp"

#include <algorithm>
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

rt::TokenizerHandle& tokenizer() {
  static rt::TokenizerHandle* instance = [] {
    rt::ComponentConfig config(*model_test::registry().find(PB_KIND_TOKENIZER, "char").descriptor);
    auto* t =
        new rt::TokenizerHandle(model_test::registry().create_tokenizer("char", config.view()));
    t->train("In the beginning God created the heaven and the earth.");
    return t;
  }();
  return *instance;
}

std::unique_ptr<pm::LanguageModel> tiny_model(int64_t context_length) {
  pm::ModelOptions o = model_test::tiny_options();
  o.vocab_size = tokenizer().vocab_size();
  o.context_length = context_length;
  o.positional = pm::PositionalKind::kRotary;
  o.init_std = 0.5;  // a random model with peaked, varied distributions
  return pm::LanguageModel::build(o, {}, model_test::registry());
}

gen::GenerateResult run(pm::LanguageModel& model, uint64_t seed, int64_t n,
                        std::string* streamed = nullptr) {
  rt::SamplerChain chain =
      gen::build_sampler_chain(gen::default_chain_entries(seed), model_test::registry());
  gen::GenerateOptions options;
  options.max_new_tokens = n;
  options.stop_at_special = false;
  if (streamed != nullptr)
    options.on_text = [streamed](std::string_view piece) { streamed->append(piece); };
  return gen::generate(model, tokenizer(), "the earth", options, chain);
}

}  // namespace

TEST_CASE("generation gives exactly max_new_tokens tokens, deterministically under a seed") {
  auto model = tiny_model(64);
  std::string streamed;
  const gen::GenerateResult a = run(*model, 1, 20, &streamed);
  CHECK(a.tokens.size() == 20);
  CHECK(a.stop_reason == gen::StopReason::kMaxNewTokens);
  CHECK(a.prompt_tokens == 9);
  CHECK(a.text == tokenizer().decode(a.tokens));
  CHECK(streamed == a.text);
  const gen::GenerateResult b = run(*model, 1, 20);
  CHECK(b.tokens == a.tokens);
  const gen::GenerateResult c = run(*model, 2, 20);
  CHECK(c.tokens != a.tokens);
  CHECK(run(*model, 1, 0).tokens.empty());
}

TEST_CASE("greedy generation through the KV cache equals argmax over full forwards") {
  auto model = tiny_model(32);
  toml::array entries = gen::default_chain_entries(0);
  gen::apply_overrides(entries, {.temperature = 0.0});
  rt::SamplerChain chain = gen::build_sampler_chain(entries, model_test::registry());
  gen::GenerateOptions options;
  options.max_new_tokens = 12;
  options.stop_at_special = false;
  const gen::GenerateResult r = gen::generate(*model, tokenizer(), "God created", options, chain);
  REQUIRE(r.tokens.size() == 12);

  std::vector<int32_t> sequence = tokenizer().encode("God created");
  eng::NoGradGuard no_grad;
  for (int32_t generated : r.tokens) {
    const eng::Tensor tokens = eng::Tensor::from_data(
        sequence.data(), {1, static_cast<int64_t>(sequence.size())}, eng::DType::kI32);
    const std::vector<float> last = eng::narrow(model->forward(tokens, false).logits, 1,
                                                static_cast<int64_t>(sequence.size()) - 1, 1)
                                        .to_vector();
    const auto argmax =
        static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    CHECK(generated == argmax);
    sequence.push_back(generated);
  }
}

TEST_CASE("a full context slides: generation goes on past context_length") {
  auto model = tiny_model(16);
  const gen::GenerateResult r = run(*model, 3, 40);
  CHECK(r.tokens.size() == 40);
  CHECK(r.context_slides >= 3);  // 9 prompt + 40 new tokens through a window of 16, keeping 8
  std::string long_prompt(40, 'e');
  rt::SamplerChain chain =
      gen::build_sampler_chain(gen::default_chain_entries(0), model_test::registry());
  gen::GenerateOptions options;
  options.max_new_tokens = 3;
  options.stop_at_special = false;
  const gen::GenerateResult cut = gen::generate(*model, tokenizer(), long_prompt, options, chain);
  CHECK(cut.prompt_tokens_dropped == 40 - 15);
  CHECK(cut.tokens.size() == 3);
}

TEST_CASE("an empty prompt is refused") {
  auto model = tiny_model(16);
  rt::SamplerChain chain =
      gen::build_sampler_chain(gen::default_chain_entries(0), model_test::registry());
  CHECK_THROWS_WITH_AS(gen::generate(*model, tokenizer(), "", {}, chain),
                       doctest::Contains("prompt is empty"), patchbay::Error);
}

TEST_CASE("a stop string ends generation before it, and streaming never emits it") {
  auto model = tiny_model(64);
  const gen::GenerateResult free_run = run(*model, 1, 20);
  REQUIRE(free_run.text.size() >= 10);
  const std::string stop = free_run.text.substr(6, 3);
  const size_t at = free_run.text.find(stop);
  rt::SamplerChain chain =
      gen::build_sampler_chain(gen::default_chain_entries(1), model_test::registry());
  gen::GenerateOptions options;
  options.max_new_tokens = 20;
  options.stop_at_special = false;
  options.stop_strings = {"never appears", stop};
  std::string streamed;
  options.on_text = [&streamed](std::string_view piece) { streamed.append(piece); };
  const gen::GenerateResult r = gen::generate(*model, tokenizer(), "the earth", options, chain);
  CHECK(r.stop_reason == gen::StopReason::kStopString);
  CHECK(r.text == free_run.text.substr(0, at));
  CHECK(streamed == r.text);
  CHECK(r.tokens.size() == at + stop.size());  // one character per token: stopped at once
}
