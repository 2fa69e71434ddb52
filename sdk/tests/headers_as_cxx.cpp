// Compiles the SDK's C++ layer on its own (no host headers) under the project's warnings.
#include "patchbay/attention.hpp"
#include "patchbay/component.hpp"
#include "patchbay/feedforward.hpp"
#include "patchbay/files.hpp"
#include "patchbay/optimizer.hpp"
#include "patchbay/parallelism.hpp"
#include "patchbay/plugin.hpp"
#include "patchbay/sampler.hpp"
#include "patchbay/special_tokens.hpp"
#include "patchbay/tensor.hpp"
#include "patchbay/tensor_parallel.hpp"
#include "patchbay/testing/standalone_host.hpp"
#include "patchbay/testing/temp_dir.hpp"
#include "patchbay/tokenizer.hpp"

int patchbay_sdk_headers_as_cxx();
int patchbay_sdk_headers_as_cxx() { return PB_ABI_VERSION_MINOR; }
