// Range check for index buffers (see index_check.hpp). A sequential scan: it runs at
// memory speed and stops at the first bad entry, so the first position is the one
// reported, independent of the thread count.
#include "patchbay/kernels/index_check.hpp"

namespace patchbay::kernels {

template <class Index>
int64_t first_index_out_of_range(const Index* ids, int64_t count, int64_t limit) {
  for (int64_t i = 0; i < count; ++i) {
    const auto id = static_cast<int64_t>(ids[i]);
    if (id < 0 || id >= limit) return i;
  }
  return -1;
}

template int64_t first_index_out_of_range<int32_t>(const int32_t*, int64_t, int64_t);
template int64_t first_index_out_of_range<int64_t>(const int64_t*, int64_t, int64_t);

}  // namespace patchbay::kernels
