// The per-thread mixed-precision policy and its bf16 weight cache (engine/autocast.hpp).
// The cache maps a parameter's TensorImpl to its bf16 copy; it holds the parameter too, so
// the key cannot be reused by another tensor while the entry lives.
#include "engine/autocast.hpp"

#include <memory>
#include <unordered_map>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "engine/ops/low_rank_adapter_internal.hpp"

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

// The parameter x is a view of, or null: x was made by a view op (same storage) from a
// contiguous leaf that requires grad — a layer's matmul on rows of its fused weight
// (attention_dense's q, k, v slices of qkv.weight). Its grad_fn's one input is that leaf.
const Tensor* viewed_parameter(const Tensor& x) {
  const std::shared_ptr<Node>& fn = x.impl()->grad_fn;
  if (fn == nullptr || fn->released() || fn->inputs().size() != 1) return nullptr;
  const Tensor& base = fn->inputs()[0];
  if (!base.defined() || !base.is_leaf() || !base.requires_grad()) return nullptr;
  if (base.impl()->storage != x.impl()->storage || !base.is_contiguous()) return nullptr;
  return &base;
}

// The cached bf16 copy of the parameter `p` (a leaf that requires grad), made on first use.
Tensor cached_copy(const Tensor& p) {
  AutocastState& s = state();
  auto it = s.weights.find(p.impl());
  if (it != s.weights.end()) return it->second.bf16;
  Tensor copy = round_to_bf16(p);
  s.weights.emplace(p.impl(), CachedCopy{p, copy});
  return copy;
}

// The view `x` takes of `base`, taken of base's bf16 copy instead (both contiguous with the
// same shape, so the same element offsets and strides address the same elements).
Tensor same_view_of(const Tensor& copy, const Tensor& base, const Tensor& x) {
  auto view = std::make_shared<TensorImpl>();
  view->storage = copy.impl()->storage;
  view->shape = x.shape();
  view->strides = x.impl()->strides;
  view->offset = copy.impl()->offset + (x.impl()->offset - base.impl()->offset);
  view->dtype = DType::kBF16;
  return Tensor(std::move(view));
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

void autocast_use_copy(const Tensor& param, const Tensor& copy) {
  AutocastState& s = state();
  if (s.dtype != DType::kBF16)
    throw Error(ErrorKind::kInvalidArgument,
                "autocast_use_copy: no bf16 autocast scope is open (open one first)");
  if (!param.is_leaf() || !param.requires_grad() || param.dtype() != DType::kF32 ||
      !param.is_contiguous())
    throw Error(ErrorKind::kInvalidArgument,
                "autocast_use_copy: expected a contiguous f32 parameter (a leaf that requires "
                "grad), found " +
                    param.str());
  if (copy.dtype() != DType::kBF16 || copy.shape() != param.shape() || !copy.is_contiguous())
    throw Error(ErrorKind::kInvalidArgument,
                "autocast_use_copy: expected a contiguous bf16 copy shaped like " + param.str() +
                    ", found " + copy.str());
  s.weights.insert_or_assign(param.impl(), CachedCopy{param, copy.detach()});
}

Tensor autocast_bf16_operand(const Tensor& x) {
  if (x.dtype() == DType::kBF16) return x.detach();
  if (x.is_leaf() && x.requires_grad()) return cached_copy(x);
  if (const Tensor* base = viewed_parameter(x)) return same_view_of(cached_copy(*base), *base, x);
  // A frozen weight carrying a low-rank adapter (LoRA's base) is a parameter too: cached.
  if (const std::optional<Tensor> adapted = detail::adapted_parameter_of(x))
    return same_view_of(cached_copy(*adapted), *adapted, x);
  return round_to_bf16(x);
}

}  // namespace patchbay::engine
