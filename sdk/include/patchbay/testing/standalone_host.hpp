// Patchbay SDK testing: a minimal standalone pb_host_api for running a plugin's components
// without the Patchbay host (conformance kits, a plugin author's own unit tests): host-owned
// status objects, an aligned malloc allocator, warnings and errors logged to stderr, and no
// tensor ops table (ops is NULL). Header-only; the host object is static.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "patchbay/host.h"

namespace patchbay::testing {

namespace standalone_host_detail {

struct Status {  // what a pb_status* from this host points to (opaque to plugins)
  pb_status_code code;
  std::string message;
};

inline pb_status* status_create(pb_status_code code, const char* message) {
  if (code == PB_STATUS_OK) return nullptr;
  return reinterpret_cast<pb_status*>(new Status{code, message == nullptr ? "" : message});
}
inline pb_status_code status_code(const pb_status* s) {
  return s == nullptr ? PB_STATUS_OK : reinterpret_cast<const Status*>(s)->code;
}
inline const char* status_message(const pb_status* s) {
  return s == nullptr ? "" : reinterpret_cast<const Status*>(s)->message.c_str();
}
inline void status_free(pb_status* s) { delete reinterpret_cast<Status*>(s); }
inline void log(pb_log_level level, const char* component, const char* message) {
  if (level >= PB_LOG_WARN) std::fprintf(stderr, "[%s] %s\n", component ? component : "-", message);
}
inline void* alloc(size_t bytes, size_t alignment) {
  const size_t a = alignment == 0 ? 64 : (alignment < sizeof(void*) ? sizeof(void*) : alignment);
  return std::aligned_alloc(a, (bytes + a - 1) / a * a);  // size must be a multiple of a
}
inline void free(void* p) { std::free(p); }

}  // namespace standalone_host_detail

inline const pb_host_api* standalone_test_host() {
  namespace d = standalone_host_detail;
  static const pb_host_api host = {sizeof(pb_host_api), PB_ABI_VERSION_MAJOR, PB_ABI_VERSION_MINOR,
                                   &d::log, &d::alloc, &d::free, &d::status_create,
                                   &d::status_code, &d::status_message, &d::status_free, nullptr};
  return &host;
}

}  // namespace patchbay::testing
