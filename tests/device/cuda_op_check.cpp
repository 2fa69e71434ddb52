// Helpers of the GPU op tests (cuda_op_check.hpp).
#include "cuda_op_check.hpp"

#include <doctest/doctest.h>

#include <cmath>

#include "common/error.hpp"
#include "cuda/cuda_device.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"

namespace patchbay::cuda_op_check {

using namespace patchbay::engine;

bool gpu_usable() {
  const patchbay::cuda::CudaProbe& probe = patchbay::cuda::initialise_cuda();
  if (!probe.usable) MESSAGE("CUDA op parity checks skipped: " << probe.reason);
  return probe.usable;
}

Tensor random_f32(const Shape& shape, uint64_t seed, double low, double high) {
  Generator gen(seed);
  return uniform(shape, gen, low, high);
}

// |got - want| <= atol + rtol * |want| everywhere (NaN only where NaN is wanted).
void check_close(const Tensor& gpu_result, const Tensor& cpu_result, double rtol, double atol,
                 const std::string& what) {
  CAPTURE(what);
  REQUIRE(gpu_result.device() == kGpu);
  REQUIRE(gpu_result.shape() == cpu_result.shape());
  const std::vector<float> got = gpu_result.to(cpu()).to(DType::kF32).contiguous().to_vector();
  const std::vector<float> want = cpu_result.to(DType::kF32).contiguous().to_vector();
  size_t bad = 0, first = 0;
  double worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got[i], w = want[i];
    const bool ok = std::isnan(w) ? std::isnan(g) : std::fabs(g - w) <= atol + rtol * std::fabs(w);
    if (!ok && bad++ == 0) first = i;
    if (!std::isnan(w)) worst = std::max(worst, std::fabs(g - w));
  }
  if (bad != 0)
    MESSAGE(what << ": " << bad << " of " << want.size() << " elements differ; first at " << first
                 << " (gpu " << got[first] << ", cpu " << want[first] << "); max |diff| " << worst);
  CHECK(bad == 0);
}

// Runs `f` on CPU leaves and on their GPU copies; compares the outputs and, when `grads`, the
// gradients of sum(out * w) for a fixed random w with respect to every leaf.
void check_op(const std::string& what, const std::vector<Tensor>& cpu_inputs,
              const std::function<Tensor(const std::vector<Tensor>&)>& f, double rtol, double atol,
              bool grads) {
  std::vector<Tensor> cpu_leaves, gpu_leaves;
  for (const Tensor& x : cpu_inputs) {
    Tensor c = x.detach();
    Tensor g = x.to(kGpu).detach();
    const bool differentiable = grads && (x.dtype() == DType::kF32);
    c.set_requires_grad(differentiable);
    g.set_requires_grad(differentiable);
    cpu_leaves.push_back(c);
    gpu_leaves.push_back(g);
  }
  const Tensor cpu_out = f(cpu_leaves), gpu_out = f(gpu_leaves);
  check_close(gpu_out, cpu_out, rtol, atol, what + " (forward)");
  if (!grads) return;
  const Tensor w = random_f32(cpu_out.shape(), 977);
  backward(sum(mul(cpu_out, w)));
  backward(sum(mul(gpu_out, w.to(kGpu))));
  for (size_t i = 0; i < cpu_leaves.size(); ++i) {
    if (!cpu_leaves[i].requires_grad()) continue;
    if (!cpu_leaves[i].grad().defined()) {  // not differentiable in this input on either device
      CHECK_FALSE(gpu_leaves[i].grad().defined());
      continue;
    }
    check_close(gpu_leaves[i].grad(), cpu_leaves[i].grad(), rtol, atol,
                what + " (gradient of input " + std::to_string(i) + ")");
  }
}

std::string message_of_next_read(const Tensor& on_device) {
  try {
    (void)on_device.to(engine::cpu());
  } catch (const patchbay::Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace patchbay::cuda_op_check
