// Small helpers shared by op implementations: argument checks with uniform messages and the
// f32 compute convention (bf16/f16 inputs are widened once, results rounded once).
#pragma once

#include <string>

#include "common/error.hpp"
#include "engine/ops.hpp"

namespace patchbay::engine::detail {

inline void check_float(const Tensor& x, const char* op) {
  if (!x.defined())
    throw Error(ErrorKind::kInvalidArgument, std::string(op) + ": input tensor is undefined");
  if (!is_floating(x.dtype()))
    throw Error(ErrorKind::kInvalidArgument,
                std::string(op) + ": expected a float tensor (f32, bf16, f16), found " + x.str());
}

inline void check_same(const Tensor& a, const Tensor& b, const char* op) {
  check_float(a, op);
  check_float(b, op);
  if (a.dtype() != b.dtype() || a.device() != b.device())
    throw Error(ErrorKind::kInvalidArgument,
                std::string(op) + ": operands must share dtype and device, found " + a.str() +
                    " and " + b.str() + "; convert with to()");
}

// A detached f32 version of x (a view when x is f32 already).
inline Tensor as_f32(const Tensor& x) { return x.detach().to(DType::kF32); }
// A detached contiguous f32 version of x.
inline Tensor as_f32_contiguous(const Tensor& x) { return x.detach().to(DType::kF32).contiguous(); }
// Rounds an f32 result back to `dtype` (no-op for f32).
inline Tensor from_f32(const Tensor& out32, DType dtype) {
  if (dtype == DType::kF32) return out32;
  NoGradGuard no_grad;
  return out32.to(dtype);
}

inline std::string shape_message(const char* op, const std::string& expected, const Tensor& found) {
  return std::string(op) + ": expected " + expected + ", found " + found.str();
}

}  // namespace patchbay::engine::detail
