/* Patchbay SDK: the sampler interface (PB_KIND_SAMPLER).
 *
 * Decoding turns one sequence's next-token logits into one token id through an explicit,
 * ORDERED chain written in the config: zero or more logits processors, then exactly one
 * selector. Every object works on host memory: the generator copies the last position's
 * logits to a float32[vocab] buffer on the CPU (as llama.cpp does) and runs the chain on it.
 *
 *   for each generated position:
 *     logits = copy of the model's last-position logits          float32[vocab]
 *     for p in processors (config order): p.apply(logits, history, prompt_len)
 *     token = selector.select(logits)
 *     for s in chain (processors and selector): s.accept(token)
 *     history.push_back(token)
 *
 * Kinds of objects (pb_sampler_vtable::capabilities):
 *  - PROCESSOR: rewrites logits in place. A token it removes becomes -INFINITY; a token that
 *    arrives as -INFINITY stays -INFINITY (a processor never brings a removed token back).
 *    It never writes NaN or +INFINITY, and on success leaves at least one finite logit when
 *    it received one; when it cannot (e.g. every allowed token would repeat an n-gram) it
 *    returns an error instead of an all -INFINITY vector.
 *  - SELECTOR: picks one id whose logit is finite. Random selectors own their generator,
 *    seeded from their config key `seed` (int); equal seeds and equal inputs give equal
 *    tokens on every platform, so the generator must be specified (the built-ins use
 *    splitmix64 and a uniform double in [0,1) from its top 53 bits: (x >> 11) * 2^-53; the
 *    C++ standard distributions are not reproducible across libraries and are not used).
 *  - STATEFUL: the object's behaviour depends on what it saw before (an RNG, mirostat's mu).
 *    reset() and clone() matter for it; for a stateless object they are cheap.
 * Exactly one of PROCESSOR and SELECTOR is set.
 *
 * Logits contract: `logits` holds `vocab` float32 values; -INFINITY means "not allowed";
 * NaN and +INFINITY are invalid input (PB_STATUS_INVALID_ARGUMENT). History contract:
 * `history` holds the sequence so far, prompt first: history[0, prompt_len) is the prompt,
 * history[prompt_len, history_len) the generated tokens; every id lies in [0, vocab).
 *
 * Errors: functions return NULL on success or a pb_status* created with the
 * pb_host_api::status_create of the host that created the object; the caller owns it.
 * Thread safety: one object is used by one thread at a time; distinct objects (clones
 * included) are independent and may run concurrently.
 * Lifetime: objects are made by pb_component_descriptor::create or by clone, and released
 * with the same component's pb_component_descriptor::destroy.
 */
#ifndef PATCHBAY_SAMPLER_H_
#define PATCHBAY_SAMPLER_H_

#include "patchbay/component.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PB_SAMPLER_INTERFACE_MAJOR 1
#define PB_SAMPLER_INTERFACE_MINOR 1

#define PB_SAMPLER_CAP_PROCESSOR (1u << 0) /* apply() rewrites logits in place */
#define PB_SAMPLER_CAP_SELECTOR (1u << 1)  /* select() picks a token */
#define PB_SAMPLER_CAP_STATEFUL (1u << 2)  /* output depends on earlier calls (RNG, mu) */
/* 1.1: set_vocabulary() must be called before the first apply (grammar constraints). */
#define PB_SAMPLER_CAP_NEEDS_VOCABULARY (1u << 3)

/* 1.1: the tokenizer's vocabulary as bytes, for processors that reason about token text
 * (grammar / regex constraints). Every pointer is borrowed for the duration of the
 * set_vocabulary call only: the object copies what it keeps. */
typedef struct pb_sampler_vocabulary {
  size_t struct_size; /* sizeof(pb_sampler_vocabulary) the host was compiled against */
  size_t vocab;       /* number of ids; equals the `vocab` of later apply calls */
  /* Token i's bytes are bytes[offsets[i], offsets[i+1]) (exactly what the tokenizer's
   * decode gives for [i] alone; may end inside a UTF-8 sequence; may be empty). */
  const char* bytes;
  const size_t* offsets; /* vocab + 1 entries, offsets[0] == 0, non-decreasing */
  /* vocab flags: nonzero marks an id that ends the sequence (the tokenizer's special
   * tokens, e.g. <|endoftext|>); its bytes are not text. */
  const uint8_t* end_of_sequence;
} pb_sampler_vocabulary;

typedef struct pb_sampler_vtable {
  size_t struct_size;    /* sizeof(pb_sampler_vtable) the plugin was compiled against */
  uint64_t capabilities; /* PB_SAMPLER_CAP_*; exactly one of PROCESSOR, SELECTOR */

  /* PROCESSOR only (NULL otherwise). Rewrites `logits` (inout, `vocab` floats) for the next
   * position. `history` (borrowed, `history_len` ids, may be NULL when history_len is 0) is
   * prompt + generated so far; the first `prompt_len` <= history_len ids are the prompt.
   * On error the contents of `logits` are unspecified. */
  pb_status* (*apply)(void* self, float* logits /* inout */, size_t vocab, const int32_t* history,
                      size_t history_len, size_t prompt_len);

  /* SELECTOR only (NULL otherwise). Picks an id in [0, vocab) whose logit is finite and
   * stores it in *out_token. `logits` is borrowed and not modified. No finite logit is
   * PB_STATUS_INVALID_ARGUMENT. Advances the RNG of random selectors. */
  pb_status* (*select)(void* self, const float* logits, size_t vocab, int32_t* out_token /* out */);

  /* Required. Tells the object that `token` was appended to the sequence (once per
   * generated token, after select; never for prompt tokens, which processors read from
   * `history`). Stateless objects return NULL. Mirostat updates mu here from the token's
   * probability under its last select(); a token outside that select's truncated set is
   * PB_STATUS_INVALID_ARGUMENT, as is accept() with no select() since the last
   * accept()/reset(). */
  pb_status* (*accept)(void* self, int32_t token);

  /* Required. Returns the object to the state it had right after create: the RNG re-seeded
   * from its `seed`, mu = 2*tau, nothing pending. After reset() the object repeats the
   * draws it made after create when given the same inputs. */
  pb_status* (*reset)(void* self);

  /* Required. Makes an independent deep copy: same config, same RNG state, same mu, same
   * pending select. Calls on the copy never change the original, and vice versa. The copy
   * is owned by the caller and released with the component's destroy. (llama.cpp's
   * mirostat v1 clone wrote mu and the RNG into the source instead of the copy; the
   * conformance kit checks that a clone continues exactly as its original would.) */
  pb_status* (*clone)(const void* self, void** out_clone /* out */);

  /* ---- minor 1 (vocabulary for constrained decoding) ----
   * Read only when PB_HAS_FIELD(vtable, pb_sampler_vtable, set_vocabulary) and non-NULL;
   * NULL means the object does not need the vocabulary. Gives the object the token bytes
   * of the tokenizer in use (`vocabulary` borrowed for the call). The host calls it once,
   * after create and before the first apply, for objects with
   * PB_SAMPLER_CAP_NEEDS_VOCABULARY; clones and reset() keep it. */
  pb_status* (*set_vocabulary)(void* self, const pb_sampler_vocabulary* vocabulary);
} pb_sampler_vtable;

#ifdef __cplusplus
}
#endif

#endif /* PATCHBAY_SAMPLER_H_ */
