// The SDK's attention conformance kit on attention_dense, loaded as the real .so through the
// host registry (the way the trainer loads it).
#include <doctest/doctest.h>

#include "attention_fixture.hpp"

namespace pt = patchbay::testing;

TEST_CASE("attention 'dense' passes the attention conformance kit") {
  pt::AttentionConformanceOptions options;
  options.causality_tolerance = 0.0;  // bit for bit (issue 39: batch invariance)
  pt::check_attention_conformance(
      attention_test::dense_factory([](patchbay::runtime::ComponentConfig&) {}), options);
}

TEST_CASE("attention 'dense' with dropout configured still conforms (dropout is training-only)") {
  pt::AttentionConformanceOptions options;
  options.causality_tolerance = 0.0;  // bit for bit (issue 39: batch invariance)
  options.seq_len = 9;
  options.d_model = 24;
  options.n_heads = 3;
  options.prefill = 2;
  options.decode_chunk = 4;
  options.seed = 99;
  pt::check_attention_conformance(
      attention_test::dense_factory(
          [](patchbay::runtime::ComponentConfig& c) { c.set_float("dropout", 0.5); }),
      options);
}

TEST_CASE("attention 'dense' with a sliding window conforms (causality, decoding, gradients)") {
  pt::AttentionConformanceOptions options;
  options.causality_tolerance = 0.0;  // bit for bit (issue 39: batch invariance)
  options.seq_len = 14;
  options.prefill = 6;  // the window (4) ends inside the prefill, then slides over the cache
  options.cross_refused_by_configuration = true;  // a window has no meaning across sequences
  pt::check_attention_conformance(
      attention_test::dense_factory(
          [](patchbay::runtime::ComponentConfig& c) { c.set_int("window", 4); }),
      options);
}
