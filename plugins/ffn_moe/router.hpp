// Routers of the mixture-of-experts layers and their auxiliary losses, all in f32:
//   topk        p = softmax(x Wgᵀ); the k largest p; gate = p, or p / Σ_chosen p (renormalize)
//   switch      topk with k = 1 and the un-renormalised gate p_i (Fedus et al. 2021)
//   noisy_topk  H = x Wgᵀ + N(0,1)·softplus(x Wnᵀ) in training (H = x Wgᵀ in eval); the k
//               largest H; gate = softmax over those k values of H (Shazeer et al. 2017)
//   router jitter (any router): in training the router input is x ⊙ U(1 − ε, 1 + ε)
// Expert choice uses the same weight and probabilities; its top-k runs over tokens instead
// (expert_choice.cpp).
#pragma once

#include <cstdint>
#include <patchbay/feedforward.hpp>
#include <string>
#include <vector>

#include "expert_mlp.hpp"

namespace patchbay_ffn_moe {

enum class RouterKind { kTopK, kSwitch, kNoisyTopK };

RouterKind parse_router(const std::string& name);  // "topk" | "switch" | "noisy_topk"

struct Routing {
  patchbay::Tensor logits;       // [N, E] f32, clean (no noise): for the z-loss
  patchbay::Tensor probs;        // [N, E] f32 softmax(logits): for the balancing loss and entropy
  patchbay::Tensor gates;        // [N, k] f32, differentiable
  std::vector<int64_t> choices;  // [N·k] chosen expert ids, row-major [N, k] (CPU layers only)
  patchbay::Tensor ids;          // [N, k] int64 chosen expert ids on the layer's device
};

struct RouterSettings {
  RouterKind kind = RouterKind::kTopK;
  int64_t experts = 0;
  int64_t k = 1;
  bool renormalize = true;  // topk only
  double jitter = 0;        // ε of the multiplicative router-input noise, training only
  // The layer's device: noise is drawn on the CPU and moved there; on a device the choices
  // stay there (Routing::ids, no host copy).
  pb_device_type device_type = PB_DEVICE_CPU;
  int32_t device_index = 0;
};

class Router {
 public:
  // router.weight [E, C] ~ N(0, init_std²); noisy_topk adds router.noise_weight [E, C] = 0
  // (Shazeer's zero init: the noise starts at softplus(0) = ln 2).
  Router(const patchbay::Ops& ops, patchbay::Generator& gen, const RouterSettings& settings,
         int64_t d_model, double init_std, pb_dtype dtype, const RegisterParameter& add);

  // x2 [N, C] -> routing. `noise` draws the jitter and the gating noise (training only).
  Routing route(const patchbay::Tensor& x2, bool training, patchbay::Generator& noise) const;
  // Clean logits [N, E] f32 of x2 (no jitter, no noise).
  patchbay::Tensor logits(const patchbay::Tensor& x2f) const;

  const RouterSettings& settings() const { return settings_; }

 private:
  patchbay::Tensor on_layer_device(const patchbay::Tensor& t) const;  // drawn on the CPU
  patchbay::Ops ops_;
  RouterSettings settings_;
  patchbay::Tensor weight_, noise_weight_;
};

// Switch load-balancing loss (unweighted): E · Σ_i f_i · P_i with f_i = routed[i] / (N·k)
// (every selected expert counts, before capacity) and P_i = mean over tokens of probs[:, i].
// Uniform routing gives exactly 1. probs [N, E] f32.
patchbay::Tensor load_balancing_loss(const patchbay::Tensor& probs,
                                     const std::vector<int64_t>& routed, int64_t k);
// ST-MoE router z-loss (unweighted): mean over tokens of logsumexp(logits)², computed as
// m + log Σ exp(logits − m) with m = max (detached: the exact gradient does not depend on it),
// taken by top-1 (the same values; max's argmax would be read back on a device).
patchbay::Tensor router_z_loss(const patchbay::Tensor& logits);
// Mean over tokens of −Σ_e p log p (nats), from a host copy of probs [N, E].
double mean_router_entropy(const std::vector<float>& probs, int64_t experts);

}  // namespace patchbay_ffn_moe
