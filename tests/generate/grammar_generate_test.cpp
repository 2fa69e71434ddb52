// Constrained generation end to end: a random-weights tiny model, the char tokenizer (whose
// 256 byte tokens let a character be split across tokens), and the grammar plugin loaded
// from its .so and handed the vocabulary by the host (sampler interface 1.1). Over many seeds
// every generation must stop at the end-of-sequence token and match the constraint, checked
// with std::regex as an independent oracle; beam search with the same constraint too.
#include <regex>
#include <string>
#include <vector>

#include "generate/beam_generate.hpp"
#include "generate/generate.hpp"
#include "generate/sampler_config.hpp"
#include "generate/sampler_vocabulary.hpp"
#include "model_fixture.hpp"

namespace gen = patchbay::generate;
namespace pm = patchbay::model;
namespace rt = patchbay::runtime;

namespace {

rt::Registry& registry_with_grammar() {
  static rt::Registry* r = [] {
    rt::Registry& base = model_test::registry();
    base.scan_file(std::filesystem::path(std::getenv("PATCHBAY_PLUGIN_PATH")) /
                   "sampler_grammar.so");
    for (const rt::RefusedPlugin& refused : base.refused()) FAIL_CHECK(refused.reason);
    return &base;
  }();
  return *r;
}

rt::TokenizerHandle& tokenizer() {
  static rt::TokenizerHandle* instance = [] {
    rt::ComponentConfig config(*registry_with_grammar().find(PB_KIND_TOKENIZER, "char").descriptor);
    auto* t =
        new rt::TokenizerHandle(registry_with_grammar().create_tokenizer("char", config.view()));
    t->train("In the beginning God created the heaven and the earth. 0123456789 + - * / ( ) é 中");
    return t;
  }();
  return *instance;
}

std::unique_ptr<pm::LanguageModel> tiny_model() {
  pm::ModelOptions o = model_test::tiny_options();
  o.vocab_size = tokenizer().vocab_size();
  o.context_length = 64;
  o.positional = pm::PositionalKind::kRotary;
  o.init_std = 0.5;
  return pm::LanguageModel::build(o, {}, registry_with_grammar());
}

rt::SamplerChain grammar_chain(toml::table grammar_entry, uint64_t seed) {
  grammar_entry.insert_or_assign("name", "grammar");
  toml::array entries{grammar_entry,
                      toml::table{{"name", "sample"}, {"seed", static_cast<int64_t>(seed)}}};
  rt::SamplerChain chain = gen::build_sampler_chain(entries, registry_with_grammar());
  REQUIRE(chain.needs_vocabulary());
  gen::give_vocabulary_if_needed(chain, tokenizer());
  return chain;
}

}  // namespace

TEST_CASE("sampled generations under a grammar always match it and end only when complete") {
  auto model = tiny_model();
  // Words, a bounded count, and non-ASCII characters the tokenizer may split into bytes.
  const std::string gbnf =
      "root ::= word (\" \" word){1,3} \".\"\n"
      "word ::= \"the\" | \"God\" | \"é\" [a-z]? | \"中\"{1,2} | [a-z]{1,4}\n";
  const std::regex oracle(
      "(the|God|é[a-z]?|(中){1,2}|[a-z]{1,4})( (the|God|é[a-z]?|(中){1,2}|[a-z]{1,4})){1,3}\\.");
  int split_characters = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    rt::SamplerChain chain = grammar_chain(toml::table{{"gbnf", gbnf}}, seed);
    gen::GenerateOptions options;
    options.max_new_tokens = 60;
    const gen::GenerateResult r = gen::generate(*model, tokenizer(), "In the", options, chain);
    CHECK_MESSAGE(r.stop_reason == gen::StopReason::kSpecialToken,
                  "seed " << seed << ": " << r.text);
    CHECK_MESSAGE(std::regex_match(r.text, oracle), "seed " << seed << ": \"" << r.text << "\"");
    for (int32_t id : r.tokens) {
      const std::string piece = tokenizer().decode(std::span<const int32_t>(&id, 1));
      if (piece.size() == 1 && static_cast<unsigned char>(piece[0]) >= 0x80) ++split_characters;
    }
  }
  MESSAGE("byte tokens of split characters sampled: " << split_characters);
}

TEST_CASE("a regex constraint through the host: numbers with an optional fraction") {
  auto model = tiny_model();
  const std::regex oracle("-?[1-9][0-9]{0,3}(\\.[0-9]{1,2})?");
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    rt::SamplerChain chain =
        grammar_chain(toml::table{{"regex", "-?[1-9][0-9]{0,3}(\\.[0-9]{1,2})?"}}, seed);
    gen::GenerateOptions options;
    options.max_new_tokens = 20;
    const gen::GenerateResult r = gen::generate(*model, tokenizer(), "God", options, chain);
    CHECK_MESSAGE(r.stop_reason == gen::StopReason::kSpecialToken,
                  "seed " << seed << ": " << r.text);
    CHECK_MESSAGE(std::regex_match(r.text, oracle), "seed " << seed << ": \"" << r.text << "\"");
  }
}

TEST_CASE("beam search composes with the grammar: every returned beam matches") {
  auto model = tiny_model();
  const rt::SamplerChain chain = grammar_chain(
      toml::table{{"gbnf", "root ::= (\"the\" | \"God\" | [a-z]{2}) \" \" [0-9]{1,3} \".\"\n"}}, 0);
  gen::BeamSearchOptions beam;
  beam.num_beams = 4;
  beam.num_return_sequences = 4;
  beam.max_new_tokens = 12;
  const gen::BeamGenerateResult r =
      gen::beam_generate(*model, tokenizer(), "In the", beam, true, &chain);
  REQUIRE(r.sequences.size() == 4);
  const std::regex oracle("(the|God|[a-z]{2}) [0-9]{1,3}\\.");
  for (const gen::BeamText& s : r.sequences) {
    CHECK_MESSAGE(s.finished, s.text);
    CHECK_MESSAGE(std::regex_match(s.text, oracle), "\"" << s.text << "\"");
  }
}

TEST_CASE("a grammar sampler without the vocabulary fails with a message saying so") {
  toml::array entries{toml::table{{"name", "grammar"}, {"regex", "a+"}},
                      toml::table{{"name", "greedy"}}};
  rt::SamplerChain chain = gen::build_sampler_chain(entries, registry_with_grammar());
  std::vector<float> logits(static_cast<size_t>(tokenizer().vocab_size()), 0.0f);
  CHECK_THROWS_WITH(chain.next(logits, std::vector<int32_t>{1}, 1),
                    doctest::Contains("before set_vocabulary"));
  toml::array bad{toml::table{{"name", "grammar"}, {"gbnf", "root ::= \"a\" b\n"}},
                  toml::table{{"name", "greedy"}}};
  CHECK_THROWS_WITH(gen::build_sampler_chain(bad, registry_with_grammar()),
                    doctest::Contains("line 1, column 14: rule 'b' is used but never defined"));
}
