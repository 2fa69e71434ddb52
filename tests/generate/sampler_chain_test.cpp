// Sampler chains from config entries over the real sampler_basic plugin: the default chain,
// entry and shape errors (each naming generate.chain[i]), command-line overrides, and the
// chain's run / clone / reset behaviour.
#include <cmath>
#include <string>
#include <vector>

#include "generate/sampler_config.hpp"
#include "model_fixture.hpp"

namespace gen = patchbay::generate;
namespace rt = patchbay::runtime;

namespace {

toml::array entries_of(const std::string& text) {
  const toml::table document = toml::parse(text);
  std::optional<toml::array> entries = gen::chain_entries_from_toml(document);
  REQUIRE(entries.has_value());
  return *entries;
}

std::string names(const toml::array& entries) {
  std::string s;
  for (const toml::node& e : entries) {
    if (!s.empty()) s.push_back(',');
    s.append(*e.as_table()->get("name")->value<std::string>());
  }
  return s;
}

std::vector<float> test_logits() { return {0.5f, 2.0f, -1.0f, 1.5f, 0.0f, 3.0f, -INFINITY, 1.0f}; }

}  // namespace

TEST_CASE("the default chain is temperature 0.8 -> top_k 40 -> sample(seed)") {
  rt::SamplerChain chain =
      gen::build_sampler_chain(gen::default_chain_entries(5), model_test::registry());
  CHECK(chain.describe() == "temperature(temperature=0.8) -> top_k(k=40) -> sample(seed=5)");
  CHECK(chain.size() == 3);
  CHECK(chain.entries().back().is_selector());
}

TEST_CASE("chain entries from TOML keep their order and settings") {
  const toml::array entries = entries_of(R"(
[[generate.chain]]
name = "repetition_penalty"
penalty = 1.2
[[generate.chain]]
name = "top_p"
p = 0.9
[[generate.chain]]
name = "greedy"
)");
  rt::SamplerChain chain = gen::build_sampler_chain(entries, model_test::registry());
  CHECK(chain.describe() == "repetition_penalty(penalty=1.2) -> top_p(p=0.9) -> greedy()");
  const std::vector<float> logits = test_logits();
  const std::vector<int32_t> history = {1, 2};
  CHECK(chain.next(logits, history, 2) == 5);  // argmax; 5 was not seen
}

TEST_CASE("chain shape errors name the entry") {
  auto build = [](const std::string& text) {
    return gen::build_sampler_chain(entries_of(text), model_test::registry());
  };
  CHECK_THROWS_WITH_AS(build("[[generate.chain]]\nname = \"temperature\"\n"),
                       doctest::Contains("has no selector"), patchbay::Error);
  CHECK_THROWS_WITH_AS(
      build("[[generate.chain]]\nname = \"sample\"\n[[generate.chain]]\nname = \"top_k\"\n"),
      doctest::Contains("generate.chain[0] (name = \"sample\") is a selector but is not the last"),
      patchbay::Error);
  CHECK_THROWS_WITH_AS(
      build("[[generate.chain]]\nname = \"greedy\"\n[[generate.chain]]\nname = \"sample\"\n"),
      doctest::Contains("generate.chain[0]"), patchbay::Error);
  CHECK_THROWS_AS(gen::build_sampler_chain(toml::array{}, model_test::registry()), patchbay::Error);
}

TEST_CASE("chain entry errors name the entry, the component and the key") {
  auto build = [](const std::string& text) {
    return gen::build_sampler_chain(entries_of(text), model_test::registry());
  };
  CHECK_THROWS_WITH_AS(
      build(
          "[[generate.chain]]\nname = \"top_k\"\nkk = 3\n[[generate.chain]]\nname = \"sample\"\n"),
      doctest::Contains("generate.chain[0] (name = \"top_k\")"), patchbay::Error);
  CHECK_THROWS_WITH_AS(
      build(
          "[[generate.chain]]\nname = \"top_k\"\nkk = 3\n[[generate.chain]]\nname = \"sample\"\n"),
      doctest::Contains("kk"), patchbay::Error);
  CHECK_THROWS_WITH_AS(build("[[generate.chain]]\nname = \"top_k\"\nk = "
                             "\"forty\"\n[[generate.chain]]\nname = \"sample\"\n"),
                       doctest::Contains("generate.chain[0]"), patchbay::Error);
  CHECK_THROWS_WITH_AS(
      build("[[generate.chain]]\nname = \"top_q\"\n[[generate.chain]]\nname = \"sample\"\n"),
      doctest::Contains("generate.chain[0] (name = \"top_q\")"), patchbay::Error);
  CHECK_THROWS_WITH_AS(build("[[generate.chain]]\nk = 3\n"), doctest::Contains("missing name"),
                       patchbay::Error);
  CHECK_THROWS_WITH_AS(gen::chain_entries_from_toml(toml::parse("[generate]\nchain = 3\n")),
                       doctest::Contains("array of tables"), patchbay::Error);
  CHECK_FALSE(gen::chain_entries_from_toml(toml::parse("[generate]\n")).has_value());
}

TEST_CASE("command-line overrides edit the chain") {
  toml::array a = gen::default_chain_entries(1);
  gen::apply_overrides(a, {.top_k = 5, .top_p = 0.9, .min_p = 0.05, .seed = 9});
  CHECK(names(a) == "temperature,top_k,top_p,min_p,sample");
  rt::SamplerChain chain = gen::build_sampler_chain(a, model_test::registry());
  CHECK(chain.describe() ==
        "temperature(temperature=0.8) -> top_k(k=5) -> top_p(p=0.9) -> min_p(min_p=0.05) -> "
        "sample(seed=9)");

  toml::array greedy = gen::default_chain_entries(1);
  gen::apply_overrides(greedy, {.temperature = 0.0, .seed = 3});
  CHECK(names(greedy) == "top_k,greedy");

  toml::array penalised = gen::default_chain_entries(1);
  gen::apply_overrides(penalised, {.temperature = 1.5, .repetition_penalty = 1.3});
  CHECK(names(penalised) == "repetition_penalty,temperature,top_k,sample");
  CHECK(*penalised.get(1)->as_table()->get("temperature")->value<double>() == 1.5);
}

TEST_CASE("a cloned chain continues exactly as its original; reset repeats the draws") {
  rt::SamplerChain chain =
      gen::build_sampler_chain(gen::default_chain_entries(11), model_test::registry());
  const std::vector<float> logits = test_logits();
  const std::vector<int32_t> history = {0};
  for (int i = 0; i < 3; ++i) chain.next(logits, history, 1);
  rt::SamplerChain copy = chain.clone();
  std::vector<int32_t> a, b;
  for (int i = 0; i < 20; ++i) a.push_back(chain.next(logits, history, 1));
  for (int i = 0; i < 20; ++i) b.push_back(copy.next(logits, history, 1));
  CHECK(a == b);
  chain.reset();
  std::vector<int32_t> first, again;
  for (int i = 0; i < 23; ++i) first.push_back(chain.next(logits, history, 1));
  chain.reset();
  for (int i = 0; i < 23; ++i) again.push_back(chain.next(logits, history, 1));
  CHECK(first == again);
  for (int32_t t : first) CHECK(t != 6);  // -inf logit is never chosen
}
