// Bit-exact causality of every causal feed-forward kind (issue 39, batch-invariant numerics):
// the dense MLP (each activation) and the token-choice MoE (each router, with capacity
// dropping, dropless, a shared expert, SwiGLU experts), at widths where the experts' products
// are real GEMMs (d_model 64, d_ff 256) and the router sends each expert a number of rows that
// changes when later tokens change. Outputs at positions < t must be identical bit for bit
// when the inputs at positions >= t change: before the engine ran f32 x·Wᵀ through one
// row-invariant kernel, an expert given 4 rows summed them in another order than one given 5
// (skinny kernel vs oneDNN), and earlier tokens' outputs moved by ~3e-8. Checked without
// gradients (the engine's default then is row-invariant) and recording gradients with
// PATCHBAY_BATCH_INVARIANCE=always (by default training products take oneDNN).
#include <cstring>
#include <string>
#include <vector>

#include "engine/autograd.hpp"
#include "engine/generator.hpp"
#include "moe_helpers.hpp"

using namespace moe_test;

namespace {

// 128 tokens: with dropless top-2 an expert gets ~64 rows, [64, 256] = 16k hidden elements,
// around the engine's loop/oneDNN threshold of the activations.
constexpr int64_t kBatch = 2, kSeq = 64, kWidth = 64, kHidden = 256;

struct Variant {
  std::string kind;  // "mlp" or "moe"
  std::string activation;
  std::string router;  // moe only
  bool dropless = false, shared_expert = false;
};

rt::FeedForwardHandle make_layer(Loaded& loaded, const Variant& v) {
  rt::ComponentConfig config(loaded.descriptor(v.kind));
  config.set_string("activation", v.activation);
  if (v.kind == "moe") {
    config.set_string("router", v.router);
    config.set_int("experts", 4);
    config.set_float("capacity_factor", 1.0);
    config.set_float("eval_capacity_factor", 1.0);
    config.set_bool("dropless", v.dropless);
    config.set_bool("shared_expert", v.shared_expert);
  }
  rt::FeedForwardHandle layer = loaded.make(v.kind, config);
  layer.init(context(kWidth, kHidden, 5));
  return layer;
}

std::vector<Variant> variants() {
  std::vector<Variant> all;
  for (const char* act : {"gelu", "gelu_erf", "relu", "swiglu"}) all.push_back({"mlp", act, ""});
  for (const char* router : {"topk", "switch", "noisy_topk"}) {
    all.push_back({"moe", "gelu", router});
    all.push_back({"moe", "swiglu", router, /*dropless=*/true});
  }
  all.push_back({"moe", "relu", "switch", /*dropless=*/false, /*shared_expert=*/true});
  return all;
}

}  // namespace

TEST_CASE("feed-forward outputs at positions < t are bit-identical when positions >= t change") {
  Loaded loaded;
  eng::Generator gen(23);
  const eng::Tensor base = eng::randn({kBatch, kSeq, kWidth}, gen);
  const eng::Tensor noise = eng::randn({kBatch, kSeq, kWidth}, gen);
  for (const Variant& v : variants()) {
    CAPTURE(v.kind);
    CAPTURE(v.activation);
    CAPTURE(v.router);
    CAPTURE(v.dropless);
    CAPTURE(v.shared_expert);
    for (bool training : {false, true}) {
      CAPTURE(training);
      for (int64_t split : {int64_t{1}, int64_t{7}, kSeq / 2, kSeq - 1}) {
        CAPTURE(split);
        // Later positions of every sequence change (so the per-expert row counts do).
        const eng::Tensor changed =
            eng::concat({base.slice(1, 0, split),
                         base.slice(1, split, kSeq) + noise.slice(1, split, kSeq) * 2.0},
                        1);
        std::vector<std::vector<float>> ys;
        for (const eng::Tensor* input : {&base, &changed}) {
          rt::FeedForwardHandle layer = make_layer(loaded, v);  // equal seeds: equal noise
          if (training) {  // recording gradients (parameters require them)
            const ScopedEnv invariant("PATCHBAY_BATCH_INVARIANCE", "always");
            ys.push_back(layer.forward(*input, training).y.to_vector());
          } else {
            eng::NoGradGuard no_grad;
            ys.push_back(layer.forward(*input, training).y.to_vector());
          }
        }
        size_t earlier_differ = 0;
        bool later_changed = false;
        for (int64_t b = 0; b < kBatch; ++b)
          for (int64_t t = 0; t < kSeq; ++t)
            for (int64_t c = 0; c < kWidth; ++c) {
              const size_t i = static_cast<size_t>((b * kSeq + t) * kWidth + c);
              const bool same = std::memcmp(&ys[0][i], &ys[1][i], sizeof(float)) == 0;
              if (t < split)
                earlier_differ += same ? 0 : 1;
              else
                later_changed = later_changed || !same;
            }
        CHECK(earlier_differ == 0);
        CHECK(later_changed);
      }
    }
  }
}
