// Helpers of the GPU op tests (test_cuda_ops*.cpp): each op run on the same inputs on the CPU
// and on the GPU, forward and backward through the engine's autograd, compared element by
// element. Without a usable GPU, gpu_usable() says why (once per case) and returns false.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/tensor.hpp"

namespace patchbay::cuda_op_check {

using engine::Device;
using engine::Shape;
using engine::Tensor;

// True when a GPU is usable; otherwise prints "CUDA op parity checks skipped: <reason>".
bool gpu_usable();

inline const Device kGpu{engine::DeviceType::kCuda, 0};

// Uniform f32 values in [low, high) from `seed`.
Tensor random_f32(const Shape& shape, uint64_t seed, double low = -2.0, double high = 2.0);

// |got - want| <= atol + rtol * |want| everywhere (NaN only where NaN is wanted).
void check_close(const Tensor& gpu_result, const Tensor& cpu_result, double rtol, double atol,
                 const std::string& what);

// Runs `f` on CPU leaves and on their GPU copies; compares the outputs and, when `grads`, the
// gradients of sum(out * w) for a fixed random w with respect to every f32 leaf.
void check_op(const std::string& what, const std::vector<Tensor>& cpu_inputs,
              const std::function<Tensor(const std::vector<Tensor>&)>& f, double rtol, double atol,
              bool grads = true);

// The message of the error the next read of `on_device` raises (a device's recorded index
// error, engine/device_index_errors.hpp), empty when it raises none.
std::string message_of_next_read(const Tensor& on_device);

}  // namespace patchbay::cuda_op_check
