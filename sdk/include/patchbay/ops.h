/* Patchbay SDK: the tensor engine's operations, as a C function table (pb_host_api::ops).
 *
 * Handles. `pb_tensor*` is an opaque, reference-counted handle to an engine tensor (shape,
 * strides, dtype, device, autograd state). Every function that returns a tensor through an
 * `// out` parameter hands the caller ONE new reference, released with `release`. Tensors
 * passed as inputs are borrowed for the call (the engine takes its own references when it
 * needs to keep them, e.g. for autograd). `retain` adds a reference. NULL is never a valid
 * tensor unless a parameter says "nullable".
 *
 * Errors. Every function that can fail returns `pb_status*` (NULL on success) and leaves
 * its outputs untouched on failure. Statuses from this table are read and freed with this
 * table's status_* functions (the host wires them to pb_host_api's, so either works inside
 * a host).
 *
 * Semantics follow PyTorch: broadcasting from the trailing dim, negative dims count from
 * the end, views share storage, float ops accept f32/bf16/f16 and compute in f32 (matmul in
 * bf16 with f32 accumulation). Autograd: ops record a graph when grad mode is on (per
 * thread, see set_grad_enabled) and an input requires grad; `backward` accumulates into the
 * `grad` of leaves.
 *
 * Thread safety: all functions may be called from several threads; one tensor must not be
 * mutated (data, grad, requires_grad) from two threads at once.
 *
 * The contract every op states below (tests/engine/test_ops_contract.cpp checks it through
 * this table):
 *  - dtypes: "float" means f32, bf16 or f16; a float op refuses integer inputs with
 *    PB_STATUS_INVALID_ARGUMENT. Binary ops need both operands of ONE dtype (no promotion:
 *    convert with to_dtype first); the result has the input dtype. Integer tensors (i32, i64)
 *    are for ids, indices and masks.
 *  - broadcasting: PyTorch rules (align trailing dims; a dim of 1 stretches). Only binary
 *    ops, masked_fill's mask, matmul's batch dims and expand broadcast; anything else wants
 *    exact shapes.
 *  - aliasing: view, reshape (when the strides allow), permute, transpose, slice, expand,
 *    detach, contiguous of a contiguous tensor and to_dtype to the same dtype return tensors
 *    that SHARE storage with their input: a write through one (copy_from_host, data_ptr, an
 *    in-place optimizer update) is seen through the other. Every other op returns fresh
 *    storage. No op writes into its inputs.
 *  - special values: IEEE semantics unless an op says otherwise: NaN propagates, softmax of
 *    a row holding -inf gives those entries probability 0 (a row of all -inf is NaN), log(0)
 *    is -inf.
 *
 * Versioning: fields are only appended. Check `struct_size` with PB_HAS_FIELD before using a
 * field added after the version you need (PB_OPS_TABLE_VERSION records the latest).
 */
#ifndef PATCHBAY_OPS_H_
#define PATCHBAY_OPS_H_

#include "patchbay/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PB_OPS_TABLE_VERSION                                                            \
  14 /* 2: rotary_embedding; 3: attention_with_options; 4: block-sparse layout options; \
       5: causal_linear_attention; 6: matmul autocast (bf16 mixed precision);           \
       7: bias_activation; 8: matmul takes f32 with bf16 (no new field);                \
       9: tp_copy_to_region, tp_reduce_from_region (tensor parallelism);                \
       10: linear (fused linear layer);                                                 \
       11: to_device, from_data_on_device (device tensors);                             \
       12: optimizer_update (fused optimizer updates on any device);                    \
       13: pb_attention_options.segment_ids (packed sequences; no new function);        \
       14: sorted_chunk_attention (fused LSH attention) */

typedef struct pb_tensor pb_tensor; /* refcounted tensor handle */
typedef struct pb_generator
    pb_generator; /* seeded Philox random generator (owned by its creator) */
typedef struct pb_custom_op pb_custom_op;   /* registered custom op (refcounted) */
typedef struct pb_custom_ctx pb_custom_ctx; /* per-call context of a custom op (borrowed) */

typedef enum pb_dtype {
  PB_DTYPE_F32 = 0,
  PB_DTYPE_BF16 = 1, /* stored as uint16_t, upper half of an IEEE f32 */
  PB_DTYPE_F16 = 2,  /* IEEE binary16 stored as uint16_t */
  PB_DTYPE_I32 = 3,
  PB_DTYPE_I64 = 4
} pb_dtype;

typedef enum pb_device_type { PB_DEVICE_CPU = 0, PB_DEVICE_CUDA = 1 } pb_device_type;

typedef enum pb_unary_op {
  PB_UNARY_NEG = 0,
  PB_UNARY_ABS = 1,
  PB_UNARY_EXP = 2,
  PB_UNARY_LOG = 3,
  PB_UNARY_SQRT = 4,
  PB_UNARY_RSQRT = 5,
  PB_UNARY_TANH = 6,
  PB_UNARY_SIGMOID = 7,
  PB_UNARY_RELU = 8,
  PB_UNARY_GELU_TANH = 9,   /* 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))) */
  PB_UNARY_GELU_ERF = 10,   /* 0.5x(1+erf(x/sqrt 2)) */
  PB_UNARY_SILU = 11,       /* x*sigmoid(x) */
  PB_UNARY_SOFTMAX = 12,    /* over the last dim */
  PB_UNARY_LOG_SOFTMAX = 13 /* over the last dim */
} pb_unary_op;

typedef enum pb_binary_op {
  PB_BINARY_ADD = 0,
  PB_BINARY_SUB = 1,
  PB_BINARY_MUL = 2,
  PB_BINARY_DIV = 3
} pb_binary_op;

typedef enum pb_scalar_op {
  PB_SCALAR_ADD = 0, /* x + s */
  PB_SCALAR_MUL = 1, /* x * s */
  PB_SCALAR_POW = 2  /* x ^ s */
} pb_scalar_op;

typedef enum pb_reduce_op { PB_REDUCE_SUM = 0, PB_REDUCE_MEAN = 1, PB_REDUCE_MAX = 2 } pb_reduce_op;

typedef enum pb_loss_reduction {
  PB_LOSS_MEAN = 0,
  PB_LOSS_SUM = 1,
  PB_LOSS_NONE = 2
} pb_loss_reduction;

/* The update rules of optimizer_update (ops table version 12). */
typedef enum pb_optimizer_rule {
  PB_OPTIMIZER_ADAMW = 0, /* state0 = exp_avg, state1 = exp_avg_sq (no amsgrad) */
  PB_OPTIMIZER_SGD = 1,   /* state0 = momentum buffer (NULL when momentum = 0), state1 NULL */
  PB_OPTIMIZER_LION = 2   /* state0 = exp_avg, state1 NULL */
} pb_optimizer_rule;

/* One update's hyperparameters (ops table version 12). Zero-initialise, set struct_size =
 * sizeof; fields are only appended. Scalars are combined in double and rounded once to f32, as
 * the built-in optimizer plugins (and torch with Python-float scalars) do. */
typedef struct pb_optimizer_update {
  uint32_t struct_size;
  pb_optimizer_rule rule;
  int64_t step;                /* 1-based number of this update (AdamW's bias corrections;
                                  SGD: the momentum buffer starts as the update at step 1) */
  double lr;                   /* learning rate of this step */
  double beta1, beta2;         /* AdamW, Lion */
  double eps;                  /* AdamW */
  double weight_decay;         /* AdamW, Lion: decoupled; SGD: added to the gradient */
  double momentum, dampening;  /* SGD */
  int32_t nesterov;            /* SGD: nonzero for Nesterov momentum */
  float grad_scale;            /* each gradient element is multiplied by this first (1: none) */
} pb_optimizer_update;

/* Options of attention_with_options (ops table version 3). Zero-initialise, set struct_size =
 * sizeof. Fields are only appended; the engine reads a field only when struct_size covers it,
 * so zero-initialised fields it does not know and fields the caller's older struct lacks both
 * mean "off". Positions are absolute: query i of Tq sits at p = Tk - Tq + i (the queries are
 * the last Tq of the Tk positions, as when decoding after a KV cache); key j sits at j. */
typedef struct pb_attention_options {
  size_t struct_size;
  int32_t causal;                 /* 1: causal, bottom-right aligned (query i of Tq sits at absolute position Tk - Tq + i) */
  double scale;                   /* <= 0 means 1/sqrt(D) */
  int64_t window;                 /* > 0: a query at absolute position p sees only keys at positions j with p - window < j (<= p when causal); work O(T * window), never T x T; 0 = unlimited */
  const pb_tensor* alibi_slopes;  /* nullable; f32 [H]: adds -slope_h * (p - j) to the score of query position p and key position j (Press et al. 2022) */
  /* ---- version 4 (block-sparse attention) ---- */
  /* Nullable int32 [H, ceil(Tk/bs), ceil(Tk/bs)], 0/1: tile (query block of the ABSOLUTE query
   * position p = i + Tk - Tq, key block) is computed only where 1; needs Tq <= Tk. Causal and
   * window still apply inside active tiles (within-block causality). Work and memory are
   * proportional to the active tiles; the backward is the kernel's own (no Tq x Tk anywhere).
   * Not combined with alibi_slopes (INVALID_ARGUMENT). */
  const pb_tensor* block_layout;
  int64_t block_size; /* bs >= 1 when block_layout is set */
  /* ---- version 13 (packed sequences) ---- */
  /* Nullable integer [B, Tk] (i32 or i64, on the CPU or q's device): the segment of every key
   * position of each batch row, NON-DECREASING along the row (several examples or documents
   * laid end to end, each one contiguous run). Query i (absolute position p = i + Tk - Tq)
   * sees key j only when segment[b][j] == segment[b][p], on top of causal, window and ALiBi,
   * so each segment's rows equal attention over that segment alone (positions relative to
   * the segment are the caller's business, e.g. rotary at per-segment positions). Key tiles
   * outside a query tile's segments are skipped. Needs Tq <= Tk; not with block_layout; CPU
   * tensors only for now (a device call is INVALID_ARGUMENT). Under bf16 autocast the op
   * stays f32 when segments are given. */
  const pb_tensor* segment_ids;
} pb_attention_options;

/* Options of sorted_chunk_attention (version 14). Zero-initialise and set struct_size =
 * sizeof; fields are only appended. */
typedef struct pb_sorted_chunk_options {
  size_t struct_size;
  int64_t chunk_len; /* c >= 1: slots per chunk; S must be a multiple of it */
  double scale;      /* multiplies q . k (Reformer: 1, keys unit-normalised by the caller) */
  double self_bias;  /* added to the score of a position with itself (Reformer: -1e5) */
  int32_t causal;    /* 1: a key at a position after the query's is hidden */
  int32_t dedup;     /* 1: subtract log(rounds whose window holds the pair) */
} pb_sorted_chunk_options;
/* More on the options:
 *  - window, not causal: the window is two-sided, p - window < j < p + window (|p - j| <
 *    window), so the work stays O(T * window). Causal: the query sees itself and the
 *    window - 1 keys before it. window < 0 is PB_STATUS_INVALID_ARGUMENT.
 *  - alibi_slopes: one slope per QUERY head h (also with grouped kv heads). The bias is
 *    -slope_h * |p - j|; under causal p >= j, so it is -slope_h * (p - j) exactly (Press et
 *    al.); when not causal the distance is symmetric (FlashAttention's ALiBi convention).
 *    Slopes get no gradient (they are constants, as in the paper). Any float dtype, read
 *    once per call; a non-finite slope or a shape other than [H] is INVALID_ARGUMENT.
 *  - A query row with no visible key (possible only when Tq > Tk under causal) gives 0. */

/* A custom op: a forward and a backward written by the plugin (e.g. a fused kernel). The
 * engine calls forward with grad recording off; when an input requires grad it records a
 * node whose backward calls `backward`. */
typedef struct pb_custom_op_desc {
  size_t struct_size;
  const char* name;   /* borrowed; copied at creation. For messages and graph dumps. */
  size_t num_outputs; /* >= 1 */
  void* user_data;    /* passed to every callback; released by `destroy` */
  /* inputs: borrowed, num_inputs (entries may be NULL when the caller passed NULL).
   * outputs: write num_outputs NEW references (the engine takes them). May call
   * ctx_save_for_backward. Return NULL or a status made with status_create. */
  pb_status* (*forward)(void* user_data, pb_custom_ctx* ctx, pb_tensor* const* inputs,
                        size_t num_inputs, pb_tensor** outputs /* out */, size_t num_outputs);
  /* grad_outputs: borrowed, num_outputs, never NULL (zeros for unused outputs).
   * grad_inputs: pre-set to NULL; write a NEW reference with the input's shape for each
   * input that needs a gradient (ctx_needs_input_grad), or leave NULL. */
  pb_status* (*backward)(void* user_data, pb_custom_ctx* ctx, pb_tensor* const* grad_outputs,
                         size_t num_outputs, pb_tensor** grad_inputs /* out */, size_t num_inputs);
  /* Called once when the last reference to the op goes away; may be NULL. */
  void (*destroy)(void* user_data);
} pb_custom_op_desc;


typedef struct pb_ops_table {
  size_t struct_size;
  uint32_t version; /* PB_OPS_TABLE_VERSION of the engine */

  /* ---- statuses returned by this table ---- */
  pb_status* (*status_create)(pb_status_code code, const char* message);
  pb_status_code (*status_code)(const pb_status* status);
  const char* (*status_message)(const pb_status* status); /* owned by the status */
  void (*status_free)(pb_status* status);                 /* NULL allowed */

  /* ---- lifetime ---- */
  void (*retain)(pb_tensor* t);
  void (*release)(pb_tensor* t); /* NULL allowed */

  /* ---- queries (never fail; t must be valid) ---- */
  size_t (*ndim)(const pb_tensor* t);
  /* Borrowed arrays of ndim entries, valid while t lives (metadata never changes). */
  const int64_t* (*shape)(const pb_tensor* t);
  const int64_t* (*strides)(const pb_tensor* t); /* in elements */
  int64_t (*numel)(const pb_tensor* t);
  pb_dtype (*dtype)(const pb_tensor* t);
  pb_device_type (*device_type)(const pb_tensor* t);
  int32_t (*device_index)(const pb_tensor* t);
  int (*is_contiguous)(const pb_tensor* t);

  /* ---- data access (CPU tensors; copy_to_host / copy_from_host any device from version 11) ---- */
  /* Pointer to element 0 of the view (index with strides); valid while t lives. CPU only. */
  pb_status* (*data_ptr)(pb_tensor* t, void** out);
  /* Copies all elements in row-major order into dst (dst_bytes >= numel * element size).
   * From a device tensor (version 11) it waits for the device: call it where a value is read. */
  pb_status* (*copy_to_host)(const pb_tensor* t, void* dst, size_t dst_bytes);
  /* Copies src (contiguous) into t's elements (row-major); src_bytes == numel * size. Into a
   * device tensor (version 11) src may be reused when the call returns. */
  pb_status* (*copy_from_host)(pb_tensor* t, const void* src, size_t src_bytes);

  /* ---- creation ---- */
  pb_status* (*empty)(const int64_t* shape, size_t ndim, pb_dtype dtype, pb_device_type device_type,
                      int32_t device_index, pb_tensor** out);
  pb_status* (*full)(const int64_t* shape, size_t ndim, double value, pb_dtype dtype,
                     pb_device_type device_type, int32_t device_index, pb_tensor** out);
  /* CPU tensor with a copy of `data` (numel elements of dtype, row-major). */
  pb_status* (*from_data)(const void* data, const int64_t* shape, size_t ndim, pb_dtype dtype,
                          pb_tensor** out);
  pb_status* (*arange)(double start, double end, double step, pb_dtype dtype, pb_tensor** out);
  pb_status* (*generator_create)(uint64_t seed, pb_generator** out);
  void (*generator_free)(pb_generator* gen); /* NULL allowed */
  pb_status* (*randn)(pb_generator* gen, const int64_t* shape, size_t ndim, pb_dtype dtype,
                      pb_tensor** out);
  pb_status* (*uniform)(pb_generator* gen, const int64_t* shape, size_t ndim, double low,
                        double high, pb_dtype dtype, pb_tensor** out);

  /* ---- autograd ---- */
  pb_status* (*set_requires_grad)(pb_tensor* t, int requires_grad); /* leaves only */
  int (*requires_grad)(const pb_tensor* t);
  /* *out = accumulated gradient (new reference) or NULL when none yet. */
  pb_status* (*grad)(const pb_tensor* t, pb_tensor** out);
  void (*zero_grad)(pb_tensor* t);
  /* seed: nullable (then loss must have one element and the seed is 1). */
  pb_status* (*backward)(pb_tensor* loss, pb_tensor* seed);
  pb_status* (*detach)(const pb_tensor* t, pb_tensor** out);
  /* Sets this thread's grad mode; returns the previous one (1 = on). */
  int (*set_grad_enabled)(int enabled);

  /* ---- element-wise and activations ---- */
  /* x float, any shape; out: x's shape and dtype, fresh. Softmax/log_softmax over the last dim. */
  pb_status* (*unary)(pb_unary_op op, const pb_tensor* x, pb_tensor** out);
  /* a, b float of one dtype and device; shapes broadcast; out: the broadcast shape, a's dtype. */
  pb_status* (*binary)(pb_binary_op op, const pb_tensor* a, const pb_tensor* b, pb_tensor** out);
  /* x float; s applied to every element; out: x's shape and dtype. */
  pb_status* (*scalar)(pb_scalar_op op, const pb_tensor* x, double s, pb_tensor** out);

  /* ---- linear algebra, normalisation ---- */
  /* a [..., M, K] (stored [..., K, M] when transpose_a), b [..., K, N] (or [..., N, K]);
   * float, one dtype; the batch dims "..." broadcast (b may be 2-D: one matrix for every
   * batch); out [..., M, N] in the inputs' dtype, fresh. Since version 8 one operand may be
   * f32 and the other bf16 (decoding with bf16 weights): out is f32, the exact f32 product
   * of the same values with f32 accumulation. */
  pb_status* (*matmul)(const pb_tensor* a, const pb_tensor* b, int transpose_a, int transpose_b,
                       pb_tensor** out);
  /* x [..., C] float, gain [C] and bias [C] (nullable) of x's dtype; normalises over the
   * last dim; out: x's shape, fresh. eps > 0 is added to the variance (to the mean square for
   * rms_norm). */
  pb_status* (*layer_norm)(const pb_tensor* x, const pb_tensor* gain, const pb_tensor* bias,
                           double eps, pb_tensor** out);
  pb_status* (*rms_norm)(const pb_tensor* x, const pb_tensor* gain, double eps, pb_tensor** out);

  /* ---- reductions: dims may be NULL with num_dims 0 (= all dims) ----
   * x float; negative dims count from the end; out drops the reduced dims (keeps them as 1
   * with keepdim); a reduction over all dims without keepdim is a 0-dim tensor. MAX's
   * gradient goes to the first maximal element. */
  pb_status* (*reduce)(pb_reduce_op op, const pb_tensor* x, const int64_t* dims, size_t num_dims,
                       int keepdim, pb_tensor** out);

  /* ---- shape ops ----
   * Any dtype. view, permute, transpose, slice and expand always alias x (see the aliasing
   * rule); reshape aliases when x's strides allow, else copies; contiguous copies only when x
   * is not contiguous; concat and stack copy (all inputs one dtype, equal shapes except
   * concat's dim). slice clamps start/end to [0, size] after adding size to negatives; step
   * > 0. expand stretches dims of size 1 only (no copy; do not write through it). */
  pb_status* (*reshape)(const pb_tensor* x, const int64_t* shape, size_t ndim,
                        pb_tensor** out); /* -1 infers */
  pb_status* (*view)(const pb_tensor* x, const int64_t* shape, size_t ndim,
                     pb_tensor** out); /* no copy */
  pb_status* (*permute)(const pb_tensor* x, const int64_t* dims, size_t ndim, pb_tensor** out);
  pb_status* (*transpose)(const pb_tensor* x, int64_t dim0, int64_t dim1, pb_tensor** out);
  pb_status* (*slice)(const pb_tensor* x, int64_t dim, int64_t start, int64_t end, int64_t step,
                      pb_tensor** out);
  pb_status* (*expand)(const pb_tensor* x, const int64_t* shape, size_t ndim, pb_tensor** out);
  pb_status* (*contiguous)(const pb_tensor* x, pb_tensor** out);
  pb_status* (*concat)(const pb_tensor* const* xs, size_t count, int64_t dim, pb_tensor** out);
  pb_status* (*stack)(const pb_tensor* const* xs, size_t count, int64_t dim, pb_tensor** out);
  /* Same dtype: x itself (aliases). Otherwise a fresh copy, by one rule per dtype pair (copies
   * and contiguous() too): integers exact, i64 -> i32 keeps the low 32 bits; int -> float and
   * float narrowing round once to nearest, ties to even (never through double: i64 above 2^53
   * converts exactly when it fits); float -> int truncates toward zero, NaN gives 0, values
   * beyond the integer's range saturate. Gradient flows between floats. */
  pb_status* (*to_dtype)(const pb_tensor* x, pb_dtype dtype, pb_tensor** out);

  /* ---- masking, regularisation, attention ---- */
  /* out = mask != 0 ? value : x, element by element. x float; mask of ANY dtype (i32, i64
   * or a float: there is no bool dtype — non-zero means "fill", and a NaN mask element counts
   * as non-zero) on x's device; mask broadcasts to x's shape but must not grow it (a mask
   * larger than x is refused). value may be any double, -inf and +inf included (-inf before
   * softmax is the usual attention mask); it is rounded to x's dtype. out: x's shape and
   * dtype, fresh (x is not written). Gradient: the incoming gradient where mask == 0, zero
   * where it fills; the mask gets none. */
  pb_status* (*masked_fill)(const pb_tensor* x, const pb_tensor* mask, double value,
                            pb_tensor** out);
  /* x float; p in [0, 1). training == 0 or p == 0: out is x itself (aliases). Otherwise each
   * element is kept with probability 1 - p (a draw from gen) and scaled by 1 / (1 - p). */
  pb_status* (*dropout)(const pb_tensor* x, double p, pb_generator* gen, int training,
                        pb_tensor** out);
  /* q [B,H,Tq,D], k/v [B,Hkv,Tk,D]; scale <= 0 means 1/sqrt(D); causal is bottom-right aligned.
   * Query and key-value heads (this op and attention_with_options): H must be a multiple of
   * Hkv (else PB_STATUS_INVALID_ARGUMENT); query head h attends with key-value head
   * h / (H / Hkv), so consecutive groups of H / Hkv query heads share one: Hkv == H is
   * multi-head, 1 < Hkv < H grouped-query, Hkv == 1 multi-query attention. */
  pb_status* (*attention)(const pb_tensor* q, const pb_tensor* k, const pb_tensor* v, int causal,
                          double scale, pb_tensor** out);

  /* ---- indexing ---- */
  pb_status* (*embedding)(const pb_tensor* weights, const pb_tensor* ids, pb_tensor** out);
  /* logits [N, V] (or [..., V]), targets integer [N] (or [...]). */
  pb_status* (*cross_entropy)(const pb_tensor* logits, const pb_tensor* targets,
                              int64_t ignore_index, double label_smoothing,
                              pb_loss_reduction reduction, pb_tensor** out);
  pb_status* (*cumsum)(const pb_tensor* x, int64_t dim, int reverse, pb_tensor** out);
  pb_status* (*gather)(const pb_tensor* x, int64_t dim, const pb_tensor* index, pb_tensor** out);
  pb_status* (*scatter_add)(const pb_tensor* x, int64_t dim, const pb_tensor* index,
                            const pb_tensor* src, pb_tensor** out);
  pb_status* (*sort)(const pb_tensor* x, int64_t dim, int descending, pb_tensor** values /* out */,
                     pb_tensor** indices /* out */);
  pb_status* (*argsort)(const pb_tensor* x, int64_t dim, int descending, pb_tensor** out);
  pb_status* (*topk)(const pb_tensor* x, int64_t k, int64_t dim, int largest,
                     pb_tensor** values /* out */, pb_tensor** indices /* out */);

  /* ---- custom ops ---- */
  /* desc is borrowed (copied). *out holds one reference; release with custom_op_release. */
  pb_status* (*custom_op_create)(const pb_custom_op_desc* desc, pb_custom_op** out);
  void (*custom_op_release)(pb_custom_op* op); /* NULL allowed */
  /* outputs: num_outputs new references. */
  pb_status* (*custom_op_apply)(pb_custom_op* op, pb_tensor* const* inputs, size_t num_inputs,
                                pb_tensor** outputs /* out */, size_t num_outputs);
  /* Inside forward: keeps tensors (borrowed here) for backward. Replaces earlier saves. */
  pb_status* (*ctx_save_for_backward)(pb_custom_ctx* ctx, pb_tensor* const* tensors, size_t count);
  size_t (*ctx_num_saved)(const pb_custom_ctx* ctx);
  /* Borrowed; valid for the duration of the backward callback. */
  pb_tensor* (*ctx_saved)(const pb_custom_ctx* ctx, size_t index);
  int (*ctx_needs_input_grad)(const pb_custom_ctx* ctx, size_t input_index);

  /* ---- memory ---- */
  pb_status* (*memory_stats)(pb_device_type device_type, int32_t device_index,
                             size_t* current_bytes /* out */, size_t* peak_bytes /* out */);

  /* ---- version 2 ---- */
  /* Rotary position embedding, GPT-NeoX / LLaMA "rotate half" convention: x [..., T, D], D
   * even, halves x1 = x[..., :D/2], x2 = x[..., D/2:]; with p = position_offset + t and
   * a = p * theta^(-2i/D): out[i] = x1[i] cos a - x2[i] sin a, out[i + D/2] = x2[i] cos a +
   * x1[i] sin a. position_offset >= 0 (positions already in a KV cache); theta > 0. */
  pb_status* (*rotary_embedding)(const pb_tensor* x, int64_t position_offset, double theta,
                                 pb_tensor** out);

  /* ---- version 3 (attention options: sliding window, ALiBi) ---- */
  /* The fused attention of `attention` with pb_attention_options (documented above): q
   * [B,H,Tq,D], k/v [B,Hkv,Tk,D] with H a multiple of Hkv (grouped-query attention); out
   * [B,H,Tq,D] in q's dtype. options == NULL means causal 0, scale 1/sqrt(D), no window,
   * no ALiBi. Never materialises Tq x Tk: flash tiling with an online softmax, and with a
   * window the key tiles outside it are skipped (forward and backward). q, k, v may be views
   * (e.g. k = a [B,Hkv,capacity,D] KV-cache buffer sliced to [:, :, :len]): f32 views whose
   * last dim is contiguous are read in place, without a copy; others are packed first.
   * Differentiable in q, k and v. `attention(q, k, v, causal, scale)` is this op with
   * {causal, scale} and no window or ALiBi. Version 4: with options->block_layout set
   * (struct_size covering it), only the layout's tiles are computed (block-sparse kernel). */
  pb_status* (*attention_with_options)(const pb_tensor* q, const pb_tensor* k, const pb_tensor* v,
                                       const pb_attention_options* options, pb_tensor** out);

  /* ---- version 5 (causal linear attention) ---- */
  /* Numerator of causal linear attention (Katharopoulos et al. 2020) as one fused prefix sum:
   * q, k [..., T, E] (one shape), v [..., T, M] (same leading dims, same float dtype) ->
   * out [..., T, M], out[l] = sum_{j <= l} (q[l] . k[j]) v[j]; feature map and normaliser are
   * the caller's. fp32 sums whatever the dtype (bf16 operands under bf16 autocast on the CPU);
   * time O(T E M), memory O(T (E + M)); differentiable (the backward re-sweeps, no states). */
  pb_status* (*causal_linear_attention)(const pb_tensor* q, const pb_tensor* k,
                                        const pb_tensor* v, pb_tensor** out);

  /* ---- version 6 (bf16 mixed precision: matmul autocast) ---- */
  /* Sets this thread's matmul compute dtype: PB_DTYPE_F32 (off, the default) or PB_DTYPE_BF16.
   * Under bf16 every matmul of two f32 operands rounds them to bf16, runs a bf16 GEMM with
   * f32 accumulation and returns f32; its backward does the same and returns f32 gradients.
   * Other ops compute in f32 unless their entry says otherwise. The bf16 copy of a leaf that
   * requires grad (a parameter) is cached until the policy changes or autocast_clear_cache:
   * call that after writing parameters in place while bf16 is on. The trainer sets this for
   * `[train] precision = "bf16"`; a plugin only needs it to test itself under that policy.
   * previous: nullable, receives the old dtype. Other dtypes: PB_STATUS_INVALID_ARGUMENT. */
  pb_status* (*set_autocast_dtype)(pb_dtype dtype, pb_dtype* previous);
  /* This thread's matmul compute dtype (PB_DTYPE_F32 when autocast is off). */
  pb_dtype (*autocast_dtype)(void);
  /* Drops this thread's cached bf16 parameter copies. */
  void (*autocast_clear_cache)(void);

  /* ---- version 7 (fused elementwise chains for small-model speed) ---- */
  /* out = act(x + bias): x [..., N] float, bias [N] (x's dtype and device), activation
   * PB_UNARY_GELU_TANH or PB_UNARY_RELU (others: PB_STATUS_INVALID_ARGUMENT). One pass
   * forward, one pass backward that also sums bias's gradient (the composed add + activation
   * take two each way). Equal to unary(activation, binary(ADD, x, bias)) up to rounding (the
   * GELU's tanh is a vectorised approximation, |relative error| < 3e-7). Differentiable in x
   * and bias. */
  pb_status* (*bias_activation)(const pb_tensor* x, const pb_tensor* bias,
                                pb_unary_op activation, pb_tensor** out);

  /* ---- version 8 (decoding: matmul accepts f32 with bf16, see matmul; no new field) ---- */

  /* ---- version 9 (tensor parallelism: Megatron's conjugate pair f / g) ---- */
  /* The collectives of a layer split over the host's tensor-parallel group (the W ranks of
   * pb_layer_context::tp_size; the host installs the group for `[parallelism] kind =
   * "mpi_tensor"`, over the parallelism plugin's all-reduce). Every rank of the group must
   * make the same calls in the same order, forward and backward. Without a group (one
   * process) both are the identity. x float, any shape; out: x's shape and dtype.
   * tp_copy_to_region (f): out = x (aliases x); backward: the gradient SUMMED over the group.
   *   Put it before a column-parallel projection: each rank's input gradient is partial.
   * tp_reduce_from_region (g): out = the SUM of x over the group (fresh); backward: the
   *   gradient unchanged. Put it after a row-parallel projection, before adding its bias. */
  pb_status* (*tp_copy_to_region)(const pb_tensor* x, pb_tensor** out);
  pb_status* (*tp_reduce_from_region)(const pb_tensor* x, pb_tensor** out);

  /* ---- version 10 (fused linear layer: a decoding step's one pass per weight) ---- */
  /* out = act(x · weightᵀ + bias): x [..., K] float, weight [N, K] (x's dtype, or bf16 with
   * f32 x as matmul allows), bias [N] or NULL (none), activation NULL (none),
   * PB_UNARY_GELU_TANH or PB_UNARY_RELU (others: PB_STATUS_INVALID_ARGUMENT); out [..., N].
   * Equal to matmul(x, weight, 0, 1) followed by bias_activation (or binary(ADD) with bias,
   * or unary without) up to rounding, and differentiable in x, weight and bias the same way.
   * Where nothing needs a gradient and x has at most 4 rows of f32 (batch-1 or beam
   * decoding), the host adds the bias and applies the activation while each output is
   * written, in the pass that streams the weight; elsewhere it runs those same ops. */
  pb_status* (*linear)(const pb_tensor* x, const pb_tensor* weight, const pb_tensor* bias,
                       const pb_unary_op* activation, pb_tensor** out);

  /* ---- version 11 (device tensors: creation on a device, copies to and from the host) ---- */
  /* Layers create their parameters on pb_layer_context's device: randn / uniform on the CPU
   * (the same values on every device), then to_device. Ops run on the device of their
   * operands (all on one device); an op the device has no kernel for fails naming the op and
   * the device. A device the host cannot use (a build without CUDA, no GPU) fails with
   * PB_STATUS_INVALID_ARGUMENT saying why.
   * to_device: out = a copy of t on (device_type, device_index): contiguous, t's shape and
   *   dtype, bit-exact (a new reference to t itself when it is already there).
   *   Differentiable for float t: the gradient travels back to t's device. Host -> device
   *   copies are queued without waiting for the device; device -> host ones return with the
   *   data in place (they wait for the device). */
  pb_status* (*to_device)(const pb_tensor* t, pb_device_type device_type, int32_t device_index,
                          pb_tensor** out);
  /* from_data on a device: a tensor on (device_type, device_index) holding a copy of the
   * host memory `data` (numel elements of dtype, row-major); data may be reused on return. */
  pb_status* (*from_data_on_device)(const void* data, const int64_t* shape, size_t ndim,
                                    pb_dtype dtype, pb_device_type device_type,
                                    int32_t device_index, pb_tensor** out);

  /* ---- version 12 (optimizer updates on any device) ---- */
  /* One fused update of `param` in place, on param's device (a GPU's kernel there, the host's
   * loop on the CPU): param, grad and the rule's state tensors (pb_optimizer_rule says which)
   * contiguous f32 of param's shape on param's device; bf16_copy NULL, or a bf16 tensor of that
   * shape that receives the new values rounded to nearest even (a mixed-precision working
   * copy). Per element, with g = grad * grad_scale and the f32 scalars of `update`:
   *   AdamW: p = p(1 - lr wd); m += (1-b1)(g - m); v = b2 v + (1-b2) g^2;
   *          p -= lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps)
   *   SGD:   d = g + wd p; buf = t == 1 ? d : mu buf + (1-dampening) d (when mu != 0);
   *          d = nesterov ? d + mu buf : buf; p -= lr d
   *   Lion:  c = b1 m + (1-b1) g; p = p(1 - lr wd) - lr sign(c); m = b2 m + (1-b2) g
   * Not recorded by autograd. Refused (PB_STATUS_INVALID_ARGUMENT, naming the tensor) when a
   * tensor is missing, on another device, of another dtype or shape, or not contiguous. */
  pb_status* (*optimizer_update)(const pb_optimizer_update* update, pb_tensor* param,
                                 const pb_tensor* grad, pb_tensor* state0, pb_tensor* state1,
                                 pb_tensor* bf16_copy);

  /* ---- version 14 (sorted-chunk attention: Reformer LSH attention fused) ---- */
  /* q, k, v [..., T, D] (one shape, one float dtype), positions in order; slot_position,
   * slot_group int32 [..., S] (same leading dims, S a multiple of chunk_len): the position each
   * sorted slot reads (-1: padding) and its group (>= 0 on real slots; LSH: round * n_buckets
   * + bucket). Every position occurs equally often in a row (once per round; its r-th
   * occurrence belongs to round r). The queries of chunk n (slots [n c, n c + c)) see the keys
   * of chunk n and, when that chunk's first slot has the same group, of chunk n - 1, keeping a
   * pair when the groups match and (causal) the key's position <= the query's. Score: scale *
   * q_i . k_j, + self_bias when j == i, else - log(count(i, j)) with dedup (count: the rounds
   * whose r-th occurrences of i and j share a group with j's chunk i's own or the one before).
   * A softmax per query slot; the occurrences of a position combine by their log-sum-exp
   * (one softmax over the union of the rounds' windows). out [..., T, D] in q's dtype; a
   * position with no occurrence gets 0. fp32 sums (bf16 operands q, k, v, dout, P, dS under bf16
   * autocast on the CPU); gathers fused into the tile loads: memory O(T (D + rounds)).
   * Differentiable in q, k and v (the backward recomputes the chunk scores). A bad plan
   * (position out of range, unequal occurrences) is PB_STATUS_INVALID_ARGUMENT saying so. */
  pb_status* (*sorted_chunk_attention)(const pb_tensor* q, const pb_tensor* k, const pb_tensor* v,
                                       const pb_tensor* slot_position, const pb_tensor* slot_group,
                                       const pb_sorted_chunk_options* options, pb_tensor** out);
} pb_ops_table;

#ifdef __cplusplus
}
#endif

#endif /* PATCHBAY_OPS_H_ */
