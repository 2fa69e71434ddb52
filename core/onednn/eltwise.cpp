// Element-wise activations through oneDNN 2.6's eltwise primitives (see onednn_ops.hpp).
// Data is viewed as a 1-D tensor of `count` elements; oneDNN's jit eltwise kernels are
// shape-agnostic, so one primitive per (algorithm, count, dtype) is all that is cached.
//
// Which backward reads dst (oneDNN's *_use_dst_for_bwd algorithms), and why it is exact:
//   relu      f'(x) = [x > 0] = [y > 0]             (slope 0, so y > 0 <=> x > 0)
//   tanh      f'(x) = 1 - y^2
//   logistic  f'(x) = y (1 - y)
//   exp       f'(x) = y
//   sqrt      f'(x) = 1 / (2 y)
// gelu_tanh, gelu_erf, swish and log have no such form in oneDNN and read src.
#include <oneapi/dnnl/dnnl.hpp>

#include <string>

#include "onednn/bf16_through_f32.hpp"
#include "onednn/onednn_ops.hpp"
#include "onednn/primitive_cache.hpp"

namespace patchbay::onednn {
namespace {

using detail::CacheKey;

struct EltwiseSpec {
  dnnl::algorithm forward;   // algorithm for forward (src-based)
  dnnl::algorithm backward;  // algorithm for backward (dst-based where exact)
  bool backward_uses_dst;
  float alpha;  // oneDNN alpha: relu negative slope, swish sigmoid scale
};

EltwiseSpec spec_of(EltwiseKind kind) {
  using a = dnnl::algorithm;
  switch (kind) {
    case EltwiseKind::kRelu:
      return {a::eltwise_relu, a::eltwise_relu_use_dst_for_bwd, true, 0.0f};
    case EltwiseKind::kGeluTanh:
      return {a::eltwise_gelu_tanh, a::eltwise_gelu_tanh, false, 0.0f};
    case EltwiseKind::kGeluErf:
      return {a::eltwise_gelu_erf, a::eltwise_gelu_erf, false, 0.0f};
    case EltwiseKind::kTanh:
      return {a::eltwise_tanh, a::eltwise_tanh_use_dst_for_bwd, true, 0.0f};
    case EltwiseKind::kLogistic:
      return {a::eltwise_logistic, a::eltwise_logistic_use_dst_for_bwd, true, 0.0f};
    case EltwiseKind::kExp:
      return {a::eltwise_exp, a::eltwise_exp_use_dst_for_bwd, true, 0.0f};
    case EltwiseKind::kLog:
      return {a::eltwise_log, a::eltwise_log, false, 0.0f};
    case EltwiseKind::kSqrt:
      return {a::eltwise_sqrt, a::eltwise_sqrt_use_dst_for_bwd, true, 0.0f};
    case EltwiseKind::kSwish:
      return {a::eltwise_swish, a::eltwise_swish, false, 1.0f};
  }
  throw Error(ErrorKind::kInvalidArgument, "onednn eltwise: unknown activation kind");
}

std::string describe(EltwiseKind kind, std::int64_t count) {
  return std::string("[") + eltwise_name(kind) + ", count " + std::to_string(count) + "]";
}

dnnl::memory::desc flat(std::int64_t count, DType dtype) {
  return dnnl::memory::desc({count}, detail::to_dnnl(dtype), dnnl::memory::format_tag::a);
}

}  // namespace

const char* eltwise_name(EltwiseKind kind) {
  switch (kind) {
    case EltwiseKind::kRelu: return "relu";
    case EltwiseKind::kGeluTanh: return "gelu_tanh";
    case EltwiseKind::kGeluErf: return "gelu_erf";
    case EltwiseKind::kTanh: return "tanh";
    case EltwiseKind::kLogistic: return "logistic";
    case EltwiseKind::kExp: return "exp";
    case EltwiseKind::kLog: return "log";
    case EltwiseKind::kSqrt: return "sqrt";
    case EltwiseKind::kSwish: return "swish";
  }
  return "unknown";
}

bool eltwise_backward_needs_dst(EltwiseKind kind) { return spec_of(kind).backward_uses_dst; }

void eltwise_forward(EltwiseKind kind, DType dtype, const void* src, void* dst,
                     std::int64_t count) {
  if (count < 0) detail::throw_invalid("eltwise_forward", "negative count " + describe(kind, count));
  if (count == 0) return;
  if (!src || !dst) detail::throw_invalid("eltwise_forward", "null buffer " + describe(kind, count));
  if (dtype == DType::kBF16 && !bf16_kernels_available()) {
    eltwise_forward_bf16_through_f32(kind, src, dst, count);
    return;
  }
  const EltwiseSpec spec = spec_of(kind);
  const CacheKey key{static_cast<std::int64_t>(detail::OpTag::kEltwiseForward),
                     static_cast<std::int64_t>(kind), static_cast<std::int64_t>(dtype), count};
  detail::run_guarded("eltwise_forward", [&] { return describe(kind, count); }, [&] {
    auto cached = detail::find_or_build(key, [&] {
      const auto data = flat(count, dtype);
      dnnl::eltwise_forward::primitive_desc pd(
          dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, spec.forward, data,
                                      spec.alpha, 0.0f),
          detail::base_attr(), detail::cpu_engine());
      return detail::CachedPrimitive{dnnl::eltwise_forward(pd), {data}, pd.scratchpad_desc()};
    });
    detail::execute(*cached, {{DNNL_ARG_SRC, detail::wrap(cached->descs[0], src)},
                                        {DNNL_ARG_DST, detail::wrap(cached->descs[0], dst)}});
  });
}

void eltwise_backward(EltwiseKind kind, const float* src, const float* dst,
                      const float* diff_dst, float* diff_src, std::int64_t count) {
  if (count < 0) {
    detail::throw_invalid("eltwise_backward", "negative count " + describe(kind, count));
  }
  if (count == 0) return;
  const EltwiseSpec spec = spec_of(kind);
  const float* saved = spec.backward_uses_dst ? dst : src;
  if (!saved || !diff_dst || !diff_src) {
    detail::throw_invalid("eltwise_backward",
                          std::string("needs ") + (spec.backward_uses_dst ? "dst" : "src") +
                              ", diff_dst and diff_src for " + describe(kind, count));
  }
  const CacheKey key{static_cast<std::int64_t>(detail::OpTag::kEltwiseBackward),
                     static_cast<std::int64_t>(kind), count};
  detail::run_guarded("eltwise_backward", [&] { return describe(kind, count); }, [&] {
    auto cached = detail::find_or_build(key, [&] {
      const auto data = flat(count, DType::kF32);
      dnnl::eltwise_forward::primitive_desc hint(
          dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, spec.backward, data,
                                      spec.alpha, 0.0f),
          detail::cpu_engine());
      dnnl::eltwise_backward::primitive_desc pd(
          dnnl::eltwise_backward::desc(spec.backward, data, data, spec.alpha, 0.0f),
          detail::base_attr(), detail::cpu_engine(), hint);
      return detail::CachedPrimitive{dnnl::eltwise_backward(pd), {data}, pd.scratchpad_desc()};
    });
    const auto& data = cached->descs[0];
    detail::execute(*cached,
                    {{spec.backward_uses_dst ? DNNL_ARG_DST : DNNL_ARG_SRC,
                      detail::wrap(data, saved)},
                     {DNNL_ARG_DIFF_DST, detail::wrap(data, diff_dst)},
                     {DNNL_ARG_DIFF_SRC, detail::wrap(data, diff_src)}});
  });
}

}  // namespace patchbay::onednn
