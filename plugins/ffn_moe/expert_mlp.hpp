// One expert of a mixture-of-experts layer: the same block as ffn_mlp's "mlp" (fc ->
// activation -> proj, SwiGLU adds a gate), on the rows routed to it. Parameter names are
// "<prefix>.fc.weight" etc., registered through the owning layer so the host sees them.
#pragma once

#include <functional>
#include <patchbay/feedforward.hpp>
#include <string>

namespace patchbay_ffn_moe {

enum class Activation { kGeluTanh, kGeluErf, kRelu, kSwiGlu };

// "gelu" | "gelu_erf" | "relu" | "swiglu"; anything else is INVALID_ARGUMENT.
Activation parse_activation(const std::string& name);

// Registers a parameter with the layer and returns the stored (leaf) tensor.
using RegisterParameter =
    std::function<patchbay::Tensor&(std::string name, patchbay::Tensor tensor)>;

struct ExpertShape {
  int64_t d_model = 0;   // C
  int64_t d_hidden = 0;  // F: the expert's hidden width
  Activation activation = Activation::kGeluTanh;
  bool bias = true;
};

class ExpertMlp {
 public:
  // Draws fc, gate (SwiGLU only), proj in that order from `gen`: fc/gate std init_std, proj std
  // residual_init_std; biases zero.
  ExpertMlp(const patchbay::Ops& ops, patchbay::Generator& gen, const ExpertShape& shape,
            const std::string& prefix, double init_std, double residual_init_std, pb_dtype dtype,
            const RegisterParameter& add);
  // rows [M, C] -> [M, C].
  patchbay::Tensor forward(const patchbay::Tensor& rows) const;

 private:
  static patchbay::Tensor linear(const patchbay::Tensor& x, const patchbay::Tensor& w,
                                 const patchbay::Tensor& b);
  ExpertShape shape_;
  patchbay::Tensor fc_weight_, fc_bias_, gate_weight_, gate_bias_, proj_weight_, proj_bias_;
};

}  // namespace patchbay_ffn_moe
