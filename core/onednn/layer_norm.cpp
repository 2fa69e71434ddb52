// Layer normalisation over the last axis of [rows, cols] f32 (see onednn_ops.hpp), with
// oneDNN 2.6's layer_normalization primitives and separate scale (gain) / shift (bias)
// tensors (flags use_scale / use_shift).
//
// Backward flavours: oneDNN 2.6 accepts the scale/shift flags only with
// prop_kind::backward (backward_data with use_scale fails to create), so whenever there is
// a gain we run prop_kind::backward and let diff_scale land in per-thread scratch if the
// caller did not ask for diff_gain; backward_data only without gain and diff_bias.
// A wanted diff_bias without a forward bias still works: the shift flag only adds the
// diff_shift output, sum over rows of diff_dst.
#include <oneapi/dnnl/dnnl.hpp>

#include <string>
#include <vector>

#include "onednn/onednn_ops.hpp"
#include "onednn/primitive_cache.hpp"

namespace patchbay::onednn {
namespace {

using detail::CacheKey;

std::string describe(std::int64_t rows, std::int64_t cols) {
  return "[rows " + std::to_string(rows) + ", cols " + std::to_string(cols) + "]";
}

struct Descs {
  dnnl::memory::desc data;   // [rows, cols]
  dnnl::memory::desc stats;  // [rows]
  dnnl::memory::desc param;  // [cols]
};

Descs make_descs(std::int64_t rows, std::int64_t cols) {
  using dnnl::memory;
  return {memory::desc({rows, cols}, memory::data_type::f32, memory::format_tag::ab),
          memory::desc({rows}, memory::data_type::f32, memory::format_tag::a),
          memory::desc({cols}, memory::data_type::f32, memory::format_tag::a)};
}

dnnl::normalization_flags flags_for(bool scale, bool shift) {
  auto flags = dnnl::normalization_flags::none;
  if (scale) flags |= dnnl::normalization_flags::use_scale;
  if (shift) flags |= dnnl::normalization_flags::use_shift;
  return flags;
}

dnnl::layer_normalization_forward::primitive_desc forward_pd(const Descs& descs, float epsilon,
                                                             dnnl::normalization_flags flags) {
  return dnnl::layer_normalization_forward::primitive_desc(
      dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_training, descs.data,
                                              descs.stats, epsilon, flags),
      detail::base_attr(), detail::cpu_engine());
}

// Scratch for outputs the caller did not ask for (per thread, grown on demand).
float* scratch(std::vector<float>& buffer, std::int64_t count) {
  if (buffer.size() < static_cast<std::size_t>(count)) buffer.resize(static_cast<std::size_t>(count));
  return buffer.data();
}

}  // namespace

void layer_norm_forward(const LayerNormForwardArgs& args) {
  const std::int64_t rows = args.rows, cols = args.cols;
  if (rows < 0 || cols <= 0 || !(args.epsilon >= 0.0f)) {
    detail::throw_invalid("layer_norm_forward",
                          "need rows >= 0, cols >= 1, epsilon >= 0; got " + describe(rows, cols));
  }
  if (!args.src || !args.dst) detail::throw_invalid("layer_norm_forward", "null src or dst");
  if ((args.mean == nullptr) != (args.variance == nullptr)) {
    detail::throw_invalid("layer_norm_forward", "pass both mean and variance, or neither");
  }
  if (rows == 0) return;
  const bool scale = args.gain != nullptr, shift = args.bias != nullptr;
  const CacheKey key{static_cast<std::int64_t>(detail::OpTag::kLayerNormForward), rows, cols,
                     detail::float_bits(args.epsilon), scale, shift};
  thread_local std::vector<float> mean_scratch, variance_scratch;
  float* mean = args.mean ? args.mean : scratch(mean_scratch, rows);
  float* variance = args.variance ? args.variance : scratch(variance_scratch, rows);

  detail::run_guarded("layer_norm_forward", [&] { return describe(rows, cols); }, [&] {
    auto cached = detail::find_or_build(key, [&] {
      const Descs descs = make_descs(rows, cols);
      auto pd = forward_pd(descs, args.epsilon, flags_for(scale, shift));
      return detail::CachedPrimitive{dnnl::layer_normalization_forward(pd),
                                     {descs.data, descs.stats, descs.param},
                                     pd.scratchpad_desc()};
    });
    const auto& d = cached->descs;
    std::unordered_map<int, dnnl::memory> exec_args{
        {DNNL_ARG_SRC, detail::wrap(d[0], args.src)},
        {DNNL_ARG_DST, detail::wrap(d[0], args.dst)},
        {DNNL_ARG_MEAN, detail::wrap(d[1], mean)},
        {DNNL_ARG_VARIANCE, detail::wrap(d[1], variance)}};
    if (scale) exec_args.emplace(DNNL_ARG_SCALE, detail::wrap(d[2], args.gain));
    if (shift) exec_args.emplace(DNNL_ARG_SHIFT, detail::wrap(d[2], args.bias));
    detail::execute(*cached, exec_args);
  });
}

void layer_norm_backward(const LayerNormBackwardArgs& args) {
  const std::int64_t rows = args.rows, cols = args.cols;
  if (rows < 0 || cols <= 0 || !(args.epsilon >= 0.0f)) {
    detail::throw_invalid("layer_norm_backward",
                          "need rows >= 0, cols >= 1, epsilon >= 0; got " + describe(rows, cols));
  }
  if (!args.src || !args.diff_dst || !args.mean || !args.variance || !args.diff_src) {
    detail::throw_invalid("layer_norm_backward",
                          "src, diff_dst, mean, variance and diff_src are required for " +
                              describe(rows, cols));
  }
  if (args.diff_gain && !args.gain) {
    detail::throw_invalid("layer_norm_backward",
                          "diff_gain requested but the forward had no gain, for " +
                              describe(rows, cols));
  }
  const bool scale = args.gain != nullptr;
  const bool shift = args.diff_bias != nullptr;
  if (rows == 0) {
    // No rows: parameter gradients are empty sums.
    for (std::int64_t c = 0; c < cols; ++c) {
      if (args.diff_gain) args.diff_gain[c] = 0.0f;
      if (args.diff_bias) args.diff_bias[c] = 0.0f;
    }
    return;
  }
  const CacheKey key{static_cast<std::int64_t>(detail::OpTag::kLayerNormBackward), rows, cols,
                     detail::float_bits(args.epsilon), scale, shift};
  thread_local std::vector<float> diff_gain_scratch;
  float* diff_gain = args.diff_gain ? args.diff_gain : scratch(diff_gain_scratch, cols);
  thread_local std::vector<float> shift_scratch;
  const float* unused_shift = shift ? scratch(shift_scratch, cols) : nullptr;

  detail::run_guarded("layer_norm_backward", [&] { return describe(rows, cols); }, [&] {
    auto cached = detail::find_or_build(key, [&] {
      const Descs descs = make_descs(rows, cols);
      const auto flags = flags_for(scale, shift);
      const auto prop =
          scale || shift ? dnnl::prop_kind::backward : dnnl::prop_kind::backward_data;
      dnnl::layer_normalization_backward::primitive_desc pd(
          dnnl::layer_normalization_backward::desc(prop, descs.data, descs.data, descs.stats,
                                                   args.epsilon, flags),
          detail::base_attr(), detail::cpu_engine(), forward_pd(descs, args.epsilon, flags));
      return detail::CachedPrimitive{dnnl::layer_normalization_backward(pd),
                                     {descs.data, descs.stats, descs.param},
                                     pd.scratchpad_desc()};
    });
    const auto& d = cached->descs;
    std::unordered_map<int, dnnl::memory> exec_args{
        {DNNL_ARG_SRC, detail::wrap(d[0], args.src)},
        {DNNL_ARG_DIFF_DST, detail::wrap(d[0], args.diff_dst)},
        {DNNL_ARG_MEAN, detail::wrap(d[1], args.mean)},
        {DNNL_ARG_VARIANCE, detail::wrap(d[1], args.variance)},
        {DNNL_ARG_DIFF_SRC, detail::wrap(d[0], args.diff_src)}};
    if (scale) exec_args.emplace(DNNL_ARG_SCALE, detail::wrap(d[2], args.gain));
    if (scale) exec_args.emplace(DNNL_ARG_DIFF_SCALE, detail::wrap(d[2], diff_gain));
    if (shift) {
      // oneDNN 2.6 checks that a use_shift backward is handed the shift tensor although
      // no gradient depends on it; zeros stand in for the forward's bias.
      exec_args.emplace(DNNL_ARG_SHIFT, detail::wrap(d[2], unused_shift));
      exec_args.emplace(DNNL_ARG_DIFF_SHIFT, detail::wrap(d[2], args.diff_bias));
    }
    detail::execute(*cached, exec_args);
  });
}

}  // namespace patchbay::onednn
