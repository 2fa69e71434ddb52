// Ops table version 6: the matmul autocast policy (engine/autocast.hpp) through the C ABI.
#include <exception>
#include <string>

#include "common/error.hpp"
#include "engine/autocast.hpp"
#include "engine/ops_table.hpp"
#include "patchbay/ops.h"

namespace patchbay::engine {

pb_status* ops_table_status(pb_status_code code, const std::string& message);  // ops_table.cpp

namespace {

pb_status* set_autocast_dtype_fn(pb_dtype dtype, pb_dtype* previous) {
  try {
    if (dtype != PB_DTYPE_F32 && dtype != PB_DTYPE_BF16)
      return ops_table_status(
          PB_STATUS_INVALID_ARGUMENT,
          "set_autocast_dtype: expected PB_DTYPE_F32 (off) or PB_DTYPE_BF16, found pb_dtype " +
              std::to_string(static_cast<int>(dtype)));
    const DType old = set_autocast_dtype(static_cast<DType>(dtype));
    if (previous != nullptr) *previous = static_cast<pb_dtype>(old);
    return nullptr;
  } catch (const std::exception& e) {
    return ops_table_status(PB_STATUS_INTERNAL, std::string("set_autocast_dtype: ") + e.what());
  }
}

pb_dtype autocast_dtype_fn() { return static_cast<pb_dtype>(autocast_dtype()); }

void autocast_clear_cache_fn() { autocast_clear_cache(); }

}  // namespace

void fill_autocast_entries(pb_ops_table& table) {
  table.set_autocast_dtype = set_autocast_dtype_fn;
  table.autocast_dtype = autocast_dtype_fn;
  table.autocast_clear_cache = autocast_clear_cache_fn;
}

}  // namespace patchbay::engine
