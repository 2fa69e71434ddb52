// Reversible residual blocks ([model] residual = "reversible"; Gomez et al. 2017, Reformer):
//   y1 = x1 + F(x2),  y2 = x2 + G(y1),  F = dropout(attn(norm1(.))), G = dropout(ffn(norm2(.)))
// with x1 = x2 = the embedding and the stack's output (y1 + y2) / 2.
// Training runs the whole stack as ONE engine custom op (engine::apply_custom_op, the same
// mechanism plugins reach through ops->custom_op_create): its forward runs every block with
// grad recording off and saves only the last (y1, y2); its backward walks the blocks in reverse,
// rebuilding each block's inputs from its outputs (x2 = y2 - G(y1), x1 = y1 - F(x2)) while
// recomputing F and G with recording on, and back-propagates through that one block only:
//   dy1 += G'(y1)^T dy2;  dx2 = dy2 + F'(x2)^T dy1;  dx1 = dy1
// Parameter gradients accumulate into the layers' leaves during those per-block backward calls.
// So the activations kept between forward and backward are two [B, T, C] tensors whatever the
// depth. Dropout masks of the residual branches are replayed exactly: the model's dropout
// generator position before every F and G is recorded in the forward and restored for the
// recomputation (and left where the forward left it afterwards). Dropout inside plugins is not
// replayable from here, so model_build refuses reversible layers with a plugin dropout > 0.
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "model/model_impl.hpp"

namespace patchbay::model {
namespace eng = engine;

eng::Tensor LanguageModel::Impl::reversible_f(size_t index, const eng::Tensor& h, bool training,
                                              runtime::AttentionHandle::State* state) {
  Block& block = blocks[index];
  const eng::Tensor n = norm(block.norm1, h);
  return residual_dropout(
      state != nullptr ? block.attn->forward_step(*state, n) : block.attn->forward(n, training),
      training);
}

eng::Tensor LanguageModel::Impl::reversible_g(size_t index, const eng::Tensor& h, bool training) {
  runtime::FeedForwardHandle::Output out =
      blocks[index].ffn->forward(norm(blocks[index].norm2, h), training);
  if (out.aux_loss.defined() && training && eng::grad_enabled())
    throw Error(ErrorKind::kInvalidArgument,
                "residual = \"reversible\" does not carry a feed-forward auxiliary loss (block " +
                    std::to_string(index) + " returned one); use residual = \"standard\"");
  return residual_dropout(out.y, training);
}

namespace {

// The block stack as a custom op; `f(i, h)` and `g(i, h)` are block i's branches (training
// flag bound), `generator` the model's dropout generator.
class ReversibleStack final : public eng::CustomOp {
 public:
  using Branch = std::function<eng::Tensor(size_t, const eng::Tensor&)>;
  ReversibleStack(size_t blocks, Branch f, Branch g, eng::Generator& generator)
      : blocks_(blocks), f_(std::move(f)), g_(std::move(g)), generator_(generator) {}
  std::string name() const override { return "reversible_stack"; }

  std::vector<eng::Tensor> forward(eng::CustomOpContext& ctx,
                                   const std::vector<eng::Tensor>& inputs) override {
    eng::Tensor x1 = inputs[0], x2 = inputs[0];
    for (size_t i = 0; i < blocks_; ++i) {
      f_state_.push_back(generator_.offset());
      eng::Tensor y1 = x1 + f_(i, x2);
      g_state_.push_back(generator_.offset());
      eng::Tensor y2 = x2 + g_(i, y1);
      x1 = std::move(y1);
      x2 = std::move(y2);
    }
    end_state_ = generator_.offset();
    ctx.save_for_backward({x1, x2});
    return {eng::mul_scalar(x1 + x2, 0.5)};
  }

  std::vector<eng::Tensor> backward(eng::CustomOpContext& ctx,
                                    const std::vector<eng::Tensor>& grads) override {
    eng::Tensor y1 = ctx.saved_tensors()[0], y2 = ctx.saved_tensors()[1];
    eng::Tensor dy1 = eng::mul_scalar(grads[0], 0.5), dy2 = dy1;
    const uint64_t seed = generator_.seed();
    for (size_t n = blocks_; n-- > 0;) {
      const bool previous = eng::set_grad_enabled(true);
      try {
        // G: rebuild x2 and add G's share to dy1 (and to G's parameters).
        eng::Tensor z1 = y1.detach();
        z1.set_requires_grad(true);
        generator_.set_state(seed, g_state_[n]);
        eng::Tensor g = g_(n, z1);
        eng::backward(g, dy2);
        eng::Tensor x2 = y2 - g.detach();
        dy1 = dy1 + z1.grad();
        // F: rebuild x1, gradient of x2.
        eng::Tensor z2 = x2.detach();
        z2.set_requires_grad(true);
        generator_.set_state(seed, f_state_[n]);
        eng::Tensor f = f_(n, z2);
        eng::backward(f, dy1);
        eng::Tensor x1 = y1 - f.detach();
        dy2 = dy2 + z2.grad();
        y1 = x1.detach();
        y2 = x2.detach();
      } catch (...) {
        eng::set_grad_enabled(previous);
        generator_.set_state(seed, end_state_);
        throw;
      }
      eng::set_grad_enabled(previous);
    }
    generator_.set_state(seed, end_state_);
    return {dy1 + dy2};
  }

 private:
  size_t blocks_;
  Branch f_, g_;
  eng::Generator& generator_;
  std::vector<uint64_t> f_state_, g_state_;  // dropout generator offset before F / G of block i
  uint64_t end_state_ = 0;
};

}  // namespace

eng::Tensor LanguageModel::Impl::reversible_stack(
    const eng::Tensor& x, bool training, std::vector<runtime::AttentionHandle::State>* states) {
  if (eng::grad_enabled() && states == nullptr && !options.reversible_store_activations)
    return eng::apply_custom_op(std::make_shared<ReversibleStack>(
                                    blocks.size(),
                                    [this, training](size_t i, const eng::Tensor& h) {
                                      return reversible_f(i, h, training, nullptr);
                                    },
                                    [this, training](size_t i, const eng::Tensor& h) {
                                      return reversible_g(i, h, training);
                                    },
                                    dropout_generator),
                                {x})[0];
  eng::Tensor x1 = x, x2 = x;
  for (size_t i = 0; i < blocks.size(); ++i) {
    eng::Tensor y1 = x1 + reversible_f(i, x2, training, states ? &(*states)[i] : nullptr);
    eng::Tensor y2 = x2 + reversible_g(i, y1, training);
    x1 = std::move(y1);
    x2 = std::move(y2);
  }
  return eng::mul_scalar(x1 + x2, 0.5);
}

}  // namespace patchbay::model
