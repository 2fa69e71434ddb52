// Mixed-precision policy for matmul ("autocast"), per thread: while a bf16 policy is active,
// every matmul whose operands are both f32 runs as a bf16 x bf16 GEMM with f32 accumulation
// and an f32 result, and its backward does the same (dC rounded to bf16, dA and dB returned
// in f32). Everything else (element-wise ops, softmax, norms, the loss, the optimizer) keeps
// running on the f32 tensors it is given, so f32 master weights, f32 gradients and f32
// reductions need nothing special. It is a public engine mechanism, reached by plugins
// through the ops table (autocast_set / autocast_get, version 6): a plugin's matmuls follow
// the policy without knowing about it.
//
// Weight cache: inside one policy scope, the bf16 copy of a leaf that requires grad (a
// parameter) is made once and reused by every matmul that reads it (forward and backward,
// every micro-batch of a step); a view of such a leaf (a matmul on rows of a fused weight)
// reads the same view of the leaf's cached copy. The trainer opens one scope per update and closes
// it before the optimizer writes the weights, so a cached copy never goes stale. Whoever
// writes a parameter in place inside a scope must call autocast_clear_cache().
// Non-leaf operands (activations) are rounded to bf16 at each matmul and saved in bf16 for
// the backward (half the memory of the f32 activations they replace).
// scaled_dot_product_attention follows the policy too where the CPU has AVX512-BF16: its
// bf16 flash kernel takes bf16 q, k, v (and dout), accumulates in f32 and returns f32
// (engine/ops/attention.cpp).
#pragma once

#include "engine/tensor.hpp"

namespace patchbay::engine {

// The calling thread's matmul compute dtype: kF32 (no autocast, the default) or kBF16.
DType autocast_dtype();

// Sets the calling thread's policy (kF32 or kBF16; anything else throws kInvalidArgument)
// and returns the previous one. Any change drops the weight cache.
DType set_autocast_dtype(DType dtype);

// Drops the calling thread's cached bf16 weight copies (after writing parameters in place).
void autocast_clear_cache();

// RAII scope: sets the policy, restores the previous one (and drops the cache) on exit.
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype) : previous_(set_autocast_dtype(dtype)) {}
  ~AutocastGuard() { set_autocast_dtype(previous_); }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DType previous_;
};

// Hands the open bf16 scope a ready bf16 copy of the parameter `param` (an f32 contiguous leaf
// that requires grad): matmuls in this scope read `copy` (bf16, param's shape, contiguous)
// instead of rounding param themselves. The caller promises copy == param rounded to bf16 (the
// trainer's copies are written by the optimizer's update pass, optimizer.h minor 2). Throws
// kInvalidArgument outside a bf16 policy or for tensors that do not fit.
void autocast_use_copy(const Tensor& param, const Tensor& copy);

// x (f32) as a detached bf16 tensor under the current policy: the cached copy for a leaf
// that requires grad (or the same view of it for a view of one), a fresh rounding otherwise. Used by matmul; never records autograd.
Tensor autocast_bf16_operand(const Tensor& x);

}  // namespace patchbay::engine
