// Causal-leak tests for every causal router of "moe": with a capacity that drops tokens, in
// training mode (router noise and jitter on, drawn from equal seeds), changing the later
// positions of some sequences changes neither the outputs nor the gradients of any earlier
// position of any sequence. The outputs are compared bit for bit (issue 39), with
// PATCHBAY_BATCH_INVARIANCE=always (these products record gradients, which by default take
// the faster, row-variant GEMM): an expert's matmul must give a token the same bits however
// many other tokens the router sent it (batch_invariance_test.cpp covers bigger widths).
#include <string>
#include <vector>

#include "engine/autograd.hpp"
#include "engine/generator.hpp"
#include "moe_helpers.hpp"

using namespace moe_test;

namespace {

constexpr int64_t kBatch = 3, kSeq = 6, kWidth = 8, kSplit = 3;  // positions >= kSplit change

rt::FeedForwardHandle make_layer(Loaded& loaded, const std::string& router, double jitter) {
  rt::ComponentConfig config(loaded.descriptor("moe"));
  config.set_string("router", router);
  config.set_int("experts", 4);
  config.set_float("capacity_factor", 0.5);  // ceil(0.5 · 18 · k / 4): many assignments dropped
  config.set_float("router_jitter", jitter);
  rt::FeedForwardHandle layer = loaded.make("moe", config);
  layer.init(context(kWidth, 16, 21));
  return layer;
}

}  // namespace

TEST_CASE("no causal leak through capacity, noise or jitter, for every causal router") {
  const ScopedEnv invariant("PATCHBAY_BATCH_INVARIANCE", "always");
  Loaded loaded;
  struct RouterCase {
    const char* router;
    double jitter;
  };
  for (const RouterCase rc :
       {RouterCase{"topk", 0.0}, RouterCase{"switch", 0.0}, RouterCase{"noisy_topk", 0.0},
        RouterCase{"topk", 0.2}, RouterCase{"switch", 0.2}}) {
    CAPTURE(rc.router);
    CAPTURE(rc.jitter);
    eng::Generator gen(17);
    const std::vector<float> base = eng::randn({kBatch, kSeq, kWidth}, gen).to_vector();
    std::vector<float> changed = base;
    const std::vector<float> noise = eng::randn({kBatch, kSeq, kWidth}, gen).to_vector();
    for (int64_t b : {0, 2}) {  // later positions of sequences 0 and 2 change
      for (int64_t t = kSplit; t < kSeq; ++t) {
        for (int64_t c = 0; c < kWidth; ++c) {
          const size_t i = static_cast<size_t>((b * kSeq + t) * kWidth + c);
          changed[i] += 3.0f * noise[i];
        }
      }
    }
    std::vector<std::vector<float>> ys, grads;
    for (const std::vector<float>* input :
         {&base, static_cast<const std::vector<float>*>(&changed)}) {
      rt::FeedForwardHandle layer =
          make_layer(loaded, rc.router, rc.jitter);  // equal seeds: equal noise
      eng::Tensor x = eng::Tensor::from_vector(*input, {kBatch, kSeq, kWidth});
      x.set_requires_grad(true);
      const rt::FeedForwardHandle::Output out = layer.forward(x, /*training=*/true);
      CHECK(stat(out, "dropped_fraction")[0] > 0.1f);  // the capacity bites
      // d(sum of the early outputs)/dx: must vanish at every later position.
      eng::backward(eng::sum(out.y.slice(1, 0, kSplit)));
      ys.push_back(out.y.to_vector());
      grads.push_back(x.grad().to_vector());
    }
    bool later_changed = false;
    for (int64_t b = 0; b < kBatch; ++b) {
      for (int64_t t = 0; t < kSeq; ++t) {
        for (int64_t c = 0; c < kWidth; ++c) {
          const size_t i = static_cast<size_t>((b * kSeq + t) * kWidth + c);
          if (t < kSplit) {
            CHECK(ys[0][i] == ys[1][i]);
          } else {
            later_changed = later_changed || ys[0][i] != ys[1][i];
            CHECK(grads[0][i] == 0.0f);
          }
        }
      }
    }
    CHECK(later_changed);
  }
}
