// The bf16 flash kernel (AttentionParams::q_bf16 ...) against the double-precision reference
// run on the same bf16 values widened to f32: forward and backward over the tiling and
// masking edges (lengths off the 64-row tiles, odd key and query counts, decode, fully masked
// rows, GQA / MQA, strided views, D = 16..128 and 40), windows and ALiBi; bit-reproducible
// backward; validation. Skipped where the CPU has no AVX512-BF16.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "attention_test_tensors.hpp"
#include "patchbay/kernels/attention_flash.hpp"
#include "patchbay/kernels/attention_reference.hpp"

namespace pk = patchbay::kernels;
using pk::testing::AttentionShape;
using pk::testing::AttentionTensors;

namespace {

// The kernel rounds P and dS to bf16 (relative error <= 2^-9 each) for the products that read
// them; the inputs are exact in both. Largest errors measured on these shapes: out 2.1e-3,
// dq 3.1e-3, dk 2.7e-3, dv 2.6e-3 (relative to the tensor's largest element); a wrong pair
// order is O(1), a dropped key costs about 1/Tk of a row (caught by the short shapes, and by
// lse). lse comes from exact bf16 products summed in f32, so it stays at f32 accuracy (3e-7
// measured).
constexpr double kTolerance = 1e-2;
constexpr double kLseTolerance = 1e-5;

// Fixture whose q, k, v, dout hold bf16 values, with the bf16 copies kept alive beside it.
struct Bf16Operands {
  std::vector<std::uint16_t> q, k, v, dout;
  explicit Bf16Operands(AttentionTensors& t)
      : q(t.round_input_to_bf16("q")),
        k(t.round_input_to_bf16("k")),
        v(t.round_input_to_bf16("v")),
        dout(t.round_input_to_bf16("dout")) {}
  // t's params switched to these bf16 operands (the f32 operand pointers cleared).
  void use_in(AttentionTensors& t) const {
    pk::AttentionParams& p = t.params;
    p.q = p.k = p.v = p.dout = nullptr;
    p.q_bf16 = q.data();
    p.k_bf16 = k.data();
    p.v_bf16 = v.data();
    p.dout_bf16 = dout.data();
  }
};

std::vector<AttentionShape> bf16_shapes() {
  std::vector<AttentionShape> shapes;
  auto add = [&](std::int64_t b, std::int64_t h, std::int64_t hkv, std::int64_t tq,
                 std::int64_t tk, std::int64_t d, bool causal, bool strided = false) {
    shapes.push_back(AttentionShape{b, h, hkv, tq, tk, d, causal, strided});
  };
  add(2, 3, 3, 100, 100, 64, true);      // off the tiles
  add(2, 3, 3, 101, 101, 64, false);     // odd lengths: pairs padded with zeros
  add(1, 2, 2, 1, 37, 64, true);         // decode: one query, odd key count
  add(1, 2, 2, 5, 64, 32, true);         // short chunk after a cache
  add(2, 8, 2, 1, 100, 64, true, true);  // GQA decode from a strided cache
  add(1, 4, 2, 130, 130, 128, true);     // GQA, D = 128, three query tiles
  add(1, 6, 1, 71, 71, 32, false);       // MQA, odd length
  add(1, 2, 2, 80, 20, 64, true);        // Tq > Tk: the first 60 rows see no key
  add(2, 4, 2, 67, 67, 64, true, true);  // [B,T,H,D] strided views
  add(1, 2, 1, 33, 77, 40, true, true);  // D not a multiple of 16, strided
  add(1, 1, 1, 1, 1, 16, true);          // the smallest
  add(1, 2, 2, 64, 200, 64, false);      // Tq < Tk
  add(1, 4, 1, 300, 300, 64, true);      // longest: threads really split
  return shapes;
}

void check_against_reference(const AttentionShape& shape, std::uint64_t seed, int threads,
                             std::int64_t window, bool alibi) {
  const std::vector<float> slopes = {0.5f, 0.25f, 0.125f, 0.0625f, 0.03125f, 0.015625f,
                                     0.0078125f, 0.00390625f};
  AttentionTensors reference(shape, seed);
  AttentionTensors bf16(shape, seed);
  Bf16Operands operands(bf16);
  (void)Bf16Operands(reference);  // the reference sees the same bf16 values, in f32
  for (pk::AttentionParams* p : {&reference.params, &bf16.params}) {
    p->window = window;
    p->alibi_slopes = alibi ? slopes.data() : nullptr;
  }
  REQUIRE(pk::attention_reference_forward(reference.params).empty());
  REQUIRE(pk::attention_reference_backward(reference.params).empty());
  operands.use_in(bf16);
  bf16.params.num_threads = threads;
  REQUIRE(pk::attention_flash_forward(bf16.params) == "");
  REQUIRE(pk::attention_flash_backward(bf16.params) == "");
  CHECK(pk::testing::max_relative_diff(bf16, reference, "out") < kTolerance);
  CHECK(pk::testing::max_lse_diff(bf16, reference) < kLseTolerance);
  CHECK(pk::testing::max_relative_diff(bf16, reference, "dq") < kTolerance);
  CHECK(pk::testing::max_relative_diff(bf16, reference, "dk") < kTolerance);
  CHECK(pk::testing::max_relative_diff(bf16, reference, "dv") < kTolerance);
  CHECK(bf16.output_padding_untouched());
}

}  // namespace

TEST_CASE("bf16 flash forward and backward match the reference on the same bf16 values") {
  if (!pk::attention_flash_bf16_supported()) {
    MESSAGE("skipped: this CPU has no AVX512-BF16");
    return;
  }
  int index = 0;
  for (const AttentionShape& shape : bf16_shapes()) {
    ++index;
    for (const int threads : {1, 3}) {
      CAPTURE(shape.describe());
      CAPTURE(threads);
      check_against_reference(shape, std::uint64_t(index), threads, 0, false);
    }
  }
}

TEST_CASE("bf16 flash with sliding windows and ALiBi matches the reference") {
  if (!pk::attention_flash_bf16_supported()) return;
  const AttentionShape causal{1, 4, 2, 150, 150, 64, true, false};
  const AttentionShape full{1, 2, 2, 90, 90, 32, false, true};
  const AttentionShape chunk{1, 4, 2, 41, 151, 64, true, true};  // Tq < Tk, odd, strided
  for (const AttentionShape& shape : {causal, full, chunk}) {
    for (const std::int64_t window : {0, 1, 17, 70}) {
      for (const bool alibi : {false, true}) {
        CAPTURE(shape.describe());
        CAPTURE(window);
        CAPTURE(alibi);
        check_against_reference(shape, 99, 3, window, alibi);
      }
    }
  }
}

namespace {

// One bf16 forward + backward of `shape` on 3 threads; keeps its tensors for comparison.
struct Bf16Run {
  AttentionTensors tensors;
  Bf16Operands operands;
  Bf16Run(const AttentionShape& shape, std::uint64_t seed)
      : tensors(shape, seed), operands(tensors) {
    operands.use_in(tensors);
    tensors.params.num_threads = 3;
    REQUIRE(pk::attention_flash_forward(tensors.params) == "");
    REQUIRE(pk::attention_flash_backward(tensors.params) == "");
  }
};

}  // namespace

TEST_CASE("bf16 flash backward is bit-reproducible across runs on several threads") {
  if (!pk::attention_flash_bf16_supported()) return;
  const AttentionShape shape{2, 4, 2, 200, 200, 64, true, false};
  const Bf16Run first(shape, 5);
  for (int repeat = 0; repeat < 6; ++repeat) {
    const Bf16Run again(shape, 5);
    for (const char* name : {"out", "dq", "dk", "dv"}) {
      CAPTURE(name);
      CHECK(pk::testing::max_relative_diff(again.tensors, first.tensors, name) == 0.0);
    }
  }
}

TEST_CASE("bf16 operands are validated with messages that say what to do") {
  const AttentionShape shape{1, 2, 2, 8, 8, 32, true, false};
  AttentionTensors t(shape, 1);
  Bf16Operands operands(t);
  pk::AttentionParams p = t.params;
  operands.use_in(t);
  pk::AttentionParams bf16 = t.params;

  pk::AttentionParams mixed = bf16;  // f32 and bf16 pointers at once
  mixed.k = p.k;
  CHECK(pk::attention_params_error(mixed, pk::AttentionPass::forward).find("must be null") !=
        std::string::npos);
  pk::AttentionParams half = p;  // k_bf16 without q_bf16
  half.k_bf16 = operands.k.data();
  CHECK(pk::attention_params_error(half, pk::AttentionPass::forward).find("q_bf16 is null") !=
        std::string::npos);
  pk::AttentionParams no_dout = bf16;
  no_dout.dout_bf16 = nullptr;
  CHECK(pk::attention_params_error(no_dout, pk::AttentionPass::forward).empty() ==
        pk::attention_flash_bf16_supported());
  CHECK(pk::attention_params_error(no_dout, pk::AttentionPass::backward).find("dout_bf16") !=
        std::string::npos);
  pk::AttentionParams odd = bf16;
  odd.head_dim = 31;
  CHECK(pk::attention_params_error(odd, pk::AttentionPass::forward).find("even head_dim") !=
        std::string::npos);
  pk::AttentionParams generic = bf16;
  generic.isa = pk::KernelIsa::generic;
  CHECK(pk::attention_params_error(generic, pk::AttentionPass::forward).find("avx512 path") !=
        std::string::npos);
  CHECK(pk::attention_reference_forward(bf16).find("f32 operands only") != std::string::npos);
  if (!pk::attention_flash_bf16_supported()) {
    CHECK(pk::attention_params_error(bf16, pk::AttentionPass::forward).find("AVX512-BF16") !=
          std::string::npos);
  }
}

TEST_CASE("bf16 flash workspace stays linear in the sequence length") {
  if (!pk::attention_flash_bf16_supported()) return;
  AttentionTensors t(AttentionShape{1, 2, 2, 8, 8, 64, true, false}, 1);
  Bf16Operands operands(t);
  operands.use_in(t);
  t.params.num_threads = 2;
  auto bytes_at = [&](std::int64_t len, pk::AttentionPass pass) {
    pk::AttentionParams p = t.params;
    p.q_len = p.kv_len = len;
    return double(pk::attention_flash_workspace_bytes(p, pass));
  };
  // Doubling T from 4096 to 8192 at most doubles the workspace (T^2 would quadruple it).
  for (const pk::AttentionPass pass : {pk::AttentionPass::forward, pk::AttentionPass::backward})
    CHECK(bytes_at(8192, pass) <= 2.05 * bytes_at(4096, pass));
  // Forward: V packed in pairs (2 bytes per element, as V itself) plus per-thread tiles.
  CHECK(bytes_at(4096, pk::AttentionPass::forward) < 2.0 * 2 * 4096 * 64 + 256 * 1024 * 2);
}
