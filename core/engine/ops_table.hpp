// The engine's C face: the static pb_ops_table (sdk/include/patchbay/ops.h) that the host
// puts in pb_host_api::ops. Every entry catches exceptions and returns them as pb_status.
#pragma once

#include "patchbay/ops.h"

#include "engine/tensor.hpp"

namespace patchbay::engine {

// The table (static storage, never null).
const pb_ops_table* host_ops_table();

// Status functions the table uses. By default the engine has its own status objects; the
// runtime calls this once at start-up (before plugins run) with pb_host_api's functions so
// a status made by either side is readable by both. Not thread-safe against table calls.
struct StatusFunctions {
  pb_status* (*create)(pb_status_code code, const char* message);
  pb_status_code (*code)(const pb_status* status);
  const char* (*message)(const pb_status* status);
  void (*free)(pb_status* status);
};
void set_ops_status_functions(const StatusFunctions& functions);

// Bridges between engine tensors and the table's handles, for host code that hands tensors
// to plugins: ops_table_wrap returns a NEW handle (one reference, release with
// host_ops_table()->release) sharing `t`; ops_table_tensor reads the engine tensor behind a
// handle made by this table (borrowed: valid while the handle lives).
pb_tensor* ops_table_wrap(Tensor t);
const Tensor& ops_table_tensor(const pb_tensor* t);

}  // namespace patchbay::engine
