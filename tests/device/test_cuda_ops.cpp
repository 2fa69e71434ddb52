// The CUDA dispatch entries of the engine's ops (core/cuda/cuda_kernels_*.cpp) against the CPU
// kernels, on a real GPU: each op run on the same inputs on both devices, forward and (where
// the op is differentiable) backward through the engine's autograd, compared element by element
// with a tolerance that names the reason (summation order, libm ulps). Operands come in the
// layouts the models produce: permuted views, broadcast biases, batched and transposed
// products. Without a usable GPU (CI, the development machines) every case returns at once and
// the first says that the GPU checks were skipped.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "cuda/cuda_device.hpp"
#include "cuda_op_check.hpp"
#include "engine/autocast.hpp"
#include "engine/autograd.hpp"
#include "engine/kernel_registry.hpp"
#include "engine/ops.hpp"
#include "engine/ops_device.hpp"
#include "engine/ops_indexing.hpp"
#include "engine/ops_optimizer.hpp"
#include "engine/ops_positional.hpp"

namespace {

using namespace patchbay::engine;

using namespace patchbay::cuda_op_check;

}  // namespace

TEST_CASE("copies: permuted, broadcast and converting layouts give the CPU's bits") {
  if (!gpu_usable()) return;
  const Tensor x = random_f32({3, 5, 7}, 1);
  check_op(
      "permute + contiguous", {x},
      [](auto& in) {
        return in[0].permute({2, 0, 1}).contiguous();
      },
      0, 0);
  check_op(
      "expand + contiguous", {random_f32({1, 7}, 2)},
      [](auto& in) {
        return in[0].expand({5, 7}).contiguous();
      },
      0, 0);
  check_op(
      "strided f32 -> bf16", {x}, [](auto& in) { return in[0].transpose(0, 2).to(DType::kBF16); },
      0, 0, false);
  Tensor strided = zeros({4, 6}, DType::kF32, kGpu).transpose(0, 1);
  fill_(strided, 2.5);
  CHECK(strided.to(cpu()).contiguous().to_vector() == std::vector<float>(24, 2.5f));
}

TEST_CASE("element-wise ops, broadcast, and their gradients") {
  if (!gpu_usable()) return;
  const Tensor a = random_f32({4, 8, 16}, 3), bias = random_f32({16}, 4);
  const Tensor positive = random_f32({4, 8, 16}, 5, 0.1, 3.0);
  check_op(
      "add (bias broadcast)", {a, bias}, [](auto& in) { return add(in[0], in[1]); }, 0, 0);
  check_op(
      "add (permuted)", {a, a},
      [](auto& in) { return add(in[0].transpose(1, 2), in[1].transpose(1, 2)); }, 0, 0);
  check_op(
      "sub", {a, bias}, [](auto& in) { return sub(in[0], in[1]); }, 0, 0);
  check_op(
      "mul", {a, bias}, [](auto& in) { return mul(in[0], in[1]); }, 0, 0);
  check_op(
      "div", {a, positive}, [](auto& in) { return div(in[0], in[1]); }, 1e-6, 0);
  // libm differs from CUDA's by a few ulps on exp/log/tanh/erf.
  using Unary = Tensor (*)(const Tensor&);
  const std::vector<std::pair<const char*, Unary>> unary = {{"neg", neg},
                                                            {"abs", abs},
                                                            {"exp", exp},
                                                            {"tanh", tanh},
                                                            {"sigmoid", sigmoid},
                                                            {"relu", relu},
                                                            {"gelu_tanh", gelu_tanh},
                                                            {"gelu_erf", gelu_erf},
                                                            {"silu", silu}};
  for (const auto& [name, op] : unary)
    check_op(
        name, {a}, [op](auto& in) { return op(in[0].transpose(0, 1)); }, 1e-5, 1e-6);
  check_op(
      "log", {positive}, [](auto& in) { return log(in[0]); }, 1e-5, 1e-6);
  check_op(
      "sqrt", {positive}, [](auto& in) { return sqrt(in[0]); }, 1e-6, 0);
  check_op(
      "rsqrt", {positive}, [](auto& in) { return rsqrt(in[0]); }, 1e-6, 0);
  check_op(
      "pow_scalar", {positive}, [](auto& in) { return pow_scalar(in[0], 1.5); }, 1e-5, 0);
  check_op(
      "add/mul scalar", {a}, [](auto& in) { return mul_scalar(add_scalar(in[0], 0.5), -3.0); }, 0,
      0);
  const std::vector<float> mask_values = {1, 0, 0, 1, 1, 0, 1, 0};
  const Tensor mask = Tensor::from_data(mask_values.data(), {8, 1}, DType::kF32);
  check_op(
      "masked_fill (broadcast mask)", {a, mask},
      [](auto& in) { return masked_fill(in[0], in[1].detach(), -1e9); }, 0, 0);
}

TEST_CASE("matrix products: batched, transposed, broadcast; bf16 with f32 accumulation") {
  if (!gpu_usable()) return;
  const Tensor a = random_f32({3, 33, 64}, 7), b = random_f32({3, 64, 40}, 8);
  const Tensor w = random_f32({40, 64}, 9);
  check_op(
      "batched matmul", {a, b}, [](auto& in) { return matmul(in[0], in[1]); }, 1e-5, 1e-5);
  check_op(
      "x @ W^T (broadcast W)", {a, w}, [](auto& in) { return matmul(in[0], in[1], false, true); },
      1e-5, 1e-5);
  check_op(
      "A^T B", {random_f32({2, 64, 33}, 10), b.narrow(0, 0, 2)},
      [](auto& in) { return matmul(in[0], in[1], true, false); }, 1e-5, 1e-5);
  check_op(
      "linear + bias", {a, w, random_f32({40}, 11)},
      [](auto& in) { return linear(in[0], in[1], in[2]); }, 1e-5, 1e-5);
  // bf16 operands: the products of the same bf16 values accumulated in f32 on both devices.
  check_op(
      "bf16 matmul", {a.to(DType::kBF16), b.to(DType::kBF16)},
      [](auto& in) { return matmul(in[0], in[1]); }, 1e-2, 1e-2, false);
}

TEST_CASE("normalisation and softmax, forward and backward") {
  if (!gpu_usable()) return;
  const Tensor x = random_f32({6, 10, 96}, 12), gain = random_f32({96}, 13),
               bias = random_f32({96}, 14);
  check_op(
      "layer_norm", {x, gain, bias}, [](auto& in) { return layer_norm(in[0], in[1], in[2]); }, 1e-4,
      1e-5);
  check_op(
      "layer_norm without gain", {x},
      [](auto& in) { return layer_norm(in[0], Tensor(), Tensor()); }, 1e-4, 1e-5);
  check_op(
      "rms_norm", {x, gain}, [](auto& in) { return rms_norm(in[0], in[1]); }, 1e-4, 1e-5);
  check_op(
      "add_layer_norm", {x, random_f32({6, 10, 96}, 15), gain, bias},
      [](auto& in) {
        auto [h, y] = add_layer_norm(in[0], in[1], in[2], in[3]);
        return add(h, y);
      },
      1e-4, 1e-5);
  check_op(
      "softmax", {x}, [](auto& in) { return softmax(in[0]); }, 1e-5, 1e-7);
  check_op(
      "log_softmax", {x}, [](auto& in) { return log_softmax(in[0]); }, 1e-5, 1e-6);
}

TEST_CASE("embedding, rotary, bias + activation, cumsum and reductions") {
  if (!gpu_usable()) return;
  std::vector<int32_t> ids = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
  const Tensor id_tensor = Tensor::from_data(ids.data(), {3, 4}, DType::kI32);
  const Tensor table = random_f32({10, 32}, 16);
  check_op(
      "embedding", {table, id_tensor}, [](auto& in) { return embedding(in[0], in[1]); }, 0, 0);
  const Tensor heads = random_f32({2, 3, 12, 64}, 17);
  check_op(
      "rotary", {heads}, [](auto& in) { return rotary_embedding(in[0], 5, 10000.0); }, 1e-6, 1e-6);
  const Tensor x = random_f32({20, 48}, 18), b = random_f32({48}, 19);
  check_op(
      "bias + gelu", {x, b},
      [](auto& in) { return bias_activation(in[0], in[1], FusedActivation::kGeluTanh); }, 1e-5,
      1e-6);
  check_op(
      "bias + relu", {x, b},
      [](auto& in) { return bias_activation(in[0], in[1], FusedActivation::kRelu); }, 0, 0);
  check_op(
      "cumsum", {x}, [](auto& in) { return cumsum(in[0], 0); }, 1e-6, 1e-6);
  check_op(
      "sum over rows", {x}, [](auto& in) { return sum(in[0], {1}); }, 1e-5, 1e-5);
  check_op(
      "sum over leading dims", {x}, [](auto& in) { return sum(in[0], {0}); }, 1e-5, 1e-5);
  check_op(
      "max over rows", {x}, [](auto& in) { return max(in[0], {1}); }, 0, 0);

  // An out-of-range id is recorded on the device and raised at the next read with the CPU's
  // words (engine/device_index_errors.hpp); the op itself does not wait.
  ids[5] = 10;
  const Tensor bad = Tensor::from_data(ids.data(), {3, 4}, DType::kI32, kGpu);
  Tensor rows;
  CHECK_NOTHROW(rows = embedding(table.to(kGpu), bad));
  const std::string message = message_of_next_read(rows);
  CHECK(message.find("embedding: id value 10 at flat position 5") != std::string::npos);
  CHECK(message_of_next_read(rows).empty());  // raised once
}

TEST_CASE("cross-entropy with ignored rows and label smoothing, mean and sum") {
  if (!gpu_usable()) return;
  const Tensor logits = random_f32({6, 5, 97}, 25, -4.0, 4.0);
  std::vector<int64_t> targets(30);
  for (size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<int64_t>((i * 37) % 97);
  targets[4] = -100;
  const Tensor target_tensor = Tensor::from_data(targets.data(), {6, 5}, DType::kI64);
  for (const double smoothing : {0.0, 0.1}) {
    CrossEntropyOptions options;
    options.label_smoothing = smoothing;
    check_op(
        "cross_entropy (mean)", {logits, target_tensor},
        [options](auto& in) {
          return cross_entropy(in[0].reshape({30, 97}), in[1].reshape({30}), options);
        },
        1e-5, 1e-6);
  }
  std::vector<int32_t> bad(30, 3);
  bad[7] = 97;
  const Tensor bad_targets = Tensor::from_data(bad.data(), {30}, DType::kI32, kGpu);
  Tensor bad_loss;
  CHECK_NOTHROW(bad_loss = cross_entropy(logits.reshape({30, 97}).to(kGpu), bad_targets));
  const std::string message = message_of_next_read(bad_loss);
  CHECK(message.find("cross_entropy: target value 97 at flat position 7") != std::string::npos);
  // Every row ignored: NaN mean (the count of 0 made on the device), as on the CPU.
  const std::vector<int32_t> ignored(30, -100);
  CHECK(std::isnan(cross_entropy(logits.reshape({30, 97}).to(kGpu),
                                 Tensor::from_data(ignored.data(), {30}, DType::kI32, kGpu))
                       .item()));
}

TEST_CASE("fused causal attention, forward and backward, from permuted projections") {
  if (!gpu_usable()) return;
  for (int64_t head_dim : {int64_t{32}, int64_t{64}, int64_t{128}}) {
    CAPTURE(head_dim);
    // [B, T, H, D] projections viewed as [B, H, T, D], as the dense attention layer makes them.
    const Tensor q = random_f32({2, 70, 3, head_dim}, 20), k = random_f32({2, 70, 3, head_dim}, 21),
                 v = random_f32({2, 70, 3, head_dim}, 22);
    check_op(
        "causal attention", {q, k, v},
        [](auto& in) {
          return scaled_dot_product_attention(in[0].transpose(1, 2), in[1].transpose(1, 2),
                                              in[2].transpose(1, 2), true);
        },
        1e-4, 1e-5);
  }
}

TEST_CASE("fused causal attention under a bf16 autocast: the tensor-core kernel (D 64, 128)") {
  if (!gpu_usable()) return;
  // Both devices round q, k, v (and the upstream gradient) to bf16 and accumulate in f32 (the
  // CPU's bf16 kernel where the CPU has AVX512-BF16, else its exact f32 kernel): elements agree
  // within bf16 tolerance. Head dim 32 keeps the f32 kernels on CUDA and must still run.
  const AutocastGuard bf16(DType::kBF16);
  for (int64_t head_dim : {int64_t{32}, int64_t{64}, int64_t{128}}) {
    CAPTURE(head_dim);
    const Tensor q = random_f32({2, 150, 3, head_dim}, 30, -1.0, 1.0),
                 k = random_f32({2, 150, 3, head_dim}, 31, -1.0, 1.0),
                 v = random_f32({2, 150, 3, head_dim}, 32, -1.0, 1.0);
    check_op(
        "causal attention, bf16 autocast", {q, k, v},
        [](auto& in) {
          return scaled_dot_product_attention(in[0].transpose(1, 2), in[1].transpose(1, 2),
                                              in[2].transpose(1, 2), true);
        },
        3e-2, 3e-2);
  }
}

TEST_CASE("attention variants (KV cache, GQA, window, ALiBi, bidirectional, odd head dims)") {
  if (!gpu_usable()) return;
  struct Variant {
    const char* name;
    int64_t heads, kv_heads, q_len, kv_len, head_dim;
    bool causal;
    int64_t window;
    bool alibi;
  };
  const Variant variants[] = {
      {"decode: one query after 37 cached keys", 4, 4, 1, 38, 64, true, 0, false},
      {"chunked prefill: 9 queries after 23 cached", 4, 4, 9, 32, 64, true, 0, false},
      {"grouped-query: 6 heads over 2 KV heads", 6, 2, 40, 40, 64, true, 0, false},
      {"grouped-query decode", 6, 2, 1, 50, 128, true, 0, false},
      {"sliding window 7, causal", 2, 2, 45, 45, 32, true, 7, false},
      {"sliding window 5, bidirectional", 2, 2, 30, 30, 32, false, 5, false},
      {"ALiBi, causal", 4, 4, 33, 33, 64, true, 0, true},
      {"ALiBi, bidirectional, window 9", 4, 4, 20, 20, 64, false, 9, true},
      {"bidirectional, head dim 80", 3, 3, 25, 25, 80, false, 0, false},
      {"causal, head dim 200, more queries than keys", 2, 1, 12, 8, 200, true, 0, false},
  };
  uint64_t seed = 100;
  for (const Variant& c : variants) {
    CAPTURE(c.name);
    const Tensor q = random_f32({2, c.heads, c.q_len, c.head_dim}, ++seed);
    const Tensor k = random_f32({2, c.kv_heads, c.kv_len, c.head_dim}, ++seed);
    const Tensor v = random_f32({2, c.kv_heads, c.kv_len, c.head_dim}, ++seed);
    std::vector<float> slopes;
    for (int64_t h = 0; h < c.heads; ++h) slopes.push_back(0.5f / static_cast<float>(h + 1));
    check_op(
        c.name, {q, k, v},
        [&](auto& in) {
          AttentionOptions options;
          options.causal = c.causal;
          options.window = c.window;
          if (c.alibi)
            options.alibi_slopes = Tensor::from_vector(slopes, {c.heads}).to(in[0].device());
          return scaled_dot_product_attention(in[0], in[1], in[2], options);
        },
        1e-4, 1e-5);
  }
}

TEST_CASE("random fills and dropout masks equal the CPU's draws") {
  if (!gpu_usable()) return;
  Generator cpu_gen(42), gpu_gen(42);
  check_close(randn({1000}, gpu_gen, DType::kF32, kGpu), randn({1000}, cpu_gen), 1e-5, 1e-5,
              "randn");
  check_close(uniform({1001}, gpu_gen, -1.0, 3.0, DType::kF32, kGpu),
              uniform({1001}, cpu_gen, -1.0, 3.0), 1e-6, 1e-6, "uniform");
  const Tensor x = random_f32({64, 64}, 24);
  Generator drop_cpu(7), drop_gpu(7);
  check_close(dropout(x.to(kGpu), 0.25, drop_gpu), dropout(x, 0.25, drop_cpu), 1e-6, 0, "dropout");
}

TEST_CASE("optimizer updates on the GPU equal the CPU loop's (adamw, sgd, lion, bf16 copy)") {
  if (!gpu_usable()) return;
  const Tensor param = random_f32({1000, 33}, 30), grad = random_f32({1000, 33}, 31);
  const Tensor m = random_f32({1000, 33}, 32), v = random_f32({1000, 33}, 33, 0.0, 1.0);
  for (const OptimizerRule rule :
       {OptimizerRule::kAdamW, OptimizerRule::kSgd, OptimizerRule::kLion}) {
    CAPTURE(static_cast<int>(rule));
    OptimizerUpdate u;
    u.rule = rule;
    u.step = 3;
    u.lr = 1e-3;
    u.weight_decay = 0.1;
    u.momentum = 0.9;
    u.grad_scale = 0.5f;
    Tensor cpu_p = param.contiguous().to(DType::kF32), cpu_m = m.to(DType::kF32),
           cpu_v = v.to(DType::kF32), cpu_copy = zeros({1000, 33}, DType::kBF16);
    Tensor gpu_p = param.to(kGpu), gpu_m = m.to(kGpu), gpu_v = v.to(kGpu),
           gpu_copy = zeros({1000, 33}, DType::kBF16, kGpu);
    // Fresh copies: to(kGpu) of a CPU tensor is a new buffer; the CPU side needs its own too.
    cpu_p = add_scalar(cpu_p, 0.0);
    cpu_m = add_scalar(cpu_m, 0.0);
    cpu_v = add_scalar(cpu_v, 0.0);
    optimizer_update(u, cpu_p, grad, cpu_m, cpu_v, cpu_copy);
    optimizer_update(u, gpu_p, grad.to(kGpu), gpu_m, gpu_v, gpu_copy);
    check_close(gpu_p, cpu_p, 1e-6, 1e-7, "parameter");
    check_close(gpu_m, cpu_m, 1e-6, 1e-7, "state0");
    check_close(gpu_copy, cpu_copy, 1e-2, 1e-6, "bf16 copy");
    if (rule == OptimizerRule::kAdamW) check_close(gpu_v, cpu_v, 1e-6, 1e-7, "state1");
  }
}
