/* Patchbay SDK: ABI version, status objects and the conventions every other header follows.
 *
 * Conventions (the full rules are in sdk/ABI.md):
 *  - Every struct that crosses the boundary starts with `size_t struct_size`, set by whoever
 *    fills it to sizeof() of the layout it was compiled against. Readers only touch fields
 *    that lie inside struct_size (PB_HAS_FIELD). Within a major version fields are only
 *    appended; a static_assert in sdk/tests freezes each released layout.
 *  - Nothing C++ crosses the boundary: no exceptions, no STL types. Memory is freed by the
 *    side that allocated it, through the function the owner documents.
 *  - Errors are values: a function that can fail returns `pb_status*`, NULL on success.
 *    A non-NULL status is created with pb_host_api::status_create and owned by the caller,
 *    which releases it with pb_host_api::status_free.
 *  - "// out" marks an output parameter; "borrowed" means valid only for the call.
 */
#ifndef PATCHBAY_ABI_H_
#define PATCHBAY_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Major: bumped on any incompatible change; the host refuses another major.
 * Minor: bumped when fields or functions are appended; the host accepts plugins built
 * against an older or equal minor and refuses a newer one (it cannot provide what they
 * expect). Every bump is recorded in sdk/CHANGELOG.md. */
#define PB_ABI_VERSION_MAJOR 1
#define PB_ABI_VERSION_MINOR 0

/* The Patchbay release this SDK ships with (the host's version when built in the same tree). */
#define PB_SDK_VERSION_MAJOR 0
#define PB_SDK_VERSION_MINOR 1
#define PB_SDK_VERSION_PATCH 0

/* The first host release that implements ABI PB_ABI_VERSION_MAJOR.PB_ABI_VERSION_MINOR. It
 * is the default minimum host version of a plugin built with this SDK (PATCHBAY_PLUGIN). */
#define PB_ABI_SINCE_HOST_MAJOR 0
#define PB_ABI_SINCE_HOST_MINOR 1
#define PB_ABI_SINCE_HOST_PATCH 0

/* True when a struct whose first field is struct_size contains `field`. */
#define PB_HAS_FIELD(ptr, type, field) \
  ((ptr)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

/* Element `index` of an array of structs whose first field is struct_size. The producer of
 * the array sets every element's struct_size to the same value (its sizeof); readers walk
 * the array with that stride, never with their own sizeof, so an array built against
 * another minor is read correctly. `base` must be non-NULL. */
#define PB_ARRAY_AT(type, base, index) \
  ((const type*)((const char*)(base) + (size_t)(index) * (base)->struct_size))

typedef enum pb_status_code {
  PB_STATUS_OK = 0,
  PB_STATUS_INVALID_ARGUMENT = 1, /* caller passed something the contract forbids */
  PB_STATUS_NOT_FOUND = 2,        /* a named thing (file, key, token) does not exist */
  PB_STATUS_OUT_OF_RANGE = 3,     /* a value outside its allowed range */
  PB_STATUS_BUFFER_TOO_SMALL = 4, /* retry with the size reported through the out param */
  PB_STATUS_UNSUPPORTED = 5,      /* capability not provided by this component */
  PB_STATUS_IO_ERROR = 6,         /* reading or writing a file failed */
  PB_STATUS_OUT_OF_MEMORY = 7,
  PB_STATUS_INTERNAL = 8          /* a bug: the message says where */
} pb_status_code;

/* Opaque error object. Created by the host (pb_host_api::status_create), so one allocator
 * owns every status whichever side reports it. */
typedef struct pb_status pb_status;

#ifdef __cplusplus
}
#endif

#endif /* PATCHBAY_ABI_H_ */
