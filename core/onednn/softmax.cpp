// softmax and log-softmax over the last axis of [rows, cols] f32 (see onednn_ops.hpp).
// oneDNN 2.6's softmax/logsoftmax primitives; the backward primitives take the forward's
// dst, so the caller keeps the output, never the input.
#include <oneapi/dnnl/dnnl.hpp>

#include <string>

#include "onednn/onednn_ops.hpp"
#include "onednn/primitive_cache.hpp"

namespace patchbay::onednn {
namespace {

using detail::CacheKey;

const char* op_name(SoftmaxKind kind, bool backward) {
  if (kind == SoftmaxKind::kSoftmax) return backward ? "softmax_backward" : "softmax_forward";
  return backward ? "log_softmax_backward" : "log_softmax_forward";
}

std::string describe(std::int64_t rows, std::int64_t cols) {
  return "[rows " + std::to_string(rows) + ", cols " + std::to_string(cols) + "]";
}

void validate(const char* op, std::int64_t rows, std::int64_t cols,
              std::initializer_list<const void*> buffers) {
  if (rows < 0 || cols < 0) detail::throw_invalid(op, "negative size " + describe(rows, cols));
  for (const void* buffer : buffers) {
    if (buffer == nullptr && rows * cols > 0) {
      detail::throw_invalid(op, "null buffer for " + describe(rows, cols));
    }
  }
}

dnnl::memory::desc rows_by_cols(std::int64_t rows, std::int64_t cols) {
  return dnnl::memory::desc({rows, cols}, dnnl::memory::data_type::f32,
                            dnnl::memory::format_tag::ab);
}

// Forward primitive descriptors; also the hints the backward descriptors need.
dnnl::softmax_forward::primitive_desc softmax_pd(const dnnl::memory::desc& data) {
  return dnnl::softmax_forward::primitive_desc(
      dnnl::softmax_forward::desc(dnnl::prop_kind::forward_training, data, 1),
      detail::base_attr(), detail::cpu_engine());
}

dnnl::logsoftmax_forward::primitive_desc log_softmax_pd(const dnnl::memory::desc& data) {
  return dnnl::logsoftmax_forward::primitive_desc(
      dnnl::logsoftmax_forward::desc(dnnl::prop_kind::forward_training, data, 1),
      detail::base_attr(), detail::cpu_engine());
}

}  // namespace

void softmax_forward(SoftmaxKind kind, const float* src, float* dst, std::int64_t rows,
                     std::int64_t cols) {
  const char* op = op_name(kind, false);
  validate(op, rows, cols, {src, dst});
  if (rows * cols == 0) return;
  const CacheKey key{static_cast<std::int64_t>(detail::OpTag::kSoftmaxForward),
                     static_cast<std::int64_t>(kind), rows, cols};
  detail::run_guarded(op, [&] { return describe(rows, cols); }, [&] {
    auto cached = detail::find_or_build(key, [&] {
      const auto data = rows_by_cols(rows, cols);
      if (kind == SoftmaxKind::kSoftmax) {
        const auto pd = softmax_pd(data);
        return detail::CachedPrimitive{dnnl::softmax_forward(pd), {data}, pd.scratchpad_desc()};
      }
      const auto pd = log_softmax_pd(data);
      return detail::CachedPrimitive{dnnl::logsoftmax_forward(pd), {data}, pd.scratchpad_desc()};
    });
    detail::execute(*cached, {{DNNL_ARG_SRC, detail::wrap(cached->descs[0], src)},
                                        {DNNL_ARG_DST, detail::wrap(cached->descs[0], dst)}});
  });
}

void softmax_backward(SoftmaxKind kind, const float* dst, const float* diff_dst,
                      float* diff_src, std::int64_t rows, std::int64_t cols) {
  const char* op = op_name(kind, true);
  validate(op, rows, cols, {dst, diff_dst, diff_src});
  if (rows * cols == 0) return;
  const CacheKey key{static_cast<std::int64_t>(detail::OpTag::kSoftmaxBackward),
                     static_cast<std::int64_t>(kind), rows, cols};
  detail::run_guarded(op, [&] { return describe(rows, cols); }, [&] {
    auto cached = detail::find_or_build(key, [&] {
      const auto data = rows_by_cols(rows, cols);
      if (kind == SoftmaxKind::kSoftmax) {
        dnnl::softmax_backward::primitive_desc pd(dnnl::softmax_backward::desc(data, data, 1),
                                                  detail::base_attr(), detail::cpu_engine(),
                                                  softmax_pd(data));
        return detail::CachedPrimitive{dnnl::softmax_backward(pd), {data},
                                       pd.scratchpad_desc()};
      }
      dnnl::logsoftmax_backward::primitive_desc pd(
          dnnl::logsoftmax_backward::desc(data, data, 1), detail::base_attr(),
          detail::cpu_engine(), log_softmax_pd(data));
      return detail::CachedPrimitive{dnnl::logsoftmax_backward(pd), {data},
                                     pd.scratchpad_desc()};
    });
    const auto& data = cached->descs[0];
    detail::execute(*cached, {{DNNL_ARG_DST, detail::wrap(data, dst)},
                                        {DNNL_ARG_DIFF_DST, detail::wrap(data, diff_dst)},
                                        {DNNL_ARG_DIFF_SRC, detail::wrap(data, diff_src)}});
  });
}

}  // namespace patchbay::onednn
