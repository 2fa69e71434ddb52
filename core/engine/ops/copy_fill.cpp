// Data movement without arithmetic: copy_ (strided, broadcasting, dtype-converting), fill_,
// to_dtype, concat and stack. Conversions follow the per-pair rules of engine/dtype.hpp:
// exact between integers and when widening, one rounding to nearest otherwise, truncation
// toward zero from float to integer. No value passes through double on the way.
#include <algorithm>
#include <cstdint>

#include "engine/cpu/strided_loop.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops/op_helpers.hpp"
#include "engine/ops_device.hpp"

namespace patchbay::engine {
namespace {

using kernel::CopyKernel;
using kernel::FillKernel;

template <class Load, class Store>
void copy_rows(const Tensor& src, Tensor& dst, Load load, Store store) {
  loops::for_each_row<2>(
      dst.shape(), {src.strides(), dst.strides()},
      [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
        if (st[0] == 1 && st[1] == 1) {  // unit strides: a loop the compiler vectorises
          for (int64_t i = 0; i < n; ++i) store(off[1] + i, load(off[0] + i));
          return;
        }
        for (int64_t i = 0; i < n; ++i) store(off[1] + i * st[1], load(off[0] + i * st[0]));
      });
}

// dst[i] = f32_to_bf16(src[i]), i < n: the rounding a bf16 autocast scope applies to every
// matmul operand and incoming gradient (GPT-2 124M at 1 x 1024: 200M elements per step).
// Compiled for AVX-512 / AVX2 / baseline (load-time pick); the generic row loop below ran it
// on one thread at baseline SSE2 width, 3% of the bf16 step. Same bits: the same
// branch-free rule, elementwise.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void f32_to_bf16_contiguous(const float* src, uint16_t* dst, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

// Both contiguous f32 -> bf16: chunks of kConvertChunk elements over the OpenMP threads.
bool copy_f32_to_bf16_dense(const Tensor& src, Tensor& dst) {
  if (src.dtype() != DType::kF32 || dst.dtype() != DType::kBF16 || !src.is_contiguous() ||
      !dst.is_contiguous())
    return false;
  constexpr int64_t kConvertChunk = int64_t{1} << 15;
  const int64_t n = dst.numel();
  const int64_t chunks = (n + kConvertChunk - 1) / kConvertChunk;
  const float* from = src.data<float>();
  auto* to = static_cast<uint16_t*>(dst.data_ptr());
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kConvertChunk;
    f32_to_bf16_contiguous(from + begin, to + begin, std::min(kConvertChunk, n - begin));
  }
  return true;
}

// One instantiation per (source, destination) dtype pair, so the element loop runs with
// both types known; convert_element (dtype.hpp) holds the conversion rule of every pair.
void copy_cpu(const Tensor& src, Tensor& dst) {
  if (copy_f32_to_bf16_dense(src, dst)) return;
  visit_dtype(src.dtype(), [&]<DType From>() {
    visit_dtype(dst.dtype(), [&]<DType To>() {
      const auto* ps = static_cast<const storage_t<From>*>(src.data_ptr());
      auto* pd = static_cast<storage_t<To>*>(dst.data_ptr());
      copy_rows(
          src, dst, [ps](int64_t i) { return ps[i]; },
          [pd](int64_t i, storage_t<From> v) { pd[i] = convert_element<From, To>(v); });
    });
  });
}
PATCHBAY_REGISTER_KERNEL(CopyKernel, "copy", DeviceType::kCpu, copy_cpu);

void fill_cpu(Tensor& dst, double value) {
  void* d = dst.data_ptr();
  DType dt = dst.dtype();
  if (dst.is_contiguous()) {
    unsigned char pattern[8];
    store_from_f64(pattern, 0, dt, value);
    Backend& b = backend_for(dst.device());
    b.fill(d, pattern, dtype_size(dt), static_cast<size_t>(dst.numel()), b.default_stream());
    return;
  }
  loops::for_each_row<1>(
      dst.shape(), {dst.strides()},
      [&](const std::array<int64_t, 1>& off, int64_t n, const std::array<int64_t, 1>& st) {
        for (int64_t i = 0; i < n; ++i) store_from_f64(d, off[0] + i * st[0], dt, value);
      });
}
PATCHBAY_REGISTER_KERNEL(FillKernel, "fill", DeviceType::kCpu, fill_cpu);

}  // namespace

void copy_(Tensor& dst, const Tensor& src) {
  Tensor expanded;
  {
    NoGradGuard no_grad;
    expanded = src.detach().expand(dst.shape());
    if (src.device() != dst.device()) {
      // Across devices: one contiguous transfer of the source (straight into dst when the
      // layouts agree), then dst's own copy kernel for strides and dtype.
      if (src.shape() == dst.shape() && src.dtype() == dst.dtype() && src.is_contiguous() &&
          dst.is_contiguous()) {
        transfer_bytes(dst.data_ptr(), dst.device(), src.data_ptr(), src.device(), dst.nbytes());
        return;
      }
      expanded = to_device(src.detach(), dst.device()).expand(dst.shape());
    }
  }
  find_kernel<CopyKernel>("copy", dst.device().type)(expanded, dst);
}

void fill_(Tensor& x, double value) { find_kernel<FillKernel>("fill", x.device().type)(x, value); }

Tensor to_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  copy_(out, x);
  if (is_floating(dtype) && is_floating(x.dtype()))
    record_op("to", {x}, {&out}, [from = x.dtype()](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{to_dtype(g[0], from)};
    });
  return out;
}

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  if (xs.empty()) throw Error(ErrorKind::kInvalidArgument, "concat: no tensors given");
  const Tensor& first = xs.front();
  int64_t d = normalize_dim(dim, first.dim(), "concat");
  Shape out_shape = first.shape();
  out_shape[static_cast<size_t>(d)] = 0;
  for (const Tensor& x : xs) {
    Shape s = x.shape();
    bool ok = x.dim() == first.dim() && x.dtype() == first.dtype() && x.device() == first.device();
    if (ok) {
      s[static_cast<size_t>(d)] = 0;
      Shape f = first.shape();
      f[static_cast<size_t>(d)] = 0;
      ok = s == f;
    }
    if (!ok)
      throw Error(ErrorKind::kInvalidArgument, "concat: every tensor must match " + first.str() +
                                                   " except in dim " + std::to_string(d) +
                                                   ", found " + x.str());
    out_shape[static_cast<size_t>(d)] += x.shape()[static_cast<size_t>(d)];
  }
  Tensor out = Tensor::empty(out_shape, first.dtype(), first.device());
  std::vector<int64_t> starts;
  int64_t at = 0;
  for (const Tensor& x : xs) {
    starts.push_back(at);
    int64_t len = x.shape()[static_cast<size_t>(d)];
    Tensor window = out.detach().narrow(d, at, len);
    copy_(window, x);
    at += len;
  }
  record_op("concat", xs, {&out}, [d, starts, xs_shapes = [&] {
              std::vector<int64_t> lens;
              for (const Tensor& x : xs) lens.push_back(x.shape()[static_cast<size_t>(d)]);
              return lens;
            }()](const std::vector<Tensor>& g) {
    std::vector<Tensor> grads;
    for (size_t i = 0; i < starts.size(); ++i)
      grads.push_back(g[0].narrow(d, starts[i], xs_shapes[i]));
    return grads;
  });
  return out;
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  if (xs.empty()) throw Error(ErrorKind::kInvalidArgument, "stack: no tensors given");
  int64_t d = normalize_dim(dim, xs.front().dim() + 1, "stack");
  std::vector<Tensor> expanded;
  for (const Tensor& x : xs) {
    if (x.shape() != xs.front().shape())
      throw Error(ErrorKind::kInvalidArgument, "stack: every tensor must have shape " +
                                                   shape_str(xs.front().shape()) + ", found " +
                                                   x.str());
    expanded.push_back(unsqueeze(x, d));
  }
  return concat(expanded, d);
}

}  // namespace patchbay::engine
