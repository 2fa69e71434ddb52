/* Patchbay SDK: the tokenizer interface (PB_KIND_TOKENIZER).
 *
 * An object maps bytes to token ids in [0, vocab_size). Byte-level tokenizers
 * (PB_TOKENIZER_CAP_BYTE_LEVEL) must round-trip every byte string exactly, including
 * invalid UTF-8: decode(encode(x)) == x. Special tokens (e.g. "<|endoftext|>") have ids too;
 * encode recognises their text only when `allow_special` is 1.
 *
 * Thread safety: encode, decode and the queries may run concurrently on one object; train
 * and load need exclusive access.
 */
#ifndef PATCHBAY_TOKENIZER_H_
#define PATCHBAY_TOKENIZER_H_

#include "patchbay/component.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PB_TOKENIZER_INTERFACE_MAJOR 1
#define PB_TOKENIZER_INTERFACE_MINOR 0

#define PB_TOKENIZER_CAP_TRAIN (1u << 0)      /* train() builds the vocabulary from text */
#define PB_TOKENIZER_CAP_BYTE_LEVEL (1u << 1) /* exact round trip for arbitrary bytes */

typedef struct pb_tokenizer_vtable {
  size_t struct_size;
  uint64_t capabilities; /* PB_TOKENIZER_CAP_* */

  /* Learns the vocabulary from `text` (borrowed, `text_len` bytes, any encoding), replacing
   * any earlier one. PB_STATUS_UNSUPPORTED without PB_TOKENIZER_CAP_TRAIN. */
  pb_status* (*train)(void* self, const char* text, size_t text_len);

  /* Number of ids, special tokens included. 0 before train/load for trainable ones. */
  int64_t (*vocab_size)(const void* self);

  /* Encodes `text_len` bytes into ids. Writes at most `capacity` ids to `out_ids` and the
   * number needed to *out_count. When capacity is short, returns
   * PB_STATUS_BUFFER_TOO_SMALL with *out_count set; retry with that capacity. For
   * byte-level tokenizers text_len ids always suffice. */
  pb_status* (*encode)(const void* self, const char* text, size_t text_len,
                       int32_t allow_special, int32_t* out_ids /* out */, size_t capacity,
                       size_t* out_count /* out */);

  /* Decodes ids into bytes, same buffer protocol as encode. An id outside
   * [0, vocab_size) is PB_STATUS_OUT_OF_RANGE. */
  pb_status* (*decode)(const void* self, const int32_t* ids, size_t id_count,
                       char* out_bytes /* out */, size_t capacity,
                       size_t* out_len /* out */);

  /* Special tokens, index in [0, special_token_count). *out_text is owned by the object
   * and valid until the next train/load or destroy. */
  size_t (*special_token_count)(const void* self);
  pb_status* (*special_token)(const void* self, size_t index, const char** out_text /* out */,
                              int32_t* out_id /* out */);

  /* Writes / reads the complete state to / from one file. Save writes atomically (a
   * temporary file, then rename). `path` is borrowed UTF-8. */
  pb_status* (*save)(const void* self, const char* path);
  pb_status* (*load)(void* self, const char* path);
} pb_tokenizer_vtable;

#ifdef __cplusplus
}
#endif

#endif /* PATCHBAY_TOKENIZER_H_ */
