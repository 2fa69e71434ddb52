/* Compiles every C header of the SDK as C99 under -Wall -Wextra -Wpedantic -Werror: the ABI
 * headers must stay plain C so that plugins can be written in any language with a C FFI. */
#include "patchbay/abi.h"
#include "patchbay/attention.h"
#include "patchbay/component.h"
#include "patchbay/feedforward.h"
#include "patchbay/host.h"
#include "patchbay/model_layer.h"
#include "patchbay/ops.h"
#include "patchbay/optimizer.h"
#include "patchbay/parallelism.h"
#include "patchbay/plugin.h"
#include "patchbay/sampler.h"
#include "patchbay/tokenizer.h"

int patchbay_sdk_headers_as_c(void);
int patchbay_sdk_headers_as_c(void) { return PB_ABI_VERSION_MAJOR; }
