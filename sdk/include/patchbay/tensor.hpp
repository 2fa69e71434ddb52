// Patchbay SDK, header-only C++ layer over pb_ops_table (patchbay/ops.h): `patchbay::Tensor`,
// an RAII handle that reads like PyTorch:
//
//   patchbay::Ops ops(host->ops);                      // once per component
//   auto x = ops.randn({4, 8}, gen);                    // gen: patchbay::Generator
//   auto w = ops.zeros({8, 3}).requires_grad(true);
//   auto loss = (x.matmul(w).gelu() * 2.0).sum();
//   loss.backward();                                    // w.grad() now holds dloss/dw
//
// Errors: a failing table call throws patchbay::PluginError (component.hpp) with the
// engine's code and message; plugin adapters turn it into a pb_status at the boundary.
// Lifetime: Tensor holds one reference to its pb_tensor; copies retain, destruction
// releases. An empty (default-constructed) Tensor holds nothing; `defined()` tells.
// Thread safety: as the table (a Tensor object itself must not be shared mutably).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "patchbay/component.hpp"
#include "patchbay/ops.h"

namespace patchbay {

// Throws PluginError for a non-NULL status from `ops` (freeing the status).
inline void check_ops_status(const pb_ops_table* ops, pb_status* status, const char* what) {
  if (!status) return;
  pb_status_code code = ops->status_code(status);
  std::string message = std::string(what) + ": " + ops->status_message(status);
  ops->status_free(status);
  throw PluginError(code, message);
}

class Generator;

class Tensor {
 public:
  Tensor() = default;
  // Takes ownership of one reference to `handle` (as returned by a table function).
  Tensor(const pb_ops_table* ops, pb_tensor* handle) : ops_(ops), h_(handle) {}
  Tensor(const Tensor& o) : ops_(o.ops_), h_(o.h_) {
    if (h_) ops_->retain(h_);
  }
  Tensor(Tensor&& o) noexcept : ops_(o.ops_), h_(std::exchange(o.h_, nullptr)) {}
  Tensor& operator=(Tensor o) noexcept {
    std::swap(ops_, o.ops_);
    std::swap(h_, o.h_);
    return *this;
  }
  ~Tensor() {
    if (h_) ops_->release(h_);
  }

  bool defined() const { return h_ != nullptr; }
  pb_tensor* handle() const { return h_; }
  // Gives up ownership of the reference (for returning through the C ABI).
  pb_tensor* release() { return std::exchange(h_, nullptr); }
  const pb_ops_table* ops() const { return ops_; }

  // ---- metadata ----
  std::vector<int64_t> shape() const {
    const int64_t* s = ops_->shape(h_);
    return std::vector<int64_t>(s, s + ops_->ndim(h_));
  }
  std::vector<int64_t> strides() const {
    const int64_t* s = ops_->strides(h_);
    return std::vector<int64_t>(s, s + ops_->ndim(h_));
  }
  int64_t dim() const { return static_cast<int64_t>(ops_->ndim(h_)); }
  int64_t size(int64_t d) const { return ops_->shape(h_)[d < 0 ? d + dim() : d]; }
  int64_t numel() const { return ops_->numel(h_); }
  pb_dtype dtype() const { return ops_->dtype(h_); }
  bool is_contiguous() const { return ops_->is_contiguous(h_) != 0; }

  // ---- data (CPU) ----
  // All elements, row-major, converted to float.
  std::vector<float> to_vector() const {
    Tensor f = to(PB_DTYPE_F32);
    std::vector<float> v(static_cast<size_t>(f.numel()));
    check_ops_status(ops_, ops_->copy_to_host(f.h_, v.data(), v.size() * sizeof(float)),
                     "to_vector");
    return v;
  }
  double item() const {
    std::vector<float> v = to_vector();
    if (v.size() != 1)
      throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                        "item: tensor has " + std::to_string(v.size()) + " elements");
    return v[0];
  }
  // Element 0 of the view (index with strides()).
  template <class T>
  T* data() const {
    void* p = nullptr;
    check_ops_status(ops_, ops_->data_ptr(h_, &p), "data");
    return static_cast<T*>(p);
  }

  // ---- autograd ----
  Tensor& requires_grad(bool value) {
    check_ops_status(ops_, ops_->set_requires_grad(h_, value ? 1 : 0), "requires_grad");
    return *this;
  }
  bool requires_grad() const { return ops_->requires_grad(h_) != 0; }
  Tensor grad() const {
    pb_tensor* g = nullptr;
    check_ops_status(ops_, ops_->grad(h_, &g), "grad");
    return Tensor(ops_, g);
  }
  void zero_grad() { ops_->zero_grad(h_); }
  void backward() const { check_ops_status(ops_, ops_->backward(h_, nullptr), "backward"); }
  void backward(const Tensor& seed) const {
    check_ops_status(ops_, ops_->backward(h_, seed.h_), "backward");
  }
  Tensor detach() const {
    return make("detach", [&](pb_tensor** o) { return ops_->detach(h_, o); });
  }

  // ---- element-wise ----
  Tensor unary(pb_unary_op op) const {
    return make("unary", [&](pb_tensor** o) { return ops_->unary(op, h_, o); });
  }
  Tensor binary(pb_binary_op op, const Tensor& b) const {
    return make("binary", [&](pb_tensor** o) { return ops_->binary(op, h_, b.h_, o); });
  }
  Tensor scalar(pb_scalar_op op, double s) const {
    return make("scalar", [&](pb_tensor** o) { return ops_->scalar(op, h_, s, o); });
  }
  Tensor exp() const { return unary(PB_UNARY_EXP); }
  Tensor log() const { return unary(PB_UNARY_LOG); }
  Tensor sqrt() const { return unary(PB_UNARY_SQRT); }
  Tensor rsqrt() const { return unary(PB_UNARY_RSQRT); }
  Tensor abs() const { return unary(PB_UNARY_ABS); }
  Tensor tanh() const { return unary(PB_UNARY_TANH); }
  Tensor sigmoid() const { return unary(PB_UNARY_SIGMOID); }
  Tensor relu() const { return unary(PB_UNARY_RELU); }
  Tensor gelu(bool tanh_approximation = true) const {
    return unary(tanh_approximation ? PB_UNARY_GELU_TANH : PB_UNARY_GELU_ERF);
  }
  Tensor silu() const { return unary(PB_UNARY_SILU); }
  Tensor softmax() const { return unary(PB_UNARY_SOFTMAX); }
  Tensor log_softmax() const { return unary(PB_UNARY_LOG_SOFTMAX); }
  Tensor pow(double p) const { return scalar(PB_SCALAR_POW, p); }

  // ---- linear algebra, normalisation ----
  Tensor matmul(const Tensor& b, bool transpose_a = false, bool transpose_b = false) const {
    return make("matmul",
                [&](pb_tensor** o) { return ops_->matmul(h_, b.h_, transpose_a, transpose_b, o); });
  }
  Tensor layer_norm(const Tensor& gain, const Tensor& bias, double eps = 1e-5) const {
    return make("layer_norm",
                [&](pb_tensor** o) { return ops_->layer_norm(h_, gain.h_, bias.h_, eps, o); });
  }
  Tensor rms_norm(const Tensor& gain, double eps = 1e-6) const {
    return make("rms_norm", [&](pb_tensor** o) { return ops_->rms_norm(h_, gain.h_, eps, o); });
  }

  // ---- reductions ----
  Tensor reduce(pb_reduce_op op, const std::vector<int64_t>& dims, bool keepdim) const {
    return make("reduce", [&](pb_tensor** o) {
      return ops_->reduce(op, h_, dims.data(), dims.size(), keepdim, o);
    });
  }
  Tensor sum(const std::vector<int64_t>& dims = {}, bool keepdim = false) const {
    return reduce(PB_REDUCE_SUM, dims, keepdim);
  }
  Tensor mean(const std::vector<int64_t>& dims = {}, bool keepdim = false) const {
    return reduce(PB_REDUCE_MEAN, dims, keepdim);
  }
  Tensor max(const std::vector<int64_t>& dims = {}, bool keepdim = false) const {
    return reduce(PB_REDUCE_MAX, dims, keepdim);
  }

  // ---- shape ----
  Tensor reshape(const std::vector<int64_t>& s) const {
    return make("reshape", [&](pb_tensor** o) { return ops_->reshape(h_, s.data(), s.size(), o); });
  }
  Tensor view(const std::vector<int64_t>& s) const {
    return make("view", [&](pb_tensor** o) { return ops_->view(h_, s.data(), s.size(), o); });
  }
  Tensor permute(const std::vector<int64_t>& d) const {
    return make("permute", [&](pb_tensor** o) { return ops_->permute(h_, d.data(), d.size(), o); });
  }
  Tensor transpose(int64_t d0, int64_t d1) const {
    return make("transpose", [&](pb_tensor** o) { return ops_->transpose(h_, d0, d1, o); });
  }
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const {
    return make("slice", [&](pb_tensor** o) { return ops_->slice(h_, dim, start, end, step, o); });
  }
  Tensor expand(const std::vector<int64_t>& s) const {
    return make("expand", [&](pb_tensor** o) { return ops_->expand(h_, s.data(), s.size(), o); });
  }
  Tensor contiguous() const {
    return make("contiguous", [&](pb_tensor** o) { return ops_->contiguous(h_, o); });
  }
  Tensor to(pb_dtype dt) const {
    return make("to", [&](pb_tensor** o) { return ops_->to_dtype(h_, dt, o); });
  }
  Tensor masked_fill(const Tensor& mask, double value) const {
    return make("masked_fill",
                [&](pb_tensor** o) { return ops_->masked_fill(h_, mask.h_, value, o); });
  }
  inline Tensor dropout(double p, Generator& gen, bool training = true) const;

 private:
  template <class Call>
  Tensor make(const char* what, Call&& call) const {
    if (!h_)
      throw PluginError(PB_STATUS_INVALID_ARGUMENT, std::string(what) + ": tensor is undefined");
    pb_tensor* out = nullptr;
    check_ops_status(ops_, call(&out), what);
    return Tensor(ops_, out);
  }

  const pb_ops_table* ops_ = nullptr;
  pb_tensor* h_ = nullptr;
};

inline Tensor operator+(const Tensor& a, const Tensor& b) { return a.binary(PB_BINARY_ADD, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return a.binary(PB_BINARY_SUB, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return a.binary(PB_BINARY_MUL, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return a.binary(PB_BINARY_DIV, b); }
inline Tensor operator-(const Tensor& x) { return x.unary(PB_UNARY_NEG); }
inline Tensor operator+(const Tensor& a, double s) { return a.scalar(PB_SCALAR_ADD, s); }
inline Tensor operator-(const Tensor& a, double s) { return a.scalar(PB_SCALAR_ADD, -s); }
inline Tensor operator*(const Tensor& a, double s) { return a.scalar(PB_SCALAR_MUL, s); }
inline Tensor operator/(const Tensor& a, double s) { return a.scalar(PB_SCALAR_MUL, 1.0 / s); }
inline Tensor operator*(double s, const Tensor& a) { return a.scalar(PB_SCALAR_MUL, s); }

// ops->linear (pb_ops_table version 10): act(x · weightᵀ + bias), a linear layer as one call.
// bias may be undefined (none); activation nullptr (none), PB_UNARY_GELU_TANH or
// PB_UNARY_RELU. Where the host has it, a decoding step adds the bias and applies the
// activation in the pass that streams the weight; on an older host (has_linear false) this
// composes matmul, the bias add (fused with the activation through bias_activation, version 7,
// where the host has that) and the activation, which compute the same function.
inline bool has_linear(const pb_ops_table* ops) {
  return PB_HAS_FIELD(ops, pb_ops_table, linear) && ops->linear != nullptr;
}

inline Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                     const pb_unary_op* activation = nullptr) {
  const pb_ops_table* ops = x.ops();
  pb_tensor* out = nullptr;
  if (has_linear(ops)) {
    check_ops_status(ops,
                     ops->linear(x.handle(), weight.handle(),
                                 bias.defined() ? bias.handle() : nullptr, activation, &out),
                     "linear");
    return Tensor(ops, out);
  }
  Tensor y = x.matmul(weight, false, true);
  if (bias.defined() && activation != nullptr && PB_HAS_FIELD(ops, pb_ops_table, bias_activation) &&
      ops->bias_activation != nullptr) {
    check_ops_status(ops, ops->bias_activation(y.handle(), bias.handle(), *activation, &out),
                     "bias_activation");
    return Tensor(ops, out);
  }
  if (bias.defined()) y = y + bias;
  return activation != nullptr ? y.unary(*activation) : y;
}

// ops->to_device (pb_ops_table version 11): x copied to (device_type, device_index), or x
// itself when it is already there. A layer creates its parameters with randn / uniform on
// the CPU and moves them to pb_layer_context's device with this. An older host has only the
// CPU: there x itself for the CPU, and PluginError(PB_STATUS_UNSUPPORTED) for a device.
inline bool has_device_tensors(const pb_ops_table* ops) {
  return PB_HAS_FIELD(ops, pb_ops_table, to_device) && ops->to_device != nullptr;
}

inline Tensor to_device(const Tensor& x, pb_device_type device_type, int32_t device_index = 0) {
  const pb_ops_table* ops = x.ops();
  if (!has_device_tensors(ops)) {
    if (device_type == PB_DEVICE_CPU) return x;
    throw PluginError(PB_STATUS_UNSUPPORTED, "to_device: this host's ops table (version " +
                                                 std::to_string(ops->version) +
                                                 ") has no device tensors; they need version 11");
  }
  pb_tensor* out = nullptr;
  check_ops_status(ops, ops->to_device(x.handle(), device_type, device_index, &out), "to_device");
  return Tensor(ops, out);
}

// Seeded random generator (owned).
class Generator {
 public:
  Generator(const pb_ops_table* ops, uint64_t seed) : ops_(ops) {
    check_ops_status(ops_, ops_->generator_create(seed, &g_), "generator");
  }
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;
  ~Generator() { ops_->generator_free(g_); }
  pb_generator* handle() const { return g_; }

 private:
  const pb_ops_table* ops_;
  pb_generator* g_ = nullptr;
};

inline Tensor Tensor::dropout(double p, Generator& gen, bool training) const {
  return make("dropout",
              [&](pb_tensor** o) { return ops_->dropout(h_, p, gen.handle(), training, o); });
}

// Free-function creators and multi-tensor ops, bound to one table.
class Ops {
 public:
  explicit Ops(const pb_ops_table* ops) : ops_(ops) {
    if (!ops_)
      throw PluginError(PB_STATUS_UNSUPPORTED,
                        "this host was built without the tensor engine (ops is NULL)");
  }
  const pb_ops_table* table() const { return ops_; }

  Tensor empty(const std::vector<int64_t>& s, pb_dtype dt = PB_DTYPE_F32) const {
    return make("empty", [&](pb_tensor** o) {
      return ops_->empty(s.data(), s.size(), dt, PB_DEVICE_CPU, 0, o);
    });
  }
  Tensor full(const std::vector<int64_t>& s, double v, pb_dtype dt = PB_DTYPE_F32) const {
    return make("full", [&](pb_tensor** o) {
      return ops_->full(s.data(), s.size(), v, dt, PB_DEVICE_CPU, 0, o);
    });
  }
  Tensor zeros(const std::vector<int64_t>& s, pb_dtype dt = PB_DTYPE_F32) const {
    return full(s, 0.0, dt);
  }
  Tensor ones(const std::vector<int64_t>& s, pb_dtype dt = PB_DTYPE_F32) const {
    return full(s, 1.0, dt);
  }
  Tensor from_vector(const std::vector<float>& v, const std::vector<int64_t>& s) const {
    return make("from_vector", [&](pb_tensor** o) {
      return ops_->from_data(v.data(), s.data(), s.size(), PB_DTYPE_F32, o);
    });
  }
  Tensor from_vector(const std::vector<int64_t>& v, const std::vector<int64_t>& s) const {
    return make("from_vector", [&](pb_tensor** o) {
      return ops_->from_data(v.data(), s.data(), s.size(), PB_DTYPE_I64, o);
    });
  }
  Tensor arange(double start, double end, double step = 1.0, pb_dtype dt = PB_DTYPE_I64) const {
    return make("arange", [&](pb_tensor** o) { return ops_->arange(start, end, step, dt, o); });
  }
  Tensor randn(const std::vector<int64_t>& s, Generator& g, pb_dtype dt = PB_DTYPE_F32) const {
    return make("randn",
                [&](pb_tensor** o) { return ops_->randn(g.handle(), s.data(), s.size(), dt, o); });
  }
  Tensor uniform(const std::vector<int64_t>& s, Generator& g, double lo = 0, double hi = 1,
                 pb_dtype dt = PB_DTYPE_F32) const {
    return make("uniform", [&](pb_tensor** o) {
      return ops_->uniform(g.handle(), s.data(), s.size(), lo, hi, dt, o);
    });
  }
  Tensor concat(const std::vector<Tensor>& xs, int64_t dim) const {
    std::vector<const pb_tensor*> hs = handles(xs);
    return make("concat",
                [&](pb_tensor** o) { return ops_->concat(hs.data(), hs.size(), dim, o); });
  }
  Tensor stack(const std::vector<Tensor>& xs, int64_t dim) const {
    std::vector<const pb_tensor*> hs = handles(xs);
    return make("stack", [&](pb_tensor** o) { return ops_->stack(hs.data(), hs.size(), dim, o); });
  }
  Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                   double scale = 0.0) const {
    return make("attention", [&](pb_tensor** o) {
      return ops_->attention(q.handle(), k.handle(), v.handle(), causal, scale, o);
    });
  }
  Tensor embedding(const Tensor& weights, const Tensor& ids) const {
    return make("embedding",
                [&](pb_tensor** o) { return ops_->embedding(weights.handle(), ids.handle(), o); });
  }
  Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                       double label_smoothing = 0.0,
                       pb_loss_reduction reduction = PB_LOSS_MEAN) const {
    return make("cross_entropy", [&](pb_tensor** o) {
      return ops_->cross_entropy(logits.handle(), targets.handle(), ignore_index, label_smoothing,
                                 reduction, o);
    });
  }

 private:
  static std::vector<const pb_tensor*> handles(const std::vector<Tensor>& xs) {
    std::vector<const pb_tensor*> hs;
    for (const Tensor& x : xs) hs.push_back(x.handle());
    return hs;
  }
  template <class Call>
  Tensor make(const char* what, Call&& call) const {
    pb_tensor* out = nullptr;
    check_ops_status(ops_, call(&out), what);
    return Tensor(ops_, out);
  }
  const pb_ops_table* ops_;
};

// RAII: grad recording off on this thread for the guard's lifetime.
class NoGradGuard {
 public:
  explicit NoGradGuard(const pb_ops_table* ops) : ops_(ops), previous_(ops->set_grad_enabled(0)) {}
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
  ~NoGradGuard() { ops_->set_grad_enabled(previous_); }

 private:
  const pb_ops_table* ops_;
  int previous_;
};

}  // namespace patchbay
