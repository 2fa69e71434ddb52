// The per-thread mixed-precision policy and its bf16 weight cache (engine/autocast.hpp).
// The cache maps a parameter's TensorImpl to its bf16 copy; it holds the parameter too, so
// the key cannot be reused by another tensor while the entry lives.
#include "engine/autocast.hpp"

#include <unordered_map>

#include "common/error.hpp"
#include "engine/ops.hpp"

namespace patchbay::engine {
namespace {

struct CachedCopy {
  Tensor source;  // keeps the key's TensorImpl alive
  Tensor bf16;
};

struct AutocastState {
  DType dtype = DType::kF32;
  std::unordered_map<const TensorImpl*, CachedCopy> weights;
};

AutocastState& state() {
  thread_local AutocastState s;
  return s;
}

Tensor round_to_bf16(const Tensor& x) {
  NoGradGuard no_grad;
  return x.detach().to(DType::kBF16);
}

}  // namespace

DType autocast_dtype() { return state().dtype; }

DType set_autocast_dtype(DType dtype) {
  if (dtype != DType::kF32 && dtype != DType::kBF16)
    throw Error(ErrorKind::kInvalidArgument,
                std::string("autocast: expected the compute dtype f32 (off) or bf16, found ") +
                    dtype_name(dtype) + "; f16 mixed precision is not supported on CPU");
  AutocastState& s = state();
  const DType previous = s.dtype;
  if (dtype != previous) s.weights.clear();
  s.dtype = dtype;
  return previous;
}

void autocast_clear_cache() { state().weights.clear(); }

Tensor autocast_bf16_operand(const Tensor& x) {
  if (x.dtype() == DType::kBF16) return x.detach();
  if (!(x.is_leaf() && x.requires_grad())) return round_to_bf16(x);
  AutocastState& s = state();
  auto it = s.weights.find(x.impl());
  if (it != s.weights.end()) return it->second.bf16;
  Tensor copy = round_to_bf16(x);
  s.weights.emplace(x.impl(), CachedCopy{x, copy});
  return copy;
}

}  // namespace patchbay::engine
