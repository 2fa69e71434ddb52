// Implementation of pb_ops_table over the C++ engine: opaque refcounted pb_tensor handles,
// exception-to-status translation, and the C custom-op bridge (pb_custom_op_desc callbacks
// wrapped in a CustomOp). Functions are grouped in the table's order.
#include "engine/ops_table.hpp"

#include <atomic>
#include <cstddef>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/ops.hpp"
#include "engine/ops/causal_linear_attention.hpp"
#include "engine/ops/sorted_chunk_attention.hpp"
#include "engine/ops_positional.hpp"
#include "engine/tensor_parallel.hpp"

using patchbay::Error;
using patchbay::ErrorKind;
namespace eng = patchbay::engine;

struct pb_tensor {
  std::atomic<int> refs{1};
  eng::Tensor tensor;
};

struct pb_generator {
  eng::Generator gen;
};

namespace patchbay::engine {
namespace {

// ---- statuses ----
struct EngineStatus {
  pb_status_code code;
  std::string message;
};
EngineStatus g_out_of_memory_status{PB_STATUS_OUT_OF_MEMORY, "out of memory creating a status"};
pb_status* default_status_create(pb_status_code code, const char* message) {
  if (code == PB_STATUS_OK) return nullptr;
  try {
    return reinterpret_cast<pb_status*>(new EngineStatus{code, message ? message : ""});
  } catch (...) {
    return reinterpret_cast<pb_status*>(&g_out_of_memory_status);
  }
}
pb_status_code default_status_code(const pb_status* s) {
  return s ? reinterpret_cast<const EngineStatus*>(s)->code : PB_STATUS_OK;
}
const char* default_status_message(const pb_status* s) {
  return s ? reinterpret_cast<const EngineStatus*>(s)->message.c_str() : "";
}
void default_status_free(pb_status* s) {
  auto* e = reinterpret_cast<EngineStatus*>(s);
  if (e != &g_out_of_memory_status) delete e;
}

StatusFunctions g_status{default_status_create, default_status_code, default_status_message,
                         default_status_free};

pb_status* status_create(pb_status_code code, const char* message) {
  return g_status.create(code, message);
}
pb_status_code status_code(const pb_status* s) { return g_status.code(s); }
const char* status_message(const pb_status* s) { return g_status.message(s); }
void status_free(pb_status* s) {
  if (s) g_status.free(s);
}

pb_status_code code_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return PB_STATUS_INVALID_ARGUMENT;
    case ErrorKind::kNotFound:
      return PB_STATUS_NOT_FOUND;
    case ErrorKind::kIo:
      return PB_STATUS_IO_ERROR;
    case ErrorKind::kNumeric:
      return PB_STATUS_OUT_OF_RANGE;
    default:
      return PB_STATUS_INTERNAL;
  }
}

// Runs body, translating exceptions into statuses.
template <class Body>
pb_status* guarded(const char* what, Body&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (const Error& e) {
    return status_create(code_of(e.kind()), (std::string(what) + ": " + e.what()).c_str());
  } catch (const std::bad_alloc&) {
    return status_create(PB_STATUS_OUT_OF_MEMORY, (std::string(what) + ": out of memory").c_str());
  } catch (const std::exception& e) {
    return status_create(PB_STATUS_INTERNAL, (std::string(what) + ": " + e.what()).c_str());
  } catch (...) {
    return status_create(PB_STATUS_INTERNAL, (std::string(what) + ": unknown exception").c_str());
  }
}

void require(const void* p, const char* name) {
  if (!p) throw Error(ErrorKind::kInvalidArgument, std::string(name) + " must not be NULL");
}

pb_tensor* wrap(Tensor t) {
  auto* h = new pb_tensor;
  h->tensor = std::move(t);
  return h;
}
const Tensor& unwrap(const pb_tensor* t, const char* name = "tensor") {
  require(t, name);
  return t->tensor;
}
Tensor unwrap_nullable(const pb_tensor* t) { return t ? t->tensor : Tensor(); }

DType to_dtype_enum(pb_dtype d) {
  if (d < PB_DTYPE_F32 || d > PB_DTYPE_I64)
    throw Error(ErrorKind::kInvalidArgument,
                "unknown pb_dtype " + std::to_string(static_cast<int>(d)));
  return static_cast<DType>(d);
}
Device to_device(pb_device_type type, int32_t index) {
  if (type != PB_DEVICE_CPU && type != PB_DEVICE_CUDA)
    throw Error(ErrorKind::kInvalidArgument,
                "unknown pb_device_type " + std::to_string(static_cast<int>(type)));
  return Device{type == PB_DEVICE_CPU ? DeviceType::kCpu : DeviceType::kCuda, index};
}
Shape to_shape(const int64_t* values, size_t n, const char* name) {
  if (n > 0) require(values, name);
  return Shape(values, values + n);
}

// Output helper: writes a new handle to *out.
template <class Fn>
pb_status* produce(const char* what, pb_tensor** out, Fn&& fn) noexcept {
  return guarded(what, [&] {
    require(out, "out");
    Tensor t = fn();
    *out = wrap(std::move(t));
  });
}

// ---- lifetime and queries ----
void retain(pb_tensor* t) {
  if (t) t->refs.fetch_add(1, std::memory_order_relaxed);
}
void release(pb_tensor* t) {
  if (t && t->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete t;
}
size_t ndim(const pb_tensor* t) { return t->tensor.shape().size(); }
const int64_t* shape(const pb_tensor* t) { return t->tensor.shape().data(); }
const int64_t* strides(const pb_tensor* t) { return t->tensor.strides().data(); }
int64_t numel(const pb_tensor* t) { return t->tensor.numel(); }
pb_dtype dtype(const pb_tensor* t) { return static_cast<pb_dtype>(t->tensor.dtype()); }
pb_device_type device_type(const pb_tensor* t) {
  return t->tensor.device().type == DeviceType::kCpu ? PB_DEVICE_CPU : PB_DEVICE_CUDA;
}
int32_t device_index(const pb_tensor* t) { return t->tensor.device().index; }
int is_contiguous(const pb_tensor* t) { return t->tensor.is_contiguous() ? 1 : 0; }

void require_cpu(const Tensor& t, const char* what) {
  if (t.device().type != DeviceType::kCpu)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(what) + ": tensor is on " + t.device().str() + ", expected cpu");
}

pb_status* data_ptr(pb_tensor* t, void** out) {
  return guarded("data_ptr", [&] {
    require(out, "out");
    require_cpu(unwrap(t), "data_ptr");
    *out = t->tensor.data_ptr();
  });
}
pb_status* copy_to_host(const pb_tensor* t, void* dst, size_t dst_bytes) {
  return guarded("copy_to_host", [&] {
    const Tensor& x = unwrap(t);  // any device (version 11): copy_ transfers
    if (dst_bytes < x.nbytes())
      throw Error(ErrorKind::kInvalidArgument, "destination holds " + std::to_string(dst_bytes) +
                                                   " bytes, " + x.str() + " needs " +
                                                   std::to_string(x.nbytes()));
    if (x.nbytes()) require(dst, "dst");
    Tensor target = Tensor::wrap(dst, x.shape(), x.dtype());
    copy_(target, x);
  });
}
pb_status* copy_from_host(pb_tensor* t, const void* src, size_t src_bytes) {
  return guarded("copy_from_host", [&] {
    Tensor& x = t ? t->tensor : throw Error(ErrorKind::kInvalidArgument, "tensor must not be NULL");
    if (src_bytes != x.nbytes())
      throw Error(ErrorKind::kInvalidArgument, "source holds " + std::to_string(src_bytes) +
                                                   " bytes, " + x.str() + " needs " +
                                                   std::to_string(x.nbytes()));
    if (x.nbytes()) require(src, "src");
    Tensor source = Tensor::wrap(const_cast<void*>(src), x.shape(), x.dtype());
    copy_(x, source);
  });
}

// ---- creation ----
pb_status* empty(const int64_t* s, size_t n, pb_dtype dt, pb_device_type dev, int32_t idx,
                 pb_tensor** out) {
  return produce("empty", out, [&] {
    return Tensor::empty(to_shape(s, n, "shape"), to_dtype_enum(dt), to_device(dev, idx));
  });
}
pb_status* full(const int64_t* s, size_t n, double v, pb_dtype dt, pb_device_type dev, int32_t idx,
                pb_tensor** out) {
  return produce("full", out, [&] {
    return engine::full(to_shape(s, n, "shape"), v, to_dtype_enum(dt), to_device(dev, idx));
  });
}
pb_status* from_data(const void* data, const int64_t* s, size_t n, pb_dtype dt, pb_tensor** out) {
  return produce("from_data", out, [&] {
    Shape sh = to_shape(s, n, "shape");
    if (shape_numel(sh) > 0) require(data, "data");
    return Tensor::from_data(data, sh, to_dtype_enum(dt));
  });
}
pb_status* arange(double start, double end, double step, pb_dtype dt, pb_tensor** out) {
  return produce("arange", out,
                 [&] { return engine::arange(start, end, step, to_dtype_enum(dt)); });
}
pb_status* generator_create(uint64_t seed, pb_generator** out) {
  return guarded("generator_create", [&] {
    require(out, "out");
    *out = new pb_generator{Generator(seed)};
  });
}
void generator_free(pb_generator* g) { delete g; }
pb_status* randn(pb_generator* g, const int64_t* s, size_t n, pb_dtype dt, pb_tensor** out) {
  return produce("randn", out, [&] {
    require(g, "generator");
    return engine::randn(to_shape(s, n, "shape"), g->gen, to_dtype_enum(dt));
  });
}
pb_status* uniform(pb_generator* g, const int64_t* s, size_t n, double lo, double hi, pb_dtype dt,
                   pb_tensor** out) {
  return produce("uniform", out, [&] {
    require(g, "generator");
    return engine::uniform(to_shape(s, n, "shape"), g->gen, lo, hi, to_dtype_enum(dt));
  });
}

// ---- autograd ----
pb_status* set_requires_grad(pb_tensor* t, int value) {
  return guarded("set_requires_grad", [&] {
    require(t, "tensor");
    t->tensor.set_requires_grad(value != 0);
  });
}
int requires_grad(const pb_tensor* t) { return t->tensor.requires_grad() ? 1 : 0; }
pb_status* grad(const pb_tensor* t, pb_tensor** out) {
  return guarded("grad", [&] {
    require(out, "out");
    Tensor g = unwrap(t).grad();
    *out = g.defined() ? wrap(g) : nullptr;
  });
}
void zero_grad(pb_tensor* t) {
  if (t) t->tensor.zero_grad();
}
pb_status* backward_fn(pb_tensor* loss, pb_tensor* seed) {
  return guarded("backward",
                 [&] { engine::backward(unwrap(loss, "loss"), unwrap_nullable(seed)); });
}
pb_status* detach(const pb_tensor* t, pb_tensor** out) {
  return produce("detach", out, [&] { return unwrap(t).detach(); });
}
int set_grad_enabled(int enabled);

// ---- ops ----
pb_status* unary(pb_unary_op op, const pb_tensor* x, pb_tensor** out) {
  return produce("unary", out, [&]() -> Tensor {
    const Tensor& t = unwrap(x, "x");
    switch (op) {
      case PB_UNARY_NEG:
        return neg(t);
      case PB_UNARY_ABS:
        return abs(t);
      case PB_UNARY_EXP:
        return exp(t);
      case PB_UNARY_LOG:
        return log(t);
      case PB_UNARY_SQRT:
        return sqrt(t);
      case PB_UNARY_RSQRT:
        return rsqrt(t);
      case PB_UNARY_TANH:
        return tanh(t);
      case PB_UNARY_SIGMOID:
        return sigmoid(t);
      case PB_UNARY_RELU:
        return relu(t);
      case PB_UNARY_GELU_TANH:
        return gelu_tanh(t);
      case PB_UNARY_GELU_ERF:
        return gelu_erf(t);
      case PB_UNARY_SILU:
        return silu(t);
      case PB_UNARY_SOFTMAX:
        return softmax(t);
      case PB_UNARY_LOG_SOFTMAX:
        return log_softmax(t);
    }
    throw Error(ErrorKind::kInvalidArgument,
                "unknown pb_unary_op " + std::to_string(static_cast<int>(op)));
  });
}
pb_status* binary(pb_binary_op op, const pb_tensor* a, const pb_tensor* b, pb_tensor** out) {
  return produce("binary", out, [&]() -> Tensor {
    const Tensor &x = unwrap(a, "a"), &y = unwrap(b, "b");
    switch (op) {
      case PB_BINARY_ADD:
        return add(x, y);
      case PB_BINARY_SUB:
        return sub(x, y);
      case PB_BINARY_MUL:
        return mul(x, y);
      case PB_BINARY_DIV:
        return div(x, y);
    }
    throw Error(ErrorKind::kInvalidArgument,
                "unknown pb_binary_op " + std::to_string(static_cast<int>(op)));
  });
}
pb_status* scalar(pb_scalar_op op, const pb_tensor* x, double s, pb_tensor** out) {
  return produce("scalar", out, [&]() -> Tensor {
    const Tensor& t = unwrap(x, "x");
    switch (op) {
      case PB_SCALAR_ADD:
        return add_scalar(t, s);
      case PB_SCALAR_MUL:
        return mul_scalar(t, s);
      case PB_SCALAR_POW:
        return pow_scalar(t, s);
    }
    throw Error(ErrorKind::kInvalidArgument,
                "unknown pb_scalar_op " + std::to_string(static_cast<int>(op)));
  });
}
pb_status* matmul_fn(const pb_tensor* a, const pb_tensor* b, int ta, int tb, pb_tensor** out) {
  return produce("matmul", out,
                 [&] { return matmul(unwrap(a, "a"), unwrap(b, "b"), ta != 0, tb != 0); });
}
pb_status* layer_norm_fn(const pb_tensor* x, const pb_tensor* g, const pb_tensor* b, double eps,
                         pb_tensor** out) {
  return produce("layer_norm", out, [&] {
    return layer_norm(unwrap(x, "x"), unwrap(g, "gain"), unwrap_nullable(b), eps);
  });
}
pb_status* rms_norm_fn(const pb_tensor* x, const pb_tensor* g, double eps, pb_tensor** out) {
  return produce("rms_norm", out, [&] { return rms_norm(unwrap(x, "x"), unwrap(g, "gain"), eps); });
}
pb_status* reduce(pb_reduce_op op, const pb_tensor* x, const int64_t* dims, size_t n, int keepdim,
                  pb_tensor** out) {
  return produce("reduce", out, [&]() -> Tensor {
    std::vector<int64_t> d = to_shape(dims, n, "dims");
    const Tensor& t = unwrap(x, "x");
    switch (op) {
      case PB_REDUCE_SUM:
        return sum(t, d, keepdim != 0);
      case PB_REDUCE_MEAN:
        return mean(t, d, keepdim != 0);
      case PB_REDUCE_MAX:
        return max(t, d, keepdim != 0);
    }
    throw Error(ErrorKind::kInvalidArgument,
                "unknown pb_reduce_op " + std::to_string(static_cast<int>(op)));
  });
}
pb_status* reshape_fn(const pb_tensor* x, const int64_t* s, size_t n, pb_tensor** out) {
  return produce("reshape", out, [&] { return reshape(unwrap(x, "x"), to_shape(s, n, "shape")); });
}
pb_status* view_fn(const pb_tensor* x, const int64_t* s, size_t n, pb_tensor** out) {
  return produce("view", out, [&] { return view(unwrap(x, "x"), to_shape(s, n, "shape")); });
}
pb_status* permute_fn(const pb_tensor* x, const int64_t* d, size_t n, pb_tensor** out) {
  return produce("permute", out, [&] { return permute(unwrap(x, "x"), to_shape(d, n, "dims")); });
}
pb_status* transpose_fn(const pb_tensor* x, int64_t d0, int64_t d1, pb_tensor** out) {
  return produce("transpose", out, [&] { return transpose(unwrap(x, "x"), d0, d1); });
}
pb_status* slice_fn(const pb_tensor* x, int64_t dim, int64_t start, int64_t end, int64_t step,
                    pb_tensor** out) {
  return produce("slice", out, [&] { return slice(unwrap(x, "x"), dim, start, end, step); });
}
pb_status* expand_fn(const pb_tensor* x, const int64_t* s, size_t n, pb_tensor** out) {
  return produce("expand", out, [&] { return expand(unwrap(x, "x"), to_shape(s, n, "shape")); });
}
pb_status* contiguous_fn(const pb_tensor* x, pb_tensor** out) {
  return produce("contiguous", out, [&] { return contiguous(unwrap(x, "x")); });
}
std::vector<Tensor> unwrap_list(const pb_tensor* const* xs, size_t n) {
  if (n) require(xs, "tensors");
  std::vector<Tensor> v;
  for (size_t i = 0; i < n; ++i) v.push_back(unwrap(xs[i]));
  return v;
}
pb_status* concat_fn(const pb_tensor* const* xs, size_t n, int64_t dim, pb_tensor** out) {
  return produce("concat", out, [&] { return concat(unwrap_list(xs, n), dim); });
}
pb_status* stack_fn(const pb_tensor* const* xs, size_t n, int64_t dim, pb_tensor** out) {
  return produce("stack", out, [&] { return stack(unwrap_list(xs, n), dim); });
}
pb_status* to_dtype_fn(const pb_tensor* x, pb_dtype dt, pb_tensor** out) {
  return produce("to_dtype", out, [&] { return to_dtype(unwrap(x, "x"), to_dtype_enum(dt)); });
}
pb_status* masked_fill_fn(const pb_tensor* x, const pb_tensor* mask, double value,
                          pb_tensor** out) {
  return produce("masked_fill", out,
                 [&] { return masked_fill(unwrap(x, "x"), unwrap(mask, "mask"), value); });
}
pb_status* dropout_fn(const pb_tensor* x, double p, pb_generator* g, int training,
                      pb_tensor** out) {
  return produce("dropout", out, [&] {
    require(g, "generator");
    return dropout(unwrap(x, "x"), p, g->gen, training != 0);
  });
}
pb_status* attention_fn(const pb_tensor* q, const pb_tensor* k, const pb_tensor* v, int causal,
                        double scale, pb_tensor** out) {
  return produce("attention", out, [&] {
    std::optional<double> s;
    if (scale > 0) s = scale;
    return scaled_dot_product_attention(unwrap(q, "q"), unwrap(k, "k"), unwrap(v, "v"), causal != 0,
                                        s);
  });
}

// ---- indexing ----
pb_status* embedding_fn(const pb_tensor* w, const pb_tensor* ids, pb_tensor** out) {
  return produce("embedding", out,
                 [&] { return embedding(unwrap(w, "weights"), unwrap(ids, "ids")); });
}
pb_status* cross_entropy_fn(const pb_tensor* logits, const pb_tensor* targets, int64_t ignore_index,
                            double smoothing, pb_loss_reduction reduction, pb_tensor** out) {
  return produce("cross_entropy", out, [&] {
    CrossEntropyOptions o;
    o.ignore_index = ignore_index;
    o.label_smoothing = smoothing;
    switch (reduction) {
      case PB_LOSS_MEAN:
        o.reduction = LossReduction::kMean;
        break;
      case PB_LOSS_SUM:
        o.reduction = LossReduction::kSum;
        break;
      case PB_LOSS_NONE:
        o.reduction = LossReduction::kNone;
        break;
      default:
        throw Error(ErrorKind::kInvalidArgument, "unknown pb_loss_reduction");
    }
    return cross_entropy(unwrap(logits, "logits"), unwrap(targets, "targets"), o);
  });
}
pb_status* cumsum_fn(const pb_tensor* x, int64_t dim, int reverse, pb_tensor** out) {
  return produce("cumsum", out, [&] { return cumsum(unwrap(x, "x"), dim, reverse != 0); });
}
pb_status* gather_fn(const pb_tensor* x, int64_t dim, const pb_tensor* index, pb_tensor** out) {
  return produce("gather", out,
                 [&] { return gather(unwrap(x, "x"), dim, unwrap(index, "index")); });
}
pb_status* scatter_add_fn(const pb_tensor* x, int64_t dim, const pb_tensor* index,
                          const pb_tensor* src, pb_tensor** out) {
  return produce("scatter_add", out, [&] {
    return scatter_add(unwrap(x, "x"), dim, unwrap(index, "index"), unwrap(src, "src"));
  });
}
pb_status* values_indices(const char* what, pb_tensor** values, pb_tensor** indices,
                          const std::function<ValuesIndices()>& fn) {
  return guarded(what, [&] {
    require(values, "values");
    require(indices, "indices");
    ValuesIndices r = fn();
    *values = wrap(r.values);
    *indices = wrap(r.indices);
  });
}
pb_status* sort_fn(const pb_tensor* x, int64_t dim, int desc, pb_tensor** values,
                   pb_tensor** indices) {
  return values_indices("sort", values, indices,
                        [&] { return sort(unwrap(x, "x"), dim, desc != 0); });
}
pb_status* argsort_fn(const pb_tensor* x, int64_t dim, int desc, pb_tensor** out) {
  return produce("argsort", out, [&] { return argsort(unwrap(x, "x"), dim, desc != 0); });
}
pb_status* topk_fn(const pb_tensor* x, int64_t k, int64_t dim, int largest, pb_tensor** values,
                   pb_tensor** indices) {
  return values_indices("topk", values, indices,
                        [&] { return topk(unwrap(x, "x"), k, dim, largest != 0); });
}

pb_status* memory_stats_fn(pb_device_type dev, int32_t idx, size_t* current, size_t* peak) {
  return guarded("memory_stats", [&] {
    MemoryStats s = memory_stats(to_device(dev, idx));
    if (current) *current = s.current_bytes;
    if (peak) *peak = s.peak_bytes;
  });
}

// ---- version 7 (fused elementwise chains) ----
pb_status* bias_activation_fn(const pb_tensor* x, const pb_tensor* bias, pb_unary_op activation,
                              pb_tensor** out) {
  return produce("bias_activation", out, [&] {
    if (activation != PB_UNARY_GELU_TANH && activation != PB_UNARY_RELU)
      throw Error(ErrorKind::kInvalidArgument,
                  "bias_activation: activation " + std::to_string(static_cast<int>(activation)) +
                      " is not fused; use PB_UNARY_GELU_TANH or PB_UNARY_RELU, or compose "
                      "binary(ADD) and unary for another activation");
    return bias_activation(unwrap(x, "x"), unwrap(bias, "bias"),
                           activation == PB_UNARY_RELU ? FusedActivation::kRelu : FusedActivation::kGeluTanh);
  });
}

// ---- version 10 (fused linear layer) ----
pb_status* linear_fn(const pb_tensor* x, const pb_tensor* weight, const pb_tensor* bias,
                     const pb_unary_op* activation, pb_tensor** out) {
  return produce("linear", out, [&] {
    LinearActivation act = LinearActivation::kNone;
    if (activation != nullptr) {
      if (*activation != PB_UNARY_GELU_TANH && *activation != PB_UNARY_RELU)
        throw Error(ErrorKind::kInvalidArgument,
                    "linear: activation " + std::to_string(static_cast<int>(*activation)) +
                        " is not fused; pass NULL, PB_UNARY_GELU_TANH or PB_UNARY_RELU, or "
                        "apply another activation with unary afterwards");
      act = *activation == PB_UNARY_RELU ? LinearActivation::kRelu : LinearActivation::kGeluTanh;
    }
    return linear(unwrap(x, "x"), unwrap(weight, "weight"), unwrap_nullable(bias), act);
  });
}

// ---- version 9 (tensor parallelism) ----
pb_status* tp_copy_to_region_fn(const pb_tensor* x, pb_tensor** out) {
  return produce("tp_copy_to_region", out, [&] { return tp_copy_to_region(unwrap(x, "x")); });
}
pb_status* tp_reduce_from_region_fn(const pb_tensor* x, pb_tensor** out) {
  return produce("tp_reduce_from_region", out,
                 [&] { return tp_reduce_from_region(unwrap(x, "x")); });
}

// ---- version 2 ----
pb_status* rotary_embedding_fn(const pb_tensor* x, int64_t position_offset, double theta,
                               pb_tensor** out) {
  return produce("rotary_embedding", out,
                 [&] { return rotary_embedding(unwrap(x, "x"), position_offset, theta); });
}

// ---- versions 3, 4 and 13 ----
// options: NULL = defaults. struct_size must cover the version-3 fields; bytes past the
// fields this engine knows (appended by a newer SDK) must be zero, i.e. those options off.
AttentionOptions attention_options_from(const pb_attention_options* options) {
  AttentionOptions o;
  if (options == nullptr) return o;
  constexpr size_t kVersion3Size =
      offsetof(pb_attention_options, alibi_slopes) + sizeof(options->alibi_slopes);
  if (options->struct_size < kVersion3Size)
    throw Error(ErrorKind::kInvalidArgument,
                "attention options: struct_size is " + std::to_string(options->struct_size) +
                    ", expected at least " + std::to_string(kVersion3Size) +
                    "; zero-initialise pb_attention_options and set struct_size = sizeof");
  const auto* bytes = reinterpret_cast<const unsigned char*>(options);
  for (size_t i = sizeof(pb_attention_options); i < options->struct_size; ++i)
    if (bytes[i] != 0)
      throw Error(ErrorKind::kInvalidArgument,
                  "attention options: a field past this engine's pb_attention_options (ops table "
                  "version " + std::to_string(PB_OPS_TABLE_VERSION) +
                      ") is set; this Patchbay cannot honour it. Upgrade Patchbay or leave it zero");
  o.causal = options->causal != 0;
  if (options->scale > 0) o.scale = options->scale;
  o.window = options->window;
  if (options->alibi_slopes != nullptr) o.alibi_slopes = unwrap(options->alibi_slopes, "alibi_slopes");
  if (PB_HAS_FIELD(options, pb_attention_options, block_size) && options->block_layout != nullptr) {
    o.block_layout = unwrap(options->block_layout, "block_layout");
    o.block_size = options->block_size;
  }
  if (PB_HAS_FIELD(options, pb_attention_options, segment_ids) && options->segment_ids != nullptr)
    o.segment_ids = unwrap(options->segment_ids, "segment_ids");
  return o;
}
pb_status* attention_with_options_fn(const pb_tensor* q, const pb_tensor* k, const pb_tensor* v,
                                     const pb_attention_options* options, pb_tensor** out) {
  return produce("attention_with_options", out, [&] {
    return scaled_dot_product_attention(unwrap(q, "q"), unwrap(k, "k"), unwrap(v, "v"),
                                        attention_options_from(options));
  });
}

// ---- version 5 (causal linear attention) ----
pb_status* causal_linear_attention_fn(const pb_tensor* q, const pb_tensor* k, const pb_tensor* v,
                                      pb_tensor** out) {
  return produce("causal_linear_attention", out, [&] {
    return causal_linear_attention(unwrap(q, "q"), unwrap(k, "k"), unwrap(v, "v"));
  });
}

// ---- version 14 (sorted-chunk attention: fused LSH attention) ----
pb_status* sorted_chunk_attention_fn(const pb_tensor* q, const pb_tensor* k, const pb_tensor* v,
                                     const pb_tensor* slot_position, const pb_tensor* slot_group,
                                     const pb_sorted_chunk_options* options, pb_tensor** out) {
  return produce("sorted_chunk_attention", out, [&] {
    constexpr size_t kVersion14Size = offsetof(pb_sorted_chunk_options, dedup) + sizeof(int32_t);
    if (options == nullptr || options->struct_size < kVersion14Size)
      throw Error(ErrorKind::kInvalidArgument,
                  "sorted_chunk_attention: options are required (chunk_len at least); "
                  "zero-initialise pb_sorted_chunk_options and set struct_size = sizeof");
    SortedChunkOptions o;
    o.chunk_len = options->chunk_len;
    o.scale = options->scale;
    o.self_bias = options->self_bias;
    o.causal = options->causal != 0;
    o.dedup = options->dedup != 0;
    return sorted_chunk_attention(unwrap(q, "q"), unwrap(k, "k"), unwrap(v, "v"),
                                  unwrap(slot_position, "slot_position"),
                                  unwrap(slot_group, "slot_group"), o);
  });
}

}  // namespace

// Defined in ops_table_custom.cpp.
int ops_table_set_grad_enabled(int enabled);
void fill_custom_op_entries(pb_ops_table& table);
void fill_autocast_entries(pb_ops_table& table);  // ops_table_autocast.cpp (version 6)
void fill_device_entries(pb_ops_table& table);    // ops_table_device.cpp (version 11)
void fill_optimizer_entries(pb_ops_table& table);  // ops_table_optimizer.cpp (version 12)

namespace {
int set_grad_enabled(int enabled) { return ops_table_set_grad_enabled(enabled); }

pb_ops_table make_table() {
  pb_ops_table t{};
  t.struct_size = sizeof(pb_ops_table);
  t.version = PB_OPS_TABLE_VERSION;
  t.status_create = status_create;
  t.status_code = status_code;
  t.status_message = status_message;
  t.status_free = status_free;
  t.retain = retain;
  t.release = release;
  t.ndim = ndim;
  t.shape = shape;
  t.strides = strides;
  t.numel = numel;
  t.dtype = dtype;
  t.device_type = device_type;
  t.device_index = device_index;
  t.is_contiguous = is_contiguous;
  t.data_ptr = data_ptr;
  t.copy_to_host = copy_to_host;
  t.copy_from_host = copy_from_host;
  t.empty = empty;
  t.full = full;
  t.from_data = from_data;
  t.arange = arange;
  t.generator_create = generator_create;
  t.generator_free = generator_free;
  t.randn = randn;
  t.uniform = uniform;
  t.set_requires_grad = set_requires_grad;
  t.requires_grad = requires_grad;
  t.grad = grad;
  t.zero_grad = zero_grad;
  t.backward = backward_fn;
  t.detach = detach;
  t.set_grad_enabled = set_grad_enabled;
  t.unary = unary;
  t.binary = binary;
  t.scalar = scalar;
  t.matmul = matmul_fn;
  t.layer_norm = layer_norm_fn;
  t.rms_norm = rms_norm_fn;
  t.reduce = reduce;
  t.reshape = reshape_fn;
  t.view = view_fn;
  t.permute = permute_fn;
  t.transpose = transpose_fn;
  t.slice = slice_fn;
  t.expand = expand_fn;
  t.contiguous = contiguous_fn;
  t.concat = concat_fn;
  t.stack = stack_fn;
  t.to_dtype = to_dtype_fn;
  t.masked_fill = masked_fill_fn;
  t.dropout = dropout_fn;
  t.attention = attention_fn;
  t.embedding = embedding_fn;
  t.cross_entropy = cross_entropy_fn;
  t.cumsum = cumsum_fn;
  t.gather = gather_fn;
  t.scatter_add = scatter_add_fn;
  t.sort = sort_fn;
  t.argsort = argsort_fn;
  t.topk = topk_fn;
  fill_custom_op_entries(t);
  t.memory_stats = memory_stats_fn;
  t.rotary_embedding = rotary_embedding_fn;
  t.attention_with_options = attention_with_options_fn;
  t.causal_linear_attention = causal_linear_attention_fn;
  fill_autocast_entries(t);
  t.bias_activation = bias_activation_fn;
  t.linear = linear_fn;
  t.tp_copy_to_region = tp_copy_to_region_fn;
  t.tp_reduce_from_region = tp_reduce_from_region_fn;
  fill_device_entries(t);
  fill_optimizer_entries(t);
  t.sorted_chunk_attention = sorted_chunk_attention_fn;
  return t;
}
}  // namespace

const pb_ops_table* host_ops_table() {
  static const pb_ops_table table = make_table();
  return &table;
}

void set_ops_status_functions(const StatusFunctions& functions) { g_status = functions; }

// Shared with ops_table_custom.cpp.
pb_tensor* ops_table_wrap(Tensor t) { return wrap(std::move(t)); }
pb_status* ops_table_status(pb_status_code code, const std::string& message) {
  return status_create(code, message.c_str());
}
std::string ops_table_status_text(pb_status* s) {
  std::string text = status_message(s);
  status_free(s);
  return text;
}

}  // namespace patchbay::engine

namespace patchbay::engine {
const Tensor& ops_table_tensor(const pb_tensor* t) { return t->tensor; }
}  // namespace patchbay::engine
