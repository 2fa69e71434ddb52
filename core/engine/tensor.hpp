// The engine's tensor: a shared handle to (storage, shape, strides in elements, storage
// offset, dtype) plus autograd state. Copying a Tensor copies the handle (like
// torch.Tensor); views share storage. Ops live in engine/ops.hpp; the view methods here are
// thin forwards to them so `x.transpose(0, 1).contiguous()` reads naturally.
//
// Autograd state (engine/autograd.hpp): a tensor produced by an op while grad mode is on and
// some input requires grad carries grad_fn (the Node that made it) and output_index; a leaf
// with requires_grad accumulates gradients into grad() on backward().
//
// Thread safety: a Tensor may be read from many threads; mutating one (data, grad,
// requires_grad) concurrently is the caller's problem, as in PyTorch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.hpp"
#include "engine/dtype.hpp"

namespace patchbay::engine {

using Shape = std::vector<int64_t>;

class Node;  // engine/autograd.hpp

// One device allocation; freed through its backend when the last view goes away.
class Storage {
 public:
  Storage(Device device, size_t bytes);
  // Wraps memory owned by someone else (not freed here); used for zero-copy views of
  // caller buffers. The caller keeps `data` alive as long as any tensor uses it.
  Storage(Device device, void* external_data, size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  Device device_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool owned_ = true;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;       // in elements; 0 for broadcast (expanded) dims
  int64_t offset = 0;  // in elements
  DType dtype = DType::kF32;
  // autograd
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;  // accumulated gradient of a leaf (same shape, contiguous)
  std::shared_ptr<Node> grad_fn;     // null for leaves and for tensors made without grad
  int output_index = 0;              // which output of grad_fn this tensor is
};

class Tensor {
 public:
  Tensor() = default;  // undefined tensor (no storage): defined() is false
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- creation (contents uninitialised for empty) ----
  static Tensor empty(const Shape& shape, DType dtype = DType::kF32, Device device = cpu());
  // Copies `count` elements of `dtype` from host memory `data` (count must equal numel).
  static Tensor from_data(const void* data, const Shape& shape, DType dtype = DType::kF32,
                          Device device = cpu());
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape,
                            DType dtype = DType::kF32);
  // Zero-copy view of external memory (contiguous); see Storage's external constructor.
  static Tensor wrap(void* data, const Shape& shape, DType dtype, Device device = cpu());

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  DType dtype() const { return impl_->dtype; }
  Device device() const { return impl_->storage->device(); }
  const Shape& shape() const { return impl_->shape; }
  const Shape& strides() const { return impl_->strides; }
  int64_t storage_offset() const { return impl_->offset; }
  int64_t dim() const { return static_cast<int64_t>(impl_->shape.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  bool is_contiguous() const;
  std::string str() const;  // "f32[2, 3] cpu:0"

  // Pointer to element 0 of this view (storage base + offset). CPU tensors only for reads.
  void* data_ptr() const;
  template <class T>
  T* data() const {
    return static_cast<T*>(data_ptr());
  }
  // Reads a 1-element tensor as double. On a device tensor both copy to the host first and
  // so wait for the device: call them only where a value is printed or decided on.
  double item() const;
  // All elements in row-major order, converted to f32 (works on any view).
  std::vector<float> to_vector() const;

  // ---- autograd ----
  bool requires_grad() const { return impl_->requires_grad; }
  // Only on leaves (grad_fn == null); returns *this for chaining.
  Tensor& set_requires_grad(bool value);
  bool is_leaf() const { return impl_->grad_fn == nullptr; }
  const std::shared_ptr<Node>& grad_fn() const { return impl_->grad_fn; }
  int output_index() const { return impl_->output_index; }
  Tensor grad() const;  // undefined until a backward pass reaches this leaf
  void set_grad(const Tensor& grad);
  void zero_grad();  // drops the accumulated gradient (grad() becomes undefined)
  // Same storage and view, no autograd history, requires_grad false.
  Tensor detach() const;

  // ---- views and conversions (forward to engine/ops.hpp) ----
  Tensor view(const Shape& shape) const;     // needs compatible strides; -1 infers one dim
  Tensor reshape(const Shape& shape) const;  // view when possible, else a contiguous copy
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor expand(const Shape& shape) const;  // broadcast size-1 dims (stride 0), no copy
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;
  Tensor contiguous() const;     // *this when already contiguous
  Tensor to(DType dtype) const;  // *this when already that dtype
  Tensor to(Device device) const;  // *this when already there (engine/ops_device.hpp)
  Tensor clone() const;

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Row-major strides of a contiguous tensor of `shape`.
Shape contiguous_strides(const Shape& shape);
int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);
// Normalises a possibly negative dim into [0, ndim); throws with `what` on error.
int64_t normalize_dim(int64_t dim, int64_t ndim, const char* what);

}  // namespace patchbay::engine
