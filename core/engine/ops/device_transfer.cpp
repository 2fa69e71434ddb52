// to_device and cross-device byte transfers (ops_device.hpp). The bytes move through the
// Backend of the non-CPU side (backend.copy on its default stream), never through a kernel
// of the dispatch table, so every backend supports moving tensors to and from the host as
// soon as it is registered. A device-to-host transfer is where the host reads from the
// device: the device's recorded index errors are raised there (device_index_errors.hpp).
#include "engine/autograd.hpp"
#include "engine/device_index_errors.hpp"
#include "engine/ops.hpp"
#include "engine/ops_device.hpp"

namespace patchbay::engine {

void transfer_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                    size_t bytes) {
  if (bytes == 0) return;
  Backend& backend = backend_for(dst_device.type != DeviceType::kCpu ? dst_device : src_device);
  backend.copy(dst, dst_device, src, src_device, bytes, backend.default_stream());
  if (dst_device.type == DeviceType::kCpu && src_device.type != DeviceType::kCpu)
    raise_index_errors(src_device);
}

Tensor to_device(const Tensor& x, Device device) {
  if (x.device() == device) return x;
  Tensor source;
  {
    NoGradGuard no_grad;
    source = x.detach().contiguous();  // on x's device, through its own copy kernel
  }
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);
  transfer_bytes(out.data_ptr(), device, source.data_ptr(), source.device(), out.nbytes());
  if (is_floating(x.dtype()))
    record_op("to_device", {x}, {&out}, [from = x.device()](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{to_device(g[0], from)};
    });
  return out;
}

}  // namespace patchbay::engine
