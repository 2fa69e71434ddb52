// The "single" component (see single_process.hpp).
#include "single_process.hpp"

#include <cstring>
#include <vector>

namespace patchbay_parallel_single {
namespace {

size_t element_size(pb_dtype dtype) {
  switch (dtype) {
    case PB_DTYPE_F32: return 4;
    case PB_DTYPE_BF16: return 2;
    case PB_DTYPE_F16: return 2;
    case PB_DTYPE_I32: return 4;
    case PB_DTYPE_I64: return 8;
  }
  throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT, "unknown dtype " + std::to_string(static_cast<int>(dtype)));
}

// Copies every element of `from` into `to` (same numel and dtype, checked by the adapter).
// Contiguous CPU tensors are copied byte for byte; anything else goes through host memory so
// that any layout or device the engine supports works.
void copy_elements(const patchbay::Tensor& from, const patchbay::Tensor& to) {
  const pb_ops_table* ops = from.ops();
  const size_t bytes = static_cast<size_t>(from.numel()) * element_size(from.dtype());
  if (bytes == 0) return;
  const bool on_cpu = ops->device_type(from.handle()) == PB_DEVICE_CPU && ops->device_type(to.handle()) == PB_DEVICE_CPU;
  if (on_cpu && from.is_contiguous() && to.is_contiguous()) {
    std::memmove(to.data<unsigned char>(), from.data<unsigned char>(), bytes);
    return;
  }
  std::vector<unsigned char> staging(bytes);
  patchbay::check_ops_status(ops, ops->copy_to_host(from.handle(), staging.data(), bytes), "copy in");
  patchbay::check_ops_status(ops, ops->copy_from_host(to.handle(), staging.data(), bytes), "copy out");
}

}  // namespace

SingleProcess::SingleProcess(const patchbay::Host& /*host*/, const patchbay::ConfigView& /*config*/) {}

// One rank: SUM and MAX over {tensor} are tensor, AVG is tensor / 1.
void SingleProcess::all_reduce(const patchbay::Tensor& /*tensor*/, pb_collective_op /*op*/) {}

// Root is 0 (checked by the adapter), which already holds the value.
void SingleProcess::broadcast(const patchbay::Tensor& /*tensor*/, int64_t /*root*/) {}

void SingleProcess::all_gather(const patchbay::Tensor& in, const patchbay::Tensor& out) {
  if (in.handle() != out.handle()) copy_elements(in, out);
}

void SingleProcess::reduce_scatter(const patchbay::Tensor& in, const patchbay::Tensor& out,
                                   pb_collective_op /*op*/) {
  if (in.handle() != out.handle()) copy_elements(in, out);
}

}  // namespace patchbay_parallel_single
