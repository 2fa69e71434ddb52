// Reductions sum / mean / max over a set of dims (keepdim optional), broadcast_shapes and
// sum_to_shape (the backward of broadcasting). The input is permuted so reduced dims come
// last and made contiguous, then each of the `outer` rows of length `inner` is reduced by
// one thread (sums accumulate in double).
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops/op_helpers.hpp"

namespace patchbay::engine {
namespace {

using kernel::MaxBackwardKernel;
using kernel::ReduceKernel;
using kernel::ReduceKind;
using kernel::ReduceLeadingKernel;

void reduce_cpu(ReduceKind kind, const Tensor& x, int64_t outer, int64_t inner, Tensor& out,
                int64_t* argmax) {
  const float* px = x.data<float>();
  float* po = out.data<float>();
#pragma omp parallel for schedule(static) if (outer * inner > 32768)
  for (int64_t r = 0; r < outer; ++r) {
    const float* row = px + r * inner;
    if (kind == ReduceKind::kSum) {
      double s = 0.0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < inner; ++i) s += static_cast<double>(row[i]);
      po[r] = static_cast<float>(s);
    } else {
      // First maximal element wins; a NaN anywhere makes the row's max NaN.
      float best = inner > 0 ? row[0] : 0.0f;
      int64_t best_i = 0;
      for (int64_t i = 1; i < inner && !std::isnan(best); ++i)
        if (row[i] > best || std::isnan(row[i])) {
          best = row[i];
          best_i = i;
        }
      po[r] = best;
      argmax[r] = best_i;
    }
  }
}
PATCHBAY_REGISTER_KERNEL(ReduceKernel, "reduce", DeviceType::kCpu, reduce_cpu);

// Sum over the leading dims without a transposing copy (the backward of a bias or of a
// position table broadcast over rows): x contiguous f32 [rows, cols] -> out [cols]. Each
// column accumulates its rows in order, in double, so the result does not depend on the
// thread count; threads split the columns (blocks of 64 keep each thread's stores apart).

constexpr int64_t kLeadingBlock = 64;

// One block of n <= 64 columns starting at x (row stride `cols`): out[i] = sum_r x[r, i] in
// double, rows in order. Compiled for AVX-512 / AVX2 / baseline and picked at load time: the
// 64 double accumulators fit in 8 zmm registers, while the baseline SSE2 build spills them
// (measured: 2% of the quickstart step for the bias gradients before, see BENCHMARKS.md).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void reduce_leading_block(const float* x, int64_t rows, int64_t cols, int64_t n, float* out) {
  double acc[kLeadingBlock] = {};
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<double>(row[i]);
  }
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(acc[i]);
}

void reduce_leading_cpu(const Tensor& x, int64_t rows, int64_t cols, Tensor& out) {
  const float* px = x.data<float>();
  float* po = out.data<float>();
  const int64_t blocks = (cols + kLeadingBlock - 1) / kLeadingBlock;
#pragma omp parallel for schedule(static) if (rows * cols > 65536 && blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * kLeadingBlock;
    reduce_leading_block(px + c0, rows, cols, std::min(kLeadingBlock, cols - c0), po + c0);
  }
}
PATCHBAY_REGISTER_KERNEL(ReduceLeadingKernel, "reduce_leading", DeviceType::kCpu,
                         reduce_leading_cpu);

void max_backward_cpu(const Tensor& grad, const int64_t* argmax, int64_t outer, int64_t inner,
                      Tensor& dx) {
  const float* pg = grad.data<float>();
  float* pd = dx.data<float>();
#pragma omp parallel for schedule(static) if (outer * inner > 32768)
  for (int64_t r = 0; r < outer; ++r) {
    std::fill(pd + r * inner, pd + (r + 1) * inner, 0.0f);
    if (inner > 0) pd[r * inner + argmax[r]] = pg[r];
  }
}
PATCHBAY_REGISTER_KERNEL(MaxBackwardKernel, "max_backward", DeviceType::kCpu, max_backward_cpu);

struct ReducePlan {
  Shape permutation;  // kept dims then reduced dims
  Shape keep_shape;   // output shape with keepdim
  Shape out_shape;    // output shape as requested
  int64_t outer = 1, inner = 1;
};

ReducePlan plan_reduce(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim,
                       const char* op) {
  std::vector<bool> reduced(static_cast<size_t>(x.dim()), dims.empty());
  for (int64_t d : dims) {
    int64_t nd = normalize_dim(d, x.dim(), op);
    if (reduced[static_cast<size_t>(nd)])
      throw Error(ErrorKind::kInvalidArgument,
                  std::string(op) + ": dim " + std::to_string(nd) + " listed twice");
    reduced[static_cast<size_t>(nd)] = true;
  }
  ReducePlan p;
  for (int64_t d = 0; d < x.dim(); ++d) {
    auto ud = static_cast<size_t>(d);
    if (!reduced[ud]) {
      p.permutation.push_back(d);
      p.outer *= x.shape()[ud];
      p.out_shape.push_back(x.shape()[ud]);
      p.keep_shape.push_back(x.shape()[ud]);
    } else {
      p.keep_shape.push_back(1);
      if (keepdim) p.out_shape.push_back(1);
    }
  }
  for (int64_t d = 0; d < x.dim(); ++d)
    if (reduced[static_cast<size_t>(d)]) {
      p.permutation.push_back(d);
      p.inner *= x.shape()[static_cast<size_t>(d)];
    }
  if (keepdim) p.out_shape = p.keep_shape;
  return p;
}

// True when the reduced dims are exactly the leading ones: permutation (kept dims in order,
// then reduced dims in order) = [n-k, ..., n-1, 0, ..., n-k-1] for some k in [1, n-1] kept.
bool reduces_leading_dims(const ReducePlan& p) {
  const auto n = static_cast<int64_t>(p.permutation.size());
  for (int64_t k = 1; k < n; ++k) {
    bool match = true;
    for (int64_t i = 0; i < n && match; ++i)
      match = p.permutation[static_cast<size_t>(i)] == (i < k ? n - k + i : i - k);
    if (match) return true;
  }
  return false;
}

Tensor reduce_forward(ReduceKind kind, const Tensor& x, const ReducePlan& p,
                      std::vector<int64_t>* argmax) {
  Tensor x32 = detail::as_f32(x);
  if (kind == ReduceKind::kSum && x32.is_contiguous() && p.outer > 1 && reduces_leading_dims(p)) {
    Tensor out = Tensor::empty(p.out_shape, DType::kF32, x.device());
    find_kernel<ReduceLeadingKernel>("reduce_leading", x.device().type)(x32, p.inner, p.outer, out);
    return out;
  }
  Tensor rows = x32.permute(p.permutation).contiguous();
  Tensor out = Tensor::empty(p.out_shape, DType::kF32, x.device());
  if (argmax) argmax->assign(static_cast<size_t>(p.outer), 0);
  find_kernel<ReduceKernel>("reduce", x.device().type)(kind, rows, p.outer, p.inner, out,
                                                       argmax ? argmax->data() : nullptr);
  return out;
}

}  // namespace

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error(ErrorKind::kInvalidArgument, "broadcast: shapes " + shape_str(a) + " and " +
                                                   shape_str(b) + " are not broadcastable (dim " +
                                                   std::to_string(i) + ": " + std::to_string(da) +
                                                   " vs " + std::to_string(db) + ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor sum_to_shape(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  const size_t lead = grad.shape().size() - shape.size();
  std::vector<int64_t> dims;
  for (size_t i = 0; i < grad.shape().size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && grad.shape()[i] != 1))
      dims.push_back(static_cast<int64_t>(i));
  if (dims.empty()) return reshape(grad, shape);
  return reshape(sum(grad, dims, true), shape);
}

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  detail::check_float(x, "sum");
  ReducePlan p = plan_reduce(x, dims, keepdim, "sum");
  Tensor out = detail::from_f32(reduce_forward(ReduceKind::kSum, x, p, nullptr), x.dtype());
  record_op("sum", {x}, {&out}, [p, in_shape = x.shape()](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{reshape(g[0], p.keep_shape).expand(in_shape)};
  });
  return out;
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  detail::check_float(x, "mean");
  ReducePlan p = plan_reduce(x, dims, keepdim, "mean");
  if (p.inner == 0)
    return full(p.out_shape, std::numeric_limits<double>::quiet_NaN(), x.dtype(), x.device());
  return mul_scalar(sum(x, dims, keepdim), 1.0 / static_cast<double>(p.inner));
}

Tensor max(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  detail::check_float(x, "max");
  ReducePlan p = plan_reduce(x, dims, keepdim, "max");
  if (p.inner == 0 && p.outer > 0)
    throw Error(ErrorKind::kInvalidArgument, "max: cannot reduce over an empty dim of " + x.str());
  auto argmax = std::make_shared<std::vector<int64_t>>();
  Tensor out = detail::from_f32(reduce_forward(ReduceKind::kMax, x, p, argmax.get()), x.dtype());
  record_op("max", {x}, {&out},
            [p, argmax, x_shape = x.shape(), dt = x.dtype()](const std::vector<Tensor>& g) {
              Tensor g32 = detail::as_f32_contiguous(g[0]);
              // dx in permuted layout [kept..., reduced...], then permuted back.
              Shape permuted_shape;
              for (int64_t d : p.permutation)
                permuted_shape.push_back(x_shape[static_cast<size_t>(d)]);
              Tensor dx = Tensor::empty(permuted_shape, DType::kF32, g[0].device());
              find_kernel<MaxBackwardKernel>("max_backward", g[0].device().type)(
                  g32, argmax->data(), p.outer, p.inner, dx);
              Shape inverse(p.permutation.size());
              for (size_t i = 0; i < p.permutation.size(); ++i)
                inverse[static_cast<size_t>(p.permutation[i])] = static_cast<int64_t>(i);
              return std::vector<Tensor>{detail::from_f32(dx.permute(inverse).contiguous(), dt)};
            });
  return out;
}

}  // namespace patchbay::engine
