/* Patchbay SDK: the attention interface (PB_KIND_ATTENTION).
 *
 * An attention layer maps x [B, T, C] to y [B, T, C] (C = d_model; the output projection is
 * part of the layer). It declares what it can do in the vtable's static fields, so the host
 * can refuse a combination before building anything: a layer without PB_ATTENTION_CAP_CAUSAL
 * (plain Linformer, for instance) is refused for a causal language model with a message that
 * names the layer and says why.
 *
 * Cross-attention (interface 1.3, PB_ATTENTION_CAP_CROSS): queries from x, keys and values
 * from another sequence (an encoder's output) with a key padding mask; see forward_cross.
 *
 * Packed sequences (interface 1.4, PB_ATTENTION_CAP_PACKED): forward_packed runs rows holding
 * several examples with segment ids, no attention across segments, positions per segment.
 *
 * Two ways to run:
 *  - forward(): the whole sequence at once (training, evaluation, prompt processing). The
 *    layer composes ops from the host ops table (or its own custom ops), so autograd gives
 *    the backward pass.
 *  - decoding: state_create() makes a decoding state (a KV cache for cache_kind KV, a
 *    recurrent state for RECURRENT); forward_step() takes the next Tn tokens x [B, Tn, C]
 *    whose absolute positions continue after the tokens already in the state, returns their
 *    outputs and appends them to the state. Run without gradients. The outputs equal those of
 *    forward() on the whole sequence (up to floating-point rounding).
 *
 * Tensors: arguments are borrowed; a tensor stored in an out parameter is a new reference the
 * caller releases (ops->release). Errors: pb_status* from the host's status_create.
 * Thread safety: one object is used by one thread at a time.
 */
#ifndef PATCHBAY_ATTENTION_H_
#define PATCHBAY_ATTENTION_H_

#include "patchbay/model_layer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PB_ATTENTION_INTERFACE_MAJOR 1
#define PB_ATTENTION_INTERFACE_MINOR                                                       \
  6 /* 1.1: state_reorder; 1.2: tensor parallelism; 1.3: cross-attention; 1.4: state_fork; \
       1.5: packed sequences; 1.6: PB_ATTENTION_CAP_CROSS_POSITIONAL */

#define PB_ATTENTION_CAP_CAUSAL (1u << 0)    /* can run with a causal mask */
#define PB_ATTENTION_CAP_NONCAUSAL (1u << 1) /* can run bidirectionally */
#define PB_ATTENTION_CAP_ROTARY (1u << 2)    /* applies rotary positions when asked */
#define PB_ATTENTION_CAP_ALIBI (1u << 3)     /* applies ALiBi when asked */
/* 1.2: splits its heads over pb_layer_context::tp_size ranks (Megatron-style tensor
 * parallelism). The host refuses `[parallelism] kind = "mpi_tensor"` for a layer without it. */
#define PB_ATTENTION_CAP_TENSOR_PARALLEL (1u << 4)
/* 1.3: serves as cross-attention (encoder-decoder): queries from one sequence, keys and values
 * from another, with a key padding mask (cross_memory_create / forward_cross below). A layer
 * declares it exactly when those three functions are non-NULL; the host refuses an
 * encoder-decoder whose cross-attention kind lacks it, naming the kind. */
#define PB_ATTENTION_CAP_CROSS (1u << 5)
/* 1.4: honours packed sequences (forward_packed below): several examples per row with no
 * attention across their boundaries and positions restarting at each. A layer declares it
 * exactly when forward_packed is non-NULL; the host refuses a packed run (e.g. `[data]
 * pack_documents = true`) whose model has a layer without it, naming the kind. */
#define PB_ATTENTION_CAP_PACKED (1u << 6)
/* 1.6: with PB_ATTENTION_CAP_CROSS, the cross-attention weighs keys by their position in the
 * memory (Linformer's sequence projections E, F over key positions 0..Tk-1), so it is NOT
 * invariant to the order of the keys, and a padded key is not removed but neutralised in
 * place (Linformer: its key and value rows are zeroed before the projections, as the
 * shorter-than-n positions are). Every other promise of cross-attention holds: padded keys
 * change no output (bit for bit), queries and sequences are independent, one memory serves
 * many calls. The conformance kit then checks each query against the same memory and mask
 * instead of against the attended keys alone and in reverse order. The host passes such a
 * layer (every cross-attention layer) max_seq_len >= the longest memory it will be given
 * (an encoder-decoder: max(context_length, source_context_length)). No new function. */
#define PB_ATTENTION_CAP_CROSS_POSITIONAL (1u << 7)

typedef enum pb_attention_cache_kind {
  PB_ATTENTION_CACHE_NONE = 0,     /* no incremental decoding: forward_step is NULL */
  PB_ATTENTION_CACHE_KV = 1,       /* keys and values of past tokens, grows with length */
  PB_ATTENTION_CACHE_RECURRENT = 2 /* fixed-size state (linear attention) */
} pb_attention_cache_kind;

typedef struct pb_attention_vtable {
  size_t struct_size;
  uint64_t capabilities; /* PB_ATTENTION_CAP_* */
  pb_attention_cache_kind cache_kind;
  const char* complexity; /* static, for people: "time O(T^2 d), memory O(T d)" */

  /* Allocates and initialises the parameters for `ctx` (borrowed). Called once, right after
   * create(). A context the layer cannot serve (n_heads not dividing d_model, causal without
   * CAP_CAUSAL, rotary without CAP_ROTARY) is PB_STATUS_INVALID_ARGUMENT with a message. */
  pb_status* (*init)(void* self, const pb_layer_context* ctx);

  /* Parameters, index in [0, parameter_count). *out_name is static or owned by the layer
   * ("qkv.weight"); *out_tensor is BORROWED (owned by the layer, alive as long as it). */
  size_t (*parameter_count)(const void* self);
  pb_status* (*parameter)(const void* self, size_t index, const char** out_name /* out */,
                          pb_tensor** out_tensor /* out, borrowed */);

  /* Whole-sequence forward: x [B, T, C] -> *out_y [B, T, C], T <= max_seq_len. `training`
   * enables dropout and the like. Records autograd when gradients are enabled. */
  pb_status* (*forward)(void* self, const pb_tensor* x, int32_t training,
                        pb_tensor** out_y /* out, new reference */);

  /* Decoding state for `batch` sequences of up to `capacity` positions. Released with
   * state_destroy. NULL functions when cache_kind is NONE. */
  pb_status* (*state_create)(void* self, int64_t batch, int64_t capacity,
                             void** out_state /* out */);
  void (*state_destroy)(void* self, void* state);
  /* Appends x [B, Tn, C] to the state and returns its outputs *out_y [B, Tn, C]. Exceeding
   * the capacity is PB_STATUS_OUT_OF_RANGE. */
  pb_status* (*forward_step)(void* self, void* state, const pb_tensor* x,
                             pb_tensor** out_y /* out, new reference */);
  /* Number of positions already in the state. */
  int64_t (*state_length)(const void* self, const void* state);

  /* ---- interface 1.1 ---- */
  /* Beam search: afterwards sequence i of `state` holds what sequence source[i] held before
   * the call, for i in [0, count); count equals the state's batch; a source may repeat (a beam
   * that forks) or be absent (a beam that dies). Lengths are unchanged (all sequences of a
   * state have the same length). NULL, or PB_STATUS_UNSUPPORTED, when the layer cannot do it:
   * the host then rebuilds the state by prefilling each beam's tokens again (correct, slower).
   * Read only when PB_HAS_FIELD(vtable, pb_attention_vtable, state_reorder). */
  pb_status* (*state_reorder)(void* self, void* state, const int64_t* source, int64_t count);

  /* ---- interface 1.3 (cross-attention; PB_ATTENTION_CAP_CROSS) ----
   * Queries come from x [B, Tq, C] (the decoder), keys and values from `memory` [B, Tk, C]
   * (the encoder's output, same C = d_model). No causal mask, no window and no positional
   * encoding apply: query i of sequence b attends to every key j of sequence b whose mask
   * entry is 1, and the result does not depend on the order of the keys (unless the layer
   * declares PB_ATTENTION_CAP_CROSS_POSITIONAL, interface 1.6). Read only when
   * PB_HAS_FIELD(vtable, pb_attention_vtable, forward_cross) and the capability is declared;
   * NULL otherwise.
   *
   * cross_memory_create: projects memory once into what every query reads (keys and values,
   * or a linear-attention summary) and returns it as an opaque object owned by the caller,
   * released with cross_memory_destroy. key_padding_mask: NULL (no padding) or [B, Tk] of any
   * dtype with entries exactly 0 (padding: never attended; changing that memory row changes
   * no output, bit for bit) or 1 (attended), transformers' attention_mask convention. A
   * sequence whose keys are all padding attends to nothing: its attention result is 0 before
   * the output projection. `training` as in forward (a layer that changes in training, e.g.
   * Performer's feature redraw, does it here, once per memory). Records autograd (into memory
   * and the parameters) when gradients are enabled; the object keeps what the backward needs
   * alive.
   * forward_cross: x [B, Tq, C] (B the memory's batch, any Tq >= 1) -> *out_y [B, Tq, C].
   * `training` as in forward. One memory serves any number of calls (decoding: the encoder's
   * keys and values computed once, every step's queries attend to them). */
  pb_status* (*cross_memory_create)(void* self, const pb_tensor* memory,
                                    const pb_tensor* key_padding_mask, int32_t training,
                                    void** out_memory /* out */);
  void (*cross_memory_destroy)(void* self, void* memory);
  pb_status* (*forward_cross)(void* self, const pb_tensor* x, const void* memory, int32_t training,
                              pb_tensor** out_y /* out, new reference */);

  /* ---- interface 1.4 (shared prefixes) ----
   * A new state of `count` sequences (count >= 1) with the capacity and length of `state`:
   * sequence i holds what sequence source[i] of `state` holds (sources in [0, batch), any may
   * repeat or be absent). `state` is not changed; both are released with state_destroy and
   * continue independently. The host scores several continuations of one context this way: the
   * context is prefilled once in a batch-1 state, then forked into one sequence per
   * continuation (lm-eval's multiple-choice requests). NULL, or PB_STATUS_UNSUPPORTED: the host
   * prefills the context once per continuation instead (correct, slower). Read only when
   * PB_HAS_FIELD(vtable, pb_attention_vtable, state_fork). */
  pb_status* (*state_fork)(void* self, const void* state, const int64_t* source, int64_t count,
                           void** out_state /* out */);

  /* ---- interface 1.5 (packed sequences; PB_ATTENTION_CAP_PACKED) ----
   * forward() on rows that hold several segments laid end to end. segment_ids: integer
   * [B, T] (i32 or i64, on the CPU), NON-DECREASING along each row, one id per position (each
   * segment one contiguous run; ids need not start at 0 or be consecutive). Position t of a
   * row sees position j (causal: j <= t) only when both lie in the same segment, and every
   * positional encoding the layer applies (rotary, ALiBi distances) uses the position within
   * the segment, t - (first position of t's segment). So each segment's output rows equal
   * forward() on that segment alone, up to floating-point rounding, and so do the gradients.
   * `training` and autograd as in forward. Read only when PB_HAS_FIELD(vtable,
   * pb_attention_vtable, forward_packed) and the capability is declared; NULL otherwise. */
  pb_status* (*forward_packed)(void* self, const pb_tensor* x, const pb_tensor* segment_ids,
                               int32_t training, pb_tensor** out_y /* out, new reference */);
} pb_attention_vtable;

#ifdef __cplusplus
}
#endif

#endif /* PATCHBAY_ATTENTION_H_ */
