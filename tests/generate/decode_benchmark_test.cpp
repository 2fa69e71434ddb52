// The pieces of `patchbay bench generate`: the bytes a decode step reads (hand-counted for a
// small model, tied and untied, f32 and bf16 weights), the KV-cache bytes, the read-bandwidth
// loop's checks, and the timed decode loop (token count, refusal of a too-long run).
#include "generate/decode_benchmark.hpp"

#include <doctest/doctest.h>

#include <memory>

#include "generate/sampler_config.hpp"
#include "model_fixture.hpp"

namespace eng = patchbay::engine;
namespace gen = patchbay::generate;
namespace pm = patchbay::model;

namespace {

pm::ModelOptions options(bool tied) {
  pm::ModelOptions o = model_test::tiny_options();  // V 11, C 16, L 2, d_ff 64, T 8
  o.tie_embeddings = tied;
  return o;
}

// Per block: qkv [48,16] + bias 48, proj [16,16] + 16, fc [64,16] + 64, proj [16,64] + 16,
// two layer norms (gain, bias) 4 * 16.
constexpr int64_t kBlockScalars =
    48 * 16 + 48 + 16 * 16 + 16 + 64 * 16 + 64 + 16 * 64 + 16 + 4 * 16;
constexpr int64_t kFinalNorm = 2 * 16;
constexpr int64_t kTable = 11 * 16;  // wte or head

// The tiny tied model, the default sampler chain, and a run of 3 prompt + 1 warmup + 4 timed
// tokens: 8, the whole context.
struct ShortDecode {
  std::unique_ptr<pm::LanguageModel> model =
      pm::LanguageModel::build(options(true), {}, model_test::registry());
  patchbay::runtime::SamplerChain chain =
      gen::build_sampler_chain(gen::default_chain_entries(3), model_test::registry());
  gen::DecodeTimingOptions o = [] {
    gen::DecodeTimingOptions run;
    run.prompt_tokens = 3;
    run.warmup_tokens = 1;
    run.new_tokens = 4;
    return run;
  }();
};

}  // namespace

TEST_CASE("streamed weight bytes: every parameter but the gathered tables") {
  auto tied = pm::LanguageModel::build(options(true), {}, model_test::registry());
  // wte streams as the head; wpe is gathered (one row).
  CHECK(gen::streamed_weight_bytes(*tied) == 4 * (2 * kBlockScalars + kFinalNorm + kTable));
  auto untied = pm::LanguageModel::build(options(false), {}, model_test::registry());
  // head streams; wte and wpe are gathered.
  CHECK(gen::streamed_weight_bytes(*untied) == 4 * (2 * kBlockScalars + kFinalNorm + kTable));
  // bf16 matrices: half the bytes of each matrix, vectors unchanged.
  tied->convert_weights_for_inference(eng::DType::kBF16);
  constexpr int64_t kBlockVectors = 48 + 16 + 64 + 16 + 4 * 16;
  constexpr int64_t kBlockMatrices = kBlockScalars - kBlockVectors;
  CHECK(gen::streamed_weight_bytes(*tied) ==
        2 * (2 * kBlockMatrices + kTable) + 4 * (2 * kBlockVectors + kFinalNorm));
}

TEST_CASE("KV cache bytes read at a position: keys and values of every earlier position") {
  const pm::ModelOptions o = options(true);
  CHECK(gen::kv_cache_bytes_read(o, 0) == 2 * 2 * 1 * 16 * 4);
  CHECK(gen::kv_cache_bytes_read(o, 7) == 2 * 2 * 8 * 16 * 4);
}

TEST_CASE("read bandwidth: a positive rate, and clear refusals") {
  const gen::ReadBandwidth r = gen::measure_read_bandwidth(std::int64_t{1} << 20, 2);
  CHECK(r.median_gbps > 0);
  CHECK(r.best_gbps >= r.median_gbps);
  CHECK(r.buffer_bytes == (std::int64_t{1} << 20));
  CHECK(r.threads >= 1);
  CHECK_THROWS_WITH_AS(gen::measure_read_bandwidth(1000, 2), doctest::Contains("at least 1 MiB"),
                       patchbay::Error);
  CHECK_THROWS_WITH_AS(gen::measure_read_bandwidth(std::int64_t{1} << 20, 0),
                       doctest::Contains("passes >= 1"), patchbay::Error);
}

TEST_CASE("timed decoding: the asked number of tokens, deterministic, bounded by the context") {
  ShortDecode run;
  auto& [model, chain, o] = run;
  const gen::DecodeTiming a = gen::time_decoding(*model, chain, o);
  CHECK(a.tokens == 4);
  CHECK(a.generated.size() == 5);
  CHECK(a.tokens_per_second > 0);
  // positions 4..7 read 5..8 cached positions: mean 6.5 of 2 layers x 16 x 4 bytes x 2
  CHECK(a.mean_kv_bytes_read == doctest::Approx(2 * 2 * 6.5 * 16 * 4));
  CHECK(gen::time_decoding(*model, chain, o).generated == a.generated);
  o.new_tokens = 5;
  CHECK_THROWS_WITH_AS(gen::time_decoding(*model, chain, o),
                       doctest::Contains("<= the context length 8"), patchbay::Error);
}

TEST_CASE("timed decoding: a paired read of each token's bytes, and the products' profile") {
  ShortDecode run;
  auto& [model, chain, o] = run;
  const gen::DecodeTiming plain = gen::time_decoding(*model, chain, o);
  CHECK(plain.paired_read_seconds == 0);
  CHECK(plain.product_weight_bytes == 0);  // not profiled unless asked
  o.paired_read = true;
  o.profile_products = true;
  const gen::DecodeTiming paired = gen::time_decoding(*model, chain, o);
  CHECK(paired.generated == plain.generated);  // the reads change no result
  CHECK(paired.paired_read_seconds > 0);
  // After each timed step, the streamed weights and that position's KV bytes.
  const double weights = static_cast<double>(gen::streamed_weight_bytes(*model));
  CHECK(paired.paired_read_bytes == doctest::Approx(4 * weights + 4 * paired.mean_kv_bytes_read));
  REQUIRE(paired.paired_ratios.size() == 4);  // one per timed step
  for (double ratio : paired.paired_ratios) CHECK(ratio > 0);
  // Every matrix of a step goes through the skinny kernel once per token: per block qkv
  // [48, 16], proj [16, 16], fc [64, 16], proj [16, 64]; then the tied head [11, 16].
  CHECK(paired.product_weight_bytes ==
        4 * 4 * (2 * (48 * 16 + 16 * 16 + 64 * 16 + 16 * 64) + kTable));
  CHECK(paired.product_seconds > 0);
  CHECK(paired.product_seconds < paired.model_seconds);
}
