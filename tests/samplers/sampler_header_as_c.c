/* patchbay/sampler.h must stay plain C99: plugins may be written in any language with a C
 * FFI. This file only has to compile (linked into sampler_abi_layout_test). */
#include "patchbay/sampler.h"

int patchbay_sampler_header_as_c(void);
int patchbay_sampler_header_as_c(void) {
  pb_sampler_vtable vtable = {sizeof(pb_sampler_vtable), PB_SAMPLER_CAP_SELECTOR, 0, 0, 0, 0, 0, 0};
  pb_sampler_vocabulary vocabulary = {sizeof(pb_sampler_vocabulary), 0, 0, 0, 0}; /* 1.1 */
  return (int)vtable.capabilities + PB_SAMPLER_INTERFACE_MAJOR + (int)vocabulary.vocab;
}
