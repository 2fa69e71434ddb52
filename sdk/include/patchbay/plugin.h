/* Patchbay SDK: the plugin descriptor and the one exported entry symbol.
 *
 * A plugin is a shared library exporting exactly one entry, named PB_PLUGIN_ENTRY_SYMBOL,
 * through Boost.DLL's alias mechanism (use PATCHBAY_PLUGIN from patchbay/plugin.hpp). The
 * entry returns a pointer to a static descriptor. Beside it, the library carries a
 * metadata text in the ELF section PB_PLUGIN_METADATA_SECTION so that the host can
 * describe a plugin without running any of its code; the host checks after loading that
 * the descriptor agrees with the metadata.
 */
#ifndef PATCHBAY_PLUGIN_H_
#define PATCHBAY_PLUGIN_H_

#include "patchbay/component.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PB_PLUGIN_ENTRY_SYMBOL "patchbay_plugin_entry"
#define PB_PLUGIN_METADATA_SECTION "patchbay_meta"

typedef struct pb_plugin_descriptor {
  size_t struct_size;
  uint32_t abi_major; /* PB_ABI_VERSION_MAJOR the plugin was built against */
  uint32_t abi_minor; /* PB_ABI_VERSION_MINOR the plugin was built against */
  uint32_t min_host_major; /* oldest Patchbay host release the plugin runs on */
  uint32_t min_host_minor;
  uint32_t min_host_patch;
  const char* name;    /* plugin name, [a-z0-9_-]+ */
  const char* version; /* semantic version of the plugin */
  /* Pointers, not an array of structs, so a descriptor from an older minor (smaller
   * struct_size) is still read correctly. Static; component_count entries. */
  const pb_component_descriptor* const* components;
  size_t component_count;
} pb_plugin_descriptor;

/* The entry's type. Called once per load; must not fail or allocate. */
typedef const pb_plugin_descriptor* (*pb_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* PATCHBAY_PLUGIN_H_ */
