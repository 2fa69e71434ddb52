/* Patchbay SDK: the services the host hands every plugin (logger, allocator, status
 * objects). A plugin receives a `const pb_host_api*` in every factory call; the pointer
 * stays valid until the plugin's last object is destroyed. All functions are thread-safe.
 */
#ifndef PATCHBAY_HOST_H_
#define PATCHBAY_HOST_H_

#include "patchbay/abi.h"

struct pb_ops_table; /* patchbay/ops.h */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pb_log_level {
  PB_LOG_TRACE = 0,
  PB_LOG_DEBUG = 1,
  PB_LOG_INFO = 2,
  PB_LOG_WARN = 3,
  PB_LOG_ERROR = 4
} pb_log_level;

typedef struct pb_host_api {
  size_t struct_size;
  uint32_t abi_major; /* the host's PB_ABI_VERSION_MAJOR */
  uint32_t abi_minor; /* the host's PB_ABI_VERSION_MINOR */

  /* Writes one log line through the host's logger. `component` and `message` are borrowed,
   * NUL-terminated UTF-8; `component` may be NULL. */
  void (*log)(pb_log_level level, const char* component, const char* message);

  /* Host allocator. Returns NULL on failure. `alignment` is a power of two (0 means 64).
   * Memory from `alloc` is released only with `free`. */
  void* (*alloc)(size_t bytes, size_t alignment);
  void (*free)(void* ptr);

  /* Creates an error object. `message` is borrowed and copied. Never returns NULL for a
   * code other than PB_STATUS_OK (returns NULL for PB_STATUS_OK). */
  pb_status* (*status_create)(pb_status_code code, const char* message);
  /* Reads a status: code and message (owned by the status, valid until status_free). */
  pb_status_code (*status_code)(const pb_status* status);
  const char* (*status_message)(const pb_status* status);
  /* Releases a status; NULL is allowed. */
  void (*status_free)(pb_status* status);

  /* The tensor engine's operations (patchbay/ops.h). Static, owned by the host; NULL
   * only in a host built without the engine. */
  const struct pb_ops_table* ops;
} pb_host_api;

#ifdef __cplusplus
}
#endif

#endif /* PATCHBAY_HOST_H_ */
