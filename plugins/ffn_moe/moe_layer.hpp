// The "moe" component: a token-choice mixture-of-experts feed-forward layer (routers topk,
// switch, noisy_topk; capacity with dropping or dropless; optional shared expert; Switch
// load-balancing loss and router z-loss; statistics). Causal: the capacity priority order of
// dispatch_plan.hpp never lets a later position change an earlier one. Formulas, defaults and
// the dispatch are in README.md; the config schema is kMoeFields below.
#pragma once

#include <memory>
#include <optional>
#include <patchbay/feedforward.hpp>
#include <string>
#include <vector>

#include "device_dispatch.hpp"
#include "dispatch_plan.hpp"
#include "expert_mlp.hpp"
#include "router.hpp"

namespace patchbay_ffn_moe {

// Settings shared by the token-choice and expert-choice layers, read from the config.
struct ExpertSettings {
  int64_t experts = 8;
  int64_t expert_d_ff = 0;  // 0: the model's d_ff
  Activation activation = Activation::kGeluTanh;
  bool bias = true;
  double dropout = 0;
  double z_loss_coef = 0;
};
ExpertSettings read_expert_settings(const patchbay::ConfigView& config);

// Shapes every parameter from ctx and refuses what the layer cannot serve (messages name the
// key). Returns the hidden width of one expert.
// device_refusal: why the component cannot run on ctx's device ("" = it can).
int64_t check_context(const pb_layer_context& ctx, const ExpertSettings& s, const char* component,
                      const std::string& device_refusal);

// Adds the grouped rows back per token: y2[n] = Σ_j rows[slot_rows[n·k + j]] where row M
// (appended here) is zero; rows [M, C] -> [N, C]. One embedding (row gather, whose backward is
// a scatter-add) per choice j.
patchbay::Tensor combine_rows(const patchbay::Ops& ops, const patchbay::Tensor& rows,
                              const DispatchPlan& plan);

class MoeLayer : public patchbay::FeedForward {
 public:
  // Token choice with the causal priority order: usable in a causal LM.
  static constexpr uint64_t kCapabilities = PB_FEEDFORWARD_CAP_CAUSAL;

  MoeLayer(const patchbay::Host& host, const patchbay::ConfigView& config);
  void init(const pb_layer_context& ctx) override;
  Output forward(const patchbay::Tensor& x, bool training) override;

 private:
  // On a device (device_dispatch.hpp): fixed-capacity dispatch, nothing read back, no stats.
  Output forward_on_device(const patchbay::Tensor& x, const patchbay::Tensor& x2,
                           const Routing& routing, int64_t capacity, bool training);

  patchbay::Host host_;
  ExpertSettings experts_settings_;
  RouterSettings router_settings_;
  double capacity_factor_, eval_capacity_factor_;
  bool dropless_, shared_expert_;
  double balance_loss_coef_;
  bool split_with_custom_op_;  // expert_split: split_rows custom op (true) or engine slices
  int64_t d_model_ = 0;
  std::optional<Router> router_;
  std::vector<ExpertMlp> experts_;
  std::optional<ExpertMlp> shared_;
  std::unique_ptr<patchbay::Generator> noise_gen_, dropout_gen_;  // seeded from ctx.seed
  DeviceTensors device_;                 // the layer's device (the CPU: plain ops)
  patchbay::Tensor priority_;            // priority_scores of the last batch shape, there
  std::vector<int64_t> priority_shape_;  // its (B, T)
};

// Keys both components take (expert shape, z-loss).
#define PATCHBAY_FFN_MOE_EXPERT_FIELDS                                                            \
  patchbay::Field::integer("experts", "8", "number of experts E").range(1, 4096),                 \
      patchbay::Field::integer("expert_d_ff", "0",                                                \
                               "hidden width of one expert; 0 = the model's d_ff")                \
          .range(0, 1 << 24),                                                                     \
      patchbay::Field::string("activation", "\"gelu\"",                                           \
                              "expert non-linearity: gelu, gelu_erf, relu, swiglu")               \
          .choices("gelu|gelu_erf|relu|swiglu"),                                                  \
      patchbay::Field::boolean("bias", "true", "biases in the experts' fc, gate and proj"),       \
      patchbay::Field::real("dropout", "0.0", "dropout probability on the output, training only") \
          .range(0.0, 1.0),                                                                       \
      patchbay::Field::real("z_loss_coef", "0.001",                                               \
                            "router z-loss coefficient (ST-MoE c_z); 0 = off")                    \
          .range(0.0, 1e6)

inline constexpr pb_config_field kMoeFields[] = {
    PATCHBAY_FFN_MOE_EXPERT_FIELDS,
    patchbay::Field::string("router", "\"topk\"",
                            "topk (token-choice top-k), switch (top-1, un-renormalised gate), "
                            "noisy_topk (Shazeer 2017)")
        .choices("topk|switch|noisy_topk"),
    patchbay::Field::integer("top_k", "0",
                             "experts per token k; 0 = the router's default (switch 1, others 2)")
        .range(0, 4096),
    patchbay::Field::boolean("renormalize", "true",
                             "topk: gates p_i / sum of the chosen p (true) or the raw p_i (false)"),
    patchbay::Field::real("router_jitter", "0.0",
                          "training: router input times U(1-eps, 1+eps); 0 = off")
        .range(0.0, 1.0),
    patchbay::Field::real("capacity_factor", "1.25",
                          "training capacity per expert = ceil(factor * tokens * k / E)")
        .range(1e-6, 1e6),
    patchbay::Field::real("eval_capacity_factor", "2.0", "the same factor when not training")
        .range(1e-6, 1e6),
    patchbay::Field::boolean("dropless", "false",
                             "no capacity limit: every assignment is computed"),
    patchbay::Field::real("balance_loss_coef", "0.01",
                          "Switch load-balancing loss coefficient alpha; 0 = off")
        .range(0.0, 1e6),
    patchbay::Field::boolean("shared_expert", "false",
                             "add one always-on expert (same width) to every token"),
    patchbay::Field::string(
        "expert_split", "\"custom_op\"",
        "how the grouped rows reach the experts: custom_op (backward is one concat) or "
        "slices (engine slices; backward writes E full-size zeros): same results, for benchmarks")
        .choices("custom_op|slices"),
};

inline constexpr pb_component_descriptor kMoe = patchbay::make_feedforward_component<MoeLayer>(
    "moe", "1.0.0",
    "token-choice mixture of experts: topk / switch / noisy_topk routers, capacity or dropless, "
    "balancing and z losses",
    kMoeFields);

}  // namespace patchbay_ffn_moe
