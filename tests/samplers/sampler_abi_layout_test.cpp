// Freezes the released layout of pb_sampler_vtable (interface 1.0, LP64; 1.1 appended
// set_vocabulary and pb_sampler_vocabulary): fields may only be appended; a change to a
// released offset is an ABI break and needs a new interface major.
#include <doctest/doctest.h>

#include <cstddef>

#include "patchbay/sampler.h"

extern "C" int patchbay_sampler_header_as_c(void);

static_assert(PB_SAMPLER_INTERFACE_MAJOR == 1 && PB_SAMPLER_INTERFACE_MINOR == 1);
static_assert(PB_SAMPLER_CAP_PROCESSOR == 1u && PB_SAMPLER_CAP_SELECTOR == 2u &&
              PB_SAMPLER_CAP_STATEFUL == 4u && PB_SAMPLER_CAP_NEEDS_VOCABULARY == 8u);
static_assert(offsetof(pb_sampler_vtable, struct_size) == 0);
static_assert(offsetof(pb_sampler_vtable, capabilities) == 8);
static_assert(offsetof(pb_sampler_vtable, apply) == 16);
static_assert(offsetof(pb_sampler_vtable, select) == 24);
static_assert(offsetof(pb_sampler_vtable, accept) == 32);
static_assert(offsetof(pb_sampler_vtable, reset) == 40);
static_assert(offsetof(pb_sampler_vtable, clone) == 48);
// 1.0 ended here (56 bytes).
static_assert(offsetof(pb_sampler_vtable, set_vocabulary) == 56);  // 1.1
static_assert(sizeof(pb_sampler_vtable) == 64);
static_assert(offsetof(pb_sampler_vocabulary, struct_size) == 0);  // 1.1
static_assert(offsetof(pb_sampler_vocabulary, vocab) == 8);
static_assert(offsetof(pb_sampler_vocabulary, bytes) == 16);
static_assert(offsetof(pb_sampler_vocabulary, offsets) == 24);
static_assert(offsetof(pb_sampler_vocabulary, end_of_sequence) == 32);
static_assert(sizeof(pb_sampler_vocabulary) == 40);

TEST_CASE("sampler.h compiles as C and agrees with the C++ view") {
  CHECK(patchbay_sampler_header_as_c() ==
        static_cast<int>(PB_SAMPLER_CAP_SELECTOR) + PB_SAMPLER_INTERFACE_MAJOR);
}
