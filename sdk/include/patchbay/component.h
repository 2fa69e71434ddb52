/* Patchbay SDK: the component descriptor shared by every kind (tokenizer, attention,
 * feed-forward, optimizer, parallelism, sampler) and the config schema and values a
 * component is built from.
 *
 * A component is a named factory of objects of one kind. The host validates the user's
 * config against `config_fields` (types, ranges, required keys, unknown keys) before it
 * calls `create`, and hands `create` a view holding every declared key: the user's value
 * or the declared default.
 */
#ifndef PATCHBAY_COMPONENT_H_
#define PATCHBAY_COMPONENT_H_

#include "patchbay/abi.h"
#include "patchbay/host.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Kinds are append-only. Each kind's interface (its vtable struct) has its own version,
 * declared in that kind's header and checked by the host: same major, minor not newer. */
typedef enum pb_component_kind {
  PB_KIND_TOKENIZER = 1,   /* patchbay/tokenizer.h */
  PB_KIND_ATTENTION = 2,   /* interfaces arrive with the first-experiment issue */
  PB_KIND_FEEDFORWARD = 3,
  PB_KIND_OPTIMIZER = 4,
  PB_KIND_PARALLELISM = 5,
  PB_KIND_SAMPLER = 6
} pb_component_kind;

typedef enum pb_value_type {
  PB_TYPE_BOOL = 1,
  PB_TYPE_INT = 2,         /* int64 */
  PB_TYPE_FLOAT = 3,       /* double; an integer literal is accepted */
  PB_TYPE_STRING = 4,
  PB_TYPE_STRING_ARRAY = 5
} pb_value_type;

/* One key of a component's config table. All strings are static (live as long as the
 * plugin is loaded). */
typedef struct pb_config_field {
  size_t struct_size;
  const char* key;           /* snake_case, unique within the component */
  pb_value_type type;
  int32_t required;          /* 1: the user must set it; default_value is then NULL */
  const char* default_value; /* TOML literal of the default: "0.1", "\"gelu\"", "[]" */
  int32_t has_range;         /* 1: INT/FLOAT values must lie in [min_value, max_value] */
  double min_value;
  double max_value;
  const char* choices;       /* STRING only: '|'-separated allowed values, or NULL */
  const char* doc;           /* one line, shown by `patchbay plugins describe` */
} pb_config_field;

/* One resolved value. Which member is meaningful depends on `type`. */
typedef struct pb_config_value {
  size_t struct_size;
  const char* key;
  pb_value_type type;
  int32_t bool_value;
  int64_t int_value;
  double float_value;
  const char* string_value;          /* NUL-terminated UTF-8 */
  const char* const* string_items;   /* STRING_ARRAY: string_count NUL-terminated items */
  size_t string_count;
} pb_config_value;

/* Every key of the component's schema, in schema order. Borrowed: valid only during the
 * call it is passed to; copy what you keep. `values` is an array of `count` structs walked
 * with PB_ARRAY_AT (stride values[0].struct_size, which may exceed the reader's sizeof when
 * the host is a newer minor); patchbay::ConfigView (plugin.hpp) does this for you. */
typedef struct pb_config_view {
  size_t struct_size;
  const pb_config_value* values;
  size_t count;
} pb_config_view;

typedef struct pb_component_descriptor {
  size_t struct_size;
  pb_component_kind kind;
  uint32_t interface_major; /* the kind's interface version the vtable was built against */
  uint32_t interface_minor;
  const char* name;    /* unique among loaded components of this kind: [a-z0-9_-]+ */
  const char* version; /* semantic version of the component, "1.0.0" */
  const char* summary; /* one line */
  /* Array of config_field_count structs, all with the same struct_size, walked with
   * PB_ARRAY_AT; static; NULL when config_field_count is 0. */
  const pb_config_field* config_fields;
  size_t config_field_count;

  /* Builds one object. `host` outlives the object. On success stores the object in
   * *out_instance (owned by the host, released with destroy) and returns NULL. */
  pb_status* (*create)(const pb_host_api* host, const pb_config_view* config,
                       void** out_instance /* out */);
  /* Releases an object made by create. Never fails. */
  void (*destroy)(void* instance);
  /* The kind's function table, e.g. `const pb_tokenizer_vtable*` for PB_KIND_TOKENIZER.
   * Static; required. */
  const void* vtable;
} pb_component_descriptor;

#ifdef __cplusplus
}
#endif

#endif /* PATCHBAY_COMPONENT_H_ */
