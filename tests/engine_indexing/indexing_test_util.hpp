// Shared by the engine indexing-op tests: integer tensors from vectors, flattening to
// doubles for check_close, and "this call throws a patchbay::Error whose message contains
// all of these fragments". The finite-difference gradient check itself is the engine's
// (tests/engine/test_util.hpp, check_gradients).
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "../engine/test_util.hpp"
#include "common/error.hpp"

namespace patchbay::engine::testing {

template <class Index>
Tensor index_tensor(const std::vector<Index>& values, const Shape& shape) {
  return Tensor::from_data(values.data(), shape, sizeof(Index) == 4 ? DType::kI32 : DType::kI64);
}

inline std::vector<double> as_doubles(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

inline std::vector<int64_t> int64_values(const Tensor& indices) {
  REQUIRE(indices.dtype() == DType::kI64);
  Tensor c = indices.contiguous();
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

inline void check_error_mentions(const std::function<void()>& call,
                                 const std::vector<std::string>& fragments) {
  std::string message;
  try {
    call();
  } catch (const patchbay::Error& e) {
    message = e.what();
  }
  REQUIRE_MESSAGE(!message.empty(), "expected a patchbay::Error");
  for (const auto& fragment : fragments)
    CHECK_MESSAGE(message.find(fragment) != std::string::npos,
                  "message \"" << message << "\" lacks \"" << fragment << "\"");
}

}  // namespace patchbay::engine::testing
