// The stand-in device's kernels for the ops that check indices (cross_entropy, embedding,
// gather, scatter_add and the backwards that reuse their index): where the CPU kernels aliased
// to the stand-in would throw at once, these take the device's path, so CI runs it: the CPU
// twin of the CUDA check kernel (kernels/cuda/index_checks_reference.hpp) records a bad entry
// in the stand-in's error record (engine/device_index_errors.hpp) and the op carries on with
// NaN outputs (its gradient kernels then skip the call), to be raised at the next read.
// A clean index runs the CPU kernel itself, so results stay the CPU's bit for bit.
#include <limits>

#include "engine/device_index_errors.hpp"
#include "engine/dispatch.hpp"
#include "engine/host_standin_device.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops.hpp"
#include "engine/ops/index_tensor.hpp"
#include "patchbay/kernels/cuda/index_checks_reference.hpp"

namespace patchbay::engine {
namespace {

namespace math = kernels::cuda::math;
namespace twin = kernels::cuda::reference;
constexpr DeviceType kStandin = DeviceType::kCuda;

// Runs the twin check on `index` (stand-in memory is host memory); true when it is clean.
bool index_clean(const Tensor& index, const math::IndexCheck& check, float* mean_factors) {
  return detail::visit_index_type(index, [&](auto index_type) {
    using Index = decltype(index_type);
    return twin::check_indices(index.data<Index>(), index.numel(), check,
                               index_error_record_for(index.device()), mean_factors)
               .first_bad < 0;
  });
}

// The same scan without recording (a backward of an op whose forward recorded already).
bool index_clean_quiet(const Tensor& index, const math::IndexCheck& check) {
  return detail::visit_index_type(index, [&](auto index_type) {
    using Index = decltype(index_type);
    return twin::scan_indices(index.data<Index>(), index.numel(), check).first_bad < 0;
  });
}

void fill_nan(Tensor& t) { fill_(t, std::numeric_limits<double>::quiet_NaN()); }

math::IndexCheck target_check(int64_t classes, const CrossEntropyOptions& options) {
  return {.op = math::IndexErrorOp::kCrossEntropyTarget,
          .bound = classes,
          .allow_extra = true,
          .extra = options.ignore_index,
          .detail = options.ignore_index};
}

void cross_entropy_standin(const Tensor& logits, const Tensor& targets,
                           const CrossEntropyOptions& options, Tensor& row_loss,
                           Tensor& row_logsumexp, Tensor& mean_factors) {
  if (!index_clean(targets, target_check(logits.size(1), options), mean_factors.data<float>())) {
    fill_nan(row_loss);
    fill_nan(row_logsumexp);
    return;
  }
  find_kernel<kernel::CrossEntropyForwardKernel>("cross_entropy", DeviceType::kCpu)(
      logits, targets, options, row_loss, row_logsumexp, mean_factors);
}

void cross_entropy_backward_standin(const Tensor& logits, const Tensor& targets,
                                    const Tensor& row_logsumexp, const Tensor& row_grad,
                                    const CrossEntropyOptions& options, Tensor& grad_logits) {
  if (!index_clean_quiet(targets, target_check(logits.size(1), options))) {
    fill_nan(grad_logits);
    return;
  }
  find_kernel<kernel::CrossEntropyBackwardKernel>("cross_entropy_backward", DeviceType::kCpu)(
      logits, targets, row_logsumexp, row_grad, options, grad_logits);
}

void embedding_standin(const Tensor& weights, const Tensor& ids, Tensor& out) {
  if (!index_clean(ids, {.op = math::IndexErrorOp::kEmbeddingId, .bound = weights.size(0)},
                   nullptr)) {
    fill_nan(out);
    return;
  }
  find_kernel<kernel::EmbeddingForwardKernel>("embedding", DeviceType::kCpu)(weights, ids, out);
}

void embedding_backward_standin(const Tensor& grad_out, const Tensor& ids, Tensor& grad_weights) {
  if (!index_clean_quiet(ids,
                         {.op = math::IndexErrorOp::kEmbeddingId, .bound = grad_weights.size(0)}))
    return;  // accumulates nothing, as the CUDA kernel skips a bad id
  find_kernel<kernel::EmbeddingBackwardKernel>("embedding_backward", DeviceType::kCpu)(
      grad_out, ids, grad_weights);
}

math::IndexCheck dim_check(math::IndexErrorOp op, const Tensor& data, int64_t dim) {
  return {.op = op, .bound = data.size(dim), .detail = dim};
}

void gather_standin(const Tensor& input, int64_t dim, const Tensor& index, Tensor& out) {
  if (!index_clean(index, dim_check(math::IndexErrorOp::kGatherIndex, input, dim), nullptr)) {
    fill_nan(out);
    return;
  }
  find_kernel<kernel::GatherKernel>("gather", DeviceType::kCpu)(input, dim, index, out);
}

void scatter_add_standin(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  if (!index_clean(index, dim_check(math::IndexErrorOp::kScatterAddIndex, self, dim), nullptr)) {
    fill_nan(self);
    return;
  }
  find_kernel<kernel::ScatterAddKernel>("scatter_add", DeviceType::kCpu)(self, dim, index, src);
}

void scatter_add_backward_src_standin(const Tensor& grad_out, int64_t dim, const Tensor& index,
                                      Tensor& grad_src) {
  if (!index_clean_quiet(index, dim_check(math::IndexErrorOp::kScatterAddIndex, grad_out, dim))) {
    fill_nan(grad_src);
    return;
  }
  find_kernel<kernel::ScatterAddBackwardSrcKernel>("scatter_add_backward_src", DeviceType::kCpu)(
      grad_out, dim, index, grad_src);
}

}  // namespace

void register_standin_checked_kernels(const std::vector<std::string>& ops_without_kernel) {
  const auto wanted = [&](const char* op) {
    for (const std::string& missing : ops_without_kernel)
      if (missing == op) return false;
    return true;
  };
  namespace sig = kernel;
  if (wanted("cross_entropy"))
    register_kernel<sig::CrossEntropyForwardKernel>("cross_entropy", kStandin,
                                                    cross_entropy_standin);
  if (wanted("cross_entropy_backward"))
    register_kernel<sig::CrossEntropyBackwardKernel>("cross_entropy_backward", kStandin,
                                                     cross_entropy_backward_standin);
  if (wanted("embedding"))
    register_kernel<sig::EmbeddingForwardKernel>("embedding", kStandin, embedding_standin);
  if (wanted("embedding_backward"))
    register_kernel<sig::EmbeddingBackwardKernel>("embedding_backward", kStandin,
                                                  embedding_backward_standin);
  if (wanted("gather")) register_kernel<sig::GatherKernel>("gather", kStandin, gather_standin);
  if (wanted("scatter_add"))
    register_kernel<sig::ScatterAddKernel>("scatter_add", kStandin, scatter_add_standin);
  if (wanted("scatter_add_backward_src"))
    register_kernel<sig::ScatterAddBackwardSrcKernel>("scatter_add_backward_src", kStandin,
                                                      scatter_add_backward_src_standin);
}

}  // namespace patchbay::engine
