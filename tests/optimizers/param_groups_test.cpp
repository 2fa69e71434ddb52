// Parameter groups: the default no-decay rule on the language model's parameter names.
#include "train/param_groups.hpp"

#include <doctest/doctest.h>

#include <string>

namespace tr = patchbay::train;

TEST_CASE("biases, norm gains and 1-D tensors do not decay; 2-D weights and embeddings do") {
  const std::vector<tr::ParamShape> params = {
      {"wte.weight", {65, 128}},
      {"wpe.weight", {256, 128}},
      {"blocks.0.norm1.gain", {128}},
      {"blocks.0.norm1.bias", {128}},
      {"blocks.0.attn.qkv.weight", {384, 128}},
      {"blocks.0.attn.qkv.bias", {384}},
      {"blocks.0.ffn.fc.weight", {512, 128}},
      {"norm_f.gain", {128}},
      {"blocks.0.attn.rmsnorm_scale", {1, 128}},  // 2-D, but named norm
      {"blocks.0.attn.proj.bias", {1, 128}},      // 2-D, but a bias
      {"head.weight", {65, 128}}};
  const auto options = tr::param_groups(params);
  REQUIRE(options.size() == params.size());
  const std::vector<bool> decays = {true, true,  false, false, true, false,
                                    true, false, false, false, true};
  for (size_t i = 0; i < params.size(); ++i) {
    CAPTURE(params[i].name);
    CHECK(options[i].struct_size == sizeof(pb_param_options));
    CHECK(options[i].weight_decay_scale == (decays[i] ? 1.0 : 0.0));
    CHECK(std::string(options[i].group) == (decays[i] ? "decay" : "no_decay"));
    CHECK(options[i].lr_scale == 1.0);
  }
}

TEST_CASE("embeddings can be exempted by name, and lr_scale is carried") {
  tr::ParamGroupRule rule;
  rule.extra_no_decay = {"wte.weight"};
  rule.lr_scale = 0.5;
  CHECK(tr::is_no_decay("wte.weight", {65, 128}, rule));
  CHECK_FALSE(tr::is_no_decay("wpe.weight", {256, 128}, rule));
  CHECK(tr::param_options("head.weight", {65, 128}, rule).lr_scale == 0.5);
}
