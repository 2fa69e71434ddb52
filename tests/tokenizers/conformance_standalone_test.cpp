// The SDK tokenizer conformance kit run the way a third-party author runs it: component
// descriptors compiled into the test, the kit's standalone host, no Patchbay host at all.
#include <doctest/doctest.h>

#include <patchbay/testing/tokenizer_conformance.hpp>

#include "bpe_component.hpp"
#include "char_component.hpp"
#include "tokenizer_test_corpus.hpp"

namespace pt = patchbay::testing;

TEST_CASE("bpe component conforms (standalone host)") {
  pt::TokenizerConfig config(patchbay_bpe::kBpeTokenizer);
  config.set_int("vocab_size", 600);
  config.set_strings("special_tokens", {"<|endoftext|>", "<|pad|>"});
  pt::TokenizerConformanceOptions options;
  options.training_text = patchbay_test::small_training_corpus();
  pt::check_tokenizer_conformance(pt::factory_for(patchbay_bpe::kBpeTokenizer, config), options);
}

TEST_CASE("char component conforms (standalone host)") {
  pt::TokenizerConfig config(patchbay_char::kCharTokenizer);
  pt::TokenizerConformanceOptions options;
  options.training_text = patchbay_test::small_training_corpus();
  pt::check_tokenizer_conformance(pt::factory_for(patchbay_char::kCharTokenizer, config), options);
}

TEST_CASE("schema defaults reach the component") {
  pt::TokenizerConfig config(patchbay_bpe::kBpeTokenizer);
  const pb_config_view& view = config.view();
  REQUIRE(view.count == 6);  // vocab_size, special_tokens, encode_threads, vocab_file, merges_file, tokenizer_json
  CHECK(std::string(view.values[0].key) == "vocab_size");
  CHECK(view.values[0].int_value == 4096);
  REQUIRE(view.values[1].string_count == 1);
  CHECK(std::string(view.values[1].string_items[0]) == "<|endoftext|>");
}
