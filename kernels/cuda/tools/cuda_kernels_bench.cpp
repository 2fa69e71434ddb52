// Developer benchmark of kernels/cuda on the GPU (not a test): the cuBLASLt products at
// GPT-2 124M's shapes and square ones, and the fused causal attention forward + backward at
// T = 1K..16K (f32 and the bf16 tensor-core kernels), and the indexing / linear-attention kernels
// at the shapes the samplers, MoE and the Performer / linear layers make ("op": "misc", by name).
// One JSON object per line on stdout, read by scripts/gpu/compare_bench.py beside PyTorch's figures
// from the same GPU in the same run (scripts/gpu/torch_bench.py). Timing: CUDA events around
// `repeats` launches after `warmup` launches, median of the per-launch times; inputs are random
// (never zeros: tensor cores run faster on zeros). Usage: cuda_kernels_bench [--quick]   (exit 77
// with a message when no GPU is usable)
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "patchbay/kernels/cuda/attention.hpp"
#include "patchbay/kernels/cuda/attention_bf16.hpp"
#include "patchbay/kernels/cuda/gemm.hpp"
#include "patchbay/kernels/cuda/indexing.hpp"
#include "patchbay/kernels/cuda/linear_attention.hpp"
#include "patchbay/kernels/cuda/math/bf16.hpp"

namespace cuda = patchbay::kernels::cuda;

namespace {

bool check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
  return false;
}

// Device buffer of random values (normal, stddev 1), f32 or bf16 patterns.
void* random_device_buffer(size_t count, bool bf16, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (auto& v : values) v = normal(generator);
  void* device = nullptr;
  if (bf16) {
    std::vector<uint16_t> bits(count);
    for (size_t i = 0; i < count; ++i) bits[i] = cuda::math::bf16_from_float(values[i]);
    if (!check(cudaMalloc(&device, count * 2), "cudaMalloc")) return nullptr;
    cudaMemcpy(device, bits.data(), count * 2, cudaMemcpyHostToDevice);
  } else {
    if (!check(cudaMalloc(&device, count * 4), "cudaMalloc")) return nullptr;
    cudaMemcpy(device, values.data(), count * 4, cudaMemcpyHostToDevice);
  }
  return device;
}

float* device_floats(size_t count) {
  void* device = nullptr;
  check(cudaMalloc(&device, count * sizeof(float)), "cudaMalloc");
  return static_cast<float*>(device);
}

// Median milliseconds per call of `launch`, or -1 when a launch failed.
double median_ms(const std::function<bool()>& launch, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i)
    if (!launch()) return -1.0;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    cudaEventRecord(start);
    if (!launch()) return -1.0;
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!check(cudaDeviceSynchronize(), "benchmark")) return -1.0;
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void bench_gemm(cublasLtHandle_t handle, void* workspace, size_t workspace_bytes, const char* name,
                int64_t m, int64_t n, int64_t k, cuda::GemmPrecision precision, bool quick) {
  const bool bf16 = precision == cuda::GemmPrecision::kBf16;
  void* a = random_device_buffer(size_t(m * k), bf16, 1);
  void* b = random_device_buffer(size_t(k * n), bf16, 2);
  void* d = random_device_buffer(size_t(m * n), bf16, 3);
  cuda::GemmArguments g;
  g.precision = precision;
  g.output = bf16 ? cuda::GemmOutput::kBf16 : cuda::GemmOutput::kF32;
  g.m = m, g.n = n, g.k = k;
  g.transpose_b = true;  // y = x W^T, as nn.Linear (torch.matmul(x, w.t()) in the twin script)
  g.a = a, g.b = b, g.d = d;
  const double ms = median_ms(
      [&] {
        return cuda::gemm(handle, g, workspace, workspace_bytes, nullptr) == CUBLAS_STATUS_SUCCESS;
      },
      3, quick ? 5 : 20);
  const char* precision_name[] = {"f32", "tf32", "bf16"};
  std::printf(
      "{\"op\": \"gemm\", \"name\": \"%s\", \"precision\": \"%s\", \"m\": %lld, \"n\": %lld, "
      "\"k\": %lld, \"ms\": %.4f, \"tflops\": %.2f}\n",
      name, precision_name[int(precision)], (long long)m, (long long)n, (long long)k, ms,
      ms > 0 ? 2.0 * m * n * k / (ms * 1e9) : 0.0);
  std::fflush(stdout);
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
}

// Causal attention forward and forward + backward: the f32 kernels (attention.hpp) or the bf16
// tensor-core ones (attention_bf16.hpp; q, k, v, dout in bf16, out, lse and gradients f32).
void bench_attention(int64_t batch_heads, int64_t steps, int64_t dim, bool bf16, bool quick) {
  const size_t n = size_t(batch_heads * steps * dim), rows = size_t(batch_heads * steps);
  void* q = random_device_buffer(n, bf16, 4);
  void* k = random_device_buffer(n, bf16, 5);
  void* v = random_device_buffer(n, bf16, 6);
  void* dout = random_device_buffer(n, bf16, 7);
  float* out = device_floats(n);
  float* lse = device_floats(rows);
  float* delta = device_floats(rows);
  float* dq = device_floats(n);
  float* dk = device_floats(n);
  float* dv = device_floats(n);
  const float scale = 1.0f / std::sqrt(float(dim));
  const int repeats = quick || steps >= 8192 ? 3 : 10;
  auto as_f32 = [](void* x) { return static_cast<const float*>(x); };
  auto as_bf16 = [](void* x) { return static_cast<const uint16_t*>(x); };
  auto forward = [&] {
    return (bf16 ? cuda::causal_attention_bf16_forward(as_bf16(q), as_bf16(k), as_bf16(v), out, lse,
                                                       batch_heads, steps, dim, scale, nullptr)
                 : cuda::causal_attention_forward(as_f32(q), as_f32(k), as_f32(v), out, lse,
                                                  batch_heads, steps, dim, scale, nullptr)) ==
           cudaSuccess;
  };
  auto backward = [&] {
    return (bf16 ? cuda::causal_attention_bf16_backward(as_bf16(q), as_bf16(k), as_bf16(v), out,
                                                        as_bf16(dout), lse, delta, dq, dk, dv,
                                                        batch_heads, steps, dim, scale, nullptr)
                 : cuda::causal_attention_backward(
                       as_f32(q), as_f32(k), as_f32(v), out, as_f32(dout), lse, delta, dq, dk, dv,
                       batch_heads, steps, dim, scale, nullptr)) == cudaSuccess;
  };
  const double forward_ms = median_ms(forward, 1, repeats);
  const double both_ms = median_ms([&] { return forward() && backward(); }, 1, repeats);
  // Causal: half the T x T scores. Forward 2 products (4 T^2 D flops / 2); backward 5 (2.5x),
  // counted as the algorithm's 5 whatever a kernel recomputes (the bf16 backward runs 7).
  const double forward_flops = 2.0 * double(batch_heads) * double(steps) * double(steps) * dim;
  std::printf(
      "{\"op\": \"attention\", \"precision\": \"%s\", \"batch_heads\": %lld, \"T\": %lld, "
      "\"D\": %lld, \"forward_ms\": %.3f, \"forward_backward_ms\": %.3f, "
      "\"forward_tflops\": %.2f, \"forward_backward_tflops\": %.2f}\n",
      bf16 ? "bf16" : "f32", (long long)batch_heads, (long long)steps, (long long)dim, forward_ms,
      both_ms, forward_ms > 0 ? forward_flops / (forward_ms * 1e9) : 0.0,
      both_ms > 0 ? 3.5 * forward_flops / (both_ms * 1e9) : 0.0);
  std::fflush(stdout);
  for (void* p :
       {q, k, v, dout, (void*)out, (void*)lse, (void*)delta, (void*)dq, (void*)dk, (void*)dv})
    cudaFree(p);
}

void print_misc(const char* name, double ms) {
  std::printf("{\"op\": \"misc\", \"name\": \"%s\", \"ms\": %.4f}\n", name, ms);
  std::fflush(stdout);
}

// Sampler top-k and full sort of a vocabulary row, the MoE combine's scatter-add and gather
// (16K routed rows of 768 into 8K tokens, along dim 0), causal linear attention forward +
// backward (B*H = 32, T = 4096, E = M = 64). The same names in torch_bench.py.
void bench_misc(bool quick) {
  const int repeats = quick ? 5 : 20;
  const int64_t rows = 8, vocab = 50257;
  float* logits = static_cast<float*>(random_device_buffer(size_t(rows * vocab), false, 8));
  float* values = device_floats(size_t(rows * vocab));
  int64_t* indices = nullptr;
  uint64_t* keys = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&indices), size_t(rows * vocab) * sizeof(int64_t));
  cudaMalloc(reinterpret_cast<void**>(&keys),
             size_t(cuda::sort_workspace_keys(rows, vocab)) * sizeof(uint64_t));
  print_misc("topk50_8x50257", median_ms(
                                   [&] {
                                     return cuda::sort_rows_f32(logits, rows, vocab, 50, true,
                                                                values, indices, keys,
                                                                nullptr) == cudaSuccess;
                                   },
                                   2, repeats));
  print_misc("sort_8x50257", median_ms(
                                 [&] {
                                   return cuda::sort_rows_f32(logits, rows, vocab, vocab, true,
                                                              values, indices, keys,
                                                              nullptr) == cudaSuccess;
                                 },
                                 2, repeats));
  for (void* p : {(void*)logits, (void*)values, (void*)indices, (void*)keys}) cudaFree(p);

  const int64_t tokens = 8192, routed = 2 * tokens, width = 768;
  float* src = static_cast<float*>(random_device_buffer(size_t(routed * width), false, 9));
  float* self = device_floats(size_t(tokens * width));
  std::vector<int64_t> ids(size_t(routed * width));
  std::mt19937_64 generator(10);
  for (int64_t r = 0; r < routed; ++r) {
    const auto token = static_cast<int64_t>(generator() % uint64_t(tokens));
    for (int64_t c = 0; c < width; ++c) ids[size_t(r * width + c)] = token;
  }
  int64_t* index = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&index), ids.size() * sizeof(int64_t));
  cudaMemcpy(index, ids.data(), ids.size() * sizeof(int64_t), cudaMemcpyHostToDevice);
  const int64_t self_shape[] = {tokens, width}, index_shape[] = {routed, width};
  const cuda::AlongDim walk = cuda::along_dim_of(self_shape, 2, 0);
  const cuda::IndexShape ishape = cuda::index_shape_of(index_shape, 2, 0);
  const cuda::Strides src_strides = cuda::contiguous_strides(index_shape, 2);
  print_misc("scatter_add_16384x768_into_8192",
             median_ms(
                 [&] {
                   return cuda::scatter_add_f32(self, walk, index, ishape, src, src_strides,
                                                nullptr) == cudaSuccess;
                 },
                 2, repeats));
  print_misc(
      "gather_16384x768_from_8192",
      median_ms(
          [&] { return cuda::gather_f32(self, walk, index, ishape, src, nullptr) == cudaSuccess; },
          2, repeats));
  for (void* p : {(void*)src, (void*)self, (void*)index}) cudaFree(p);

  const int64_t heads = 32, steps = 4096, dim = 64;
  const size_t n = size_t(heads * steps * dim);
  float* q = static_cast<float*>(random_device_buffer(n, false, 11));
  float* k = static_cast<float*>(random_device_buffer(n, false, 12));
  float* v = static_cast<float*>(random_device_buffer(n, false, 13));
  float* dout = static_cast<float*>(random_device_buffer(n, false, 14));
  float *out = device_floats(n), *dq = device_floats(n), *dk = device_floats(n),
        *dv = device_floats(n);
  print_misc("linear_attention_fwd_bwd_32x4096x64",
             median_ms(
                 [&] {
                   return cuda::causal_linear_attention_forward_f32(q, k, v, out, heads, steps, dim,
                                                                    dim, nullptr) == cudaSuccess &&
                          cuda::causal_linear_attention_backward_f32(q, k, v, dout, dq, dk, dv,
                                                                     heads, steps, dim, dim,
                                                                     nullptr) == cudaSuccess;
                 },
                 1, quick ? 3 : 10));
  for (void* p :
       {(void*)q, (void*)k, (void*)v, (void*)dout, (void*)out, (void*)dq, (void*)dk, (void*)dv})
    cudaFree(p);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 ||
      cudaFree(nullptr) != cudaSuccess) {
    std::printf("SKIP: no usable GPU\n");
    return 77;
  }
  cublasLtHandle_t handle = nullptr;
  if (cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    std::printf("cublasLtCreate failed (LD_LIBRARY_PATH must reach CUDA 13's libcublasLt)\n");
    return 1;
  }
  const size_t workspace_bytes = size_t(32) << 20;
  void* workspace = nullptr;
  cudaMalloc(&workspace, workspace_bytes);
  // GPT-2 124M at batch 8 x 1024 tokens: qkv, attention projection, MLP up and down.
  const int64_t tokens = 8 * 1024;
  for (const auto precision : {cuda::GemmPrecision::kBf16, cuda::GemmPrecision::kTf32}) {
    bench_gemm(handle, workspace, workspace_bytes, "gpt2_qkv", tokens, 2304, 768, precision, quick);
    bench_gemm(handle, workspace, workspace_bytes, "gpt2_proj", tokens, 768, 768, precision, quick);
    bench_gemm(handle, workspace, workspace_bytes, "gpt2_fc", tokens, 3072, 768, precision, quick);
    bench_gemm(handle, workspace, workspace_bytes, "gpt2_fcproj", tokens, 768, 3072, precision,
               quick);
    bench_gemm(handle, workspace, workspace_bytes, "square8192", 8192, 8192, 8192, precision,
               quick);
  }
  // Attention: 64K tokens' worth of heads per T (B*H = 65536 / T, at least 4).
  for (const int64_t dim : {int64_t(64), int64_t(128)})
    for (const int64_t steps : {int64_t(1024), int64_t(4096), int64_t(16384)}) {
      if (quick && steps > 4096) continue;
      for (const bool bf16 : {false, true})
        bench_attention(std::max<int64_t>(4, 65536 / steps), steps, dim, bf16, quick);
    }
  bench_misc(quick);
  cudaFree(workspace);
  cublasLtDestroy(handle);
  return 0;
}
