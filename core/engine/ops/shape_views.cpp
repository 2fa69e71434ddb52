// View ops: view/reshape, permute/transpose, slice/narrow, expand, unsqueeze/squeeze and
// contiguous. Views share storage with their input; their backward maps the gradient back
// to the input's shape (reshape, inverse permute, zero-padded slice, sum over broadcast).
#include <numeric>
#include <optional>

#include "engine/cpu/strided_loop.hpp"
#include "engine/ops/op_helpers.hpp"

namespace patchbay::engine {
namespace {

// AddIntoFn of slice: grad_input (f32, contiguous: the input's running gradient) gets
// grad_outputs[0] added into the window [start, end) by `step` along dim d.
AddIntoFn slice_add_into(int64_t d, int64_t start, int64_t end, int64_t step) {
  return [d, start, end, step](const std::vector<Tensor>& g, Tensor& grad_input) {
    const Tensor window = slice(grad_input.detach(), d, start, end, step);
    const Tensor add = detail::as_f32_contiguous(g[0]);
    float* const base = static_cast<float*>(grad_input.data_ptr()) +
                        (window.storage_offset() - grad_input.storage_offset());
    const float* const from = add.data<float>();
    loops::for_each_row<2>(
        window.shape(), {window.strides(), add.strides()},
        [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
          float* o = base + off[0];
          const float* a = from + off[1];
          for (int64_t i = 0; i < n; ++i) o[i * st[0]] += a[i * st[1]];
        });
  };
}

Tensor make_view(const Tensor& x, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = x.impl()->storage;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = x.dtype();
  return Tensor(std::move(impl));
}

// Strides for viewing (old_shape, old_strides) as new_shape without copying, if possible
// (the algorithm of PyTorch's computeStride: walk contiguous chunks from the right).
std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides,
                                  const Shape& new_shape) {
  if (shape_numel(old_shape) == 0 || old_shape.empty()) return contiguous_strides(new_shape);
  Shape new_strides(new_shape.size());
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(old_shape.size()) - 1; tensor_d >= 0; --tensor_d) {
    auto td = static_cast<size_t>(tensor_d);
    tensor_numel *= old_shape[td];
    if (tensor_d == 0 ||
        (old_shape[td - 1] != 1 && old_strides[td - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 &&
             (view_numel < tensor_numel || new_shape[static_cast<size_t>(view_d)] == 1)) {
        new_strides[static_cast<size_t>(view_d)] = view_numel * chunk_base_stride;
        view_numel *= new_shape[static_cast<size_t>(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[td - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

Shape infer_shape(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer >= 0)
        throw Error(ErrorKind::kInvalidArgument, std::string(op) + ": only one dim may be -1");
      infer = static_cast<int64_t>(i);
    } else if (out[i] < 0) {
      throw Error(ErrorKind::kInvalidArgument,
                  std::string(op) + ": negative size in " + shape_str(shape));
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      throw Error(ErrorKind::kInvalidArgument, std::string(op) + ": cannot infer -1 in " +
                                                   shape_str(shape) + " for " +
                                                   std::to_string(numel) + " elements");
    out[static_cast<size_t>(infer)] = numel / known;
  }
  if (shape_numel(out) != numel)
    throw Error(ErrorKind::kInvalidArgument, std::string(op) + ": shape " + shape_str(shape) +
                                                 " has " + std::to_string(shape_numel(out)) +
                                                 " elements, the tensor has " +
                                                 std::to_string(numel));
  return out;
}

void record_reshape(const char* name, const Tensor& x, Tensor& out) {
  record_op(name, {x}, {&out}, [in_shape = x.shape()](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{reshape(g[0], in_shape)};
  });
}

}  // namespace

Tensor view(const Tensor& x, const Shape& shape) {
  Shape target = infer_shape(shape, x.numel(), "view");
  auto strides = view_strides(x.shape(), x.strides(), target);
  if (!strides)
    throw Error(ErrorKind::kInvalidArgument,
                "view: cannot view " + x.str() + " with strides " + shape_str(x.strides()) +
                    " as " + shape_str(target) + "; use reshape() (copies) or contiguous() first");
  Tensor out = make_view(x, target, *strides, x.storage_offset());
  record_reshape("view", x, out);
  return out;
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  Shape target = infer_shape(shape, x.numel(), "reshape");
  if (view_strides(x.shape(), x.strides(), target)) return view(x, target);
  return view(contiguous(x), target);
}

Tensor permute(const Tensor& x, const Shape& dims) {
  const int64_t n = x.dim();
  if (static_cast<int64_t>(dims.size()) != n)
    throw Error(ErrorKind::kInvalidArgument,
                "permute: " + std::to_string(dims.size()) + " dims given for " + x.str());
  Shape shape(dims.size()), strides(dims.size()), inverse(dims.size(), -1);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = normalize_dim(dims[i], n, "permute");
    if (inverse[static_cast<size_t>(d)] != -1)
      throw Error(ErrorKind::kInvalidArgument,
                  "permute: dim " + std::to_string(d) + " repeated in " + shape_str(dims));
    inverse[static_cast<size_t>(d)] = static_cast<int64_t>(i);
    shape[i] = x.shape()[static_cast<size_t>(d)];
    strides[i] = x.strides()[static_cast<size_t>(d)];
  }
  Tensor out = make_view(x, shape, strides, x.storage_offset());
  record_op("permute", {x}, {&out}, [inverse](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{permute(g[0], inverse)};
  });
  return out;
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  Shape dims(static_cast<size_t>(x.dim()));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[static_cast<size_t>(normalize_dim(d0, x.dim(), "transpose"))],
            dims[static_cast<size_t>(normalize_dim(d1, x.dim(), "transpose"))]);
  return permute(x, dims);
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  int64_t d = normalize_dim(dim, x.dim(), "slice");
  int64_t size = x.shape()[static_cast<size_t>(d)];
  if (step <= 0)
    throw Error(ErrorKind::kInvalidArgument,
                "slice: step must be positive, found " + std::to_string(step));
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape shape = x.shape(), strides = x.strides();
  shape[static_cast<size_t>(d)] = (end - start + step - 1) / step;
  strides[static_cast<size_t>(d)] *= step;
  Tensor out = make_view(x, shape, strides,
                         x.storage_offset() + start * x.strides()[static_cast<size_t>(d)]);
  record_op(
      "slice", {x}, {&out},
      [in_shape = x.shape(), dt = x.dtype(), d, start, end, step](const std::vector<Tensor>& g) {
        Tensor grad = zeros(in_shape, dt, g[0].device());
        Tensor window = slice(grad, d, start, end, step);
        copy_(window, g[0]);
        return std::vector<Tensor>{grad};
      });
  // Several slices of one tensor (q, k and v on rows of a fused weight): once the input's
  // running gradient exists, each later slice adds into its window in place instead of making
  // a zero-filled gradient of the whole input and adding that (autograd.hpp, AddIntoFn).
  // Same sums: the window's elements get the same additions; the others would get + 0.
  if (out.grad_fn()) out.grad_fn()->set_add_into(slice_add_into(d, start, end, step));
  return out;
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  int64_t d = normalize_dim(dim, x.dim(), "narrow");
  int64_t size = x.shape()[static_cast<size_t>(d)];
  if (start < 0) start += size;
  if (start < 0 || length < 0 || start + length > size)
    throw Error(ErrorKind::kInvalidArgument,
                "narrow: [" + std::to_string(start) + ", " + std::to_string(start + length) +
                    ") is outside dim " + std::to_string(d) + " of " + x.str());
  return slice(x, d, start, start + length, 1);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  if (shape.size() < static_cast<size_t>(x.dim()))
    throw Error(ErrorKind::kInvalidArgument,
                "expand: cannot expand " + x.str() + " to fewer dims " + shape_str(shape));
  if (shape == x.shape()) return x;
  size_t lead = shape.size() - static_cast<size_t>(x.dim());
  Shape strides(shape.size(), 0), out_shape = shape;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      if (out_shape[i] < 0)
        throw Error(ErrorKind::kInvalidArgument, "expand: -1 is not allowed in new leading dims");
      continue;
    }
    int64_t in = x.shape()[i - lead];
    if (out_shape[i] == -1) out_shape[i] = in;
    if (in == out_shape[i]) {
      strides[i] = x.strides()[i - lead];
    } else if (in != 1) {
      throw Error(ErrorKind::kInvalidArgument, "expand: cannot expand " + x.str() + " to " +
                                                   shape_str(shape) +
                                                   " (only size-1 dims broadcast)");
    }
  }
  Tensor out = make_view(x, out_shape, strides, x.storage_offset());
  record_op("expand", {x}, {&out}, [in_shape = x.shape()](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{sum_to_shape(g[0], in_shape)};
  });
  return out;
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  int64_t d = normalize_dim(dim, x.dim() + 1, "unsqueeze");
  Shape shape = x.shape();
  shape.insert(shape.begin() + d, 1);
  return view(x, shape);
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  int64_t d = normalize_dim(dim, x.dim(), "squeeze");
  if (x.shape()[static_cast<size_t>(d)] != 1)
    throw Error(ErrorKind::kInvalidArgument,
                "squeeze: dim " + std::to_string(d) + " of " + x.str() + " is not 1");
  Shape shape = x.shape();
  shape.erase(shape.begin() + d);
  return view(x, shape);
}

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  copy_(out, x);
  record_op("contiguous", {x}, {&out},
            [](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
  return out;
}

}  // namespace patchbay::engine
