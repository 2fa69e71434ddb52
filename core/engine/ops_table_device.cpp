// Ops table version 11: device tensors through the C ABI (to_device, from_data_on_device).
// Versions before 11 had every entry here refuse device tensors; copy_to_host and
// copy_from_host (ops_table.cpp) accept them from this version on.
#include <exception>
#include <string>

#include "common/error.hpp"
#include "engine/ops_device.hpp"
#include "engine/ops_table.hpp"
#include "patchbay/ops.h"

namespace patchbay::engine {

pb_status* ops_table_status(pb_status_code code, const std::string& message);  // ops_table.cpp

namespace {

Device device_of(pb_device_type type, int32_t index) {
  if (type != PB_DEVICE_CPU && type != PB_DEVICE_CUDA)
    throw Error(ErrorKind::kInvalidArgument,
                "unknown pb_device_type " + std::to_string(static_cast<int>(type)));
  return Device{type == PB_DEVICE_CPU ? DeviceType::kCpu : DeviceType::kCuda, index};
}

template <class Fn>
pb_status* produce(const char* what, pb_tensor** out, Fn&& fn) noexcept {
  try {
    if (out == nullptr) throw Error(ErrorKind::kInvalidArgument, "out must not be NULL");
    *out = ops_table_wrap(fn());
    return nullptr;
  } catch (const Error& e) {
    return ops_table_status(
        e.kind() == ErrorKind::kInternal ? PB_STATUS_INTERNAL : PB_STATUS_INVALID_ARGUMENT,
        std::string(what) + ": " + e.what());
  } catch (const std::exception& e) {
    return ops_table_status(PB_STATUS_INTERNAL, std::string(what) + ": " + e.what());
  }
}

pb_status* to_device_fn(const pb_tensor* t, pb_device_type type, int32_t index, pb_tensor** out) {
  return produce("to_device", out, [&] {
    if (t == nullptr) throw Error(ErrorKind::kInvalidArgument, "tensor must not be NULL");
    return to_device(ops_table_tensor(t), device_of(type, index));
  });
}

pb_status* from_data_on_device_fn(const void* data, const int64_t* shape, size_t ndim,
                                  pb_dtype dtype, pb_device_type type, int32_t index,
                                  pb_tensor** out) {
  return produce("from_data_on_device", out, [&] {
    if (ndim > 0 && shape == nullptr)
      throw Error(ErrorKind::kInvalidArgument, "shape must not be NULL");
    if (dtype < PB_DTYPE_F32 || dtype > PB_DTYPE_I64)
      throw Error(ErrorKind::kInvalidArgument,
                  "unknown pb_dtype " + std::to_string(static_cast<int>(dtype)));
    const Shape dims(shape, shape + ndim);
    if (shape_numel(dims) > 0 && data == nullptr)
      throw Error(ErrorKind::kInvalidArgument, "data must not be NULL");
    return Tensor::from_data(data, dims, static_cast<DType>(dtype), device_of(type, index));
  });
}

}  // namespace

void fill_device_entries(pb_ops_table& table) {
  table.to_device = to_device_fn;
  table.from_data_on_device = from_data_on_device_fn;
}

}  // namespace patchbay::engine
