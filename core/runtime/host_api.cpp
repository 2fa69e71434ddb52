// Host services (pb_host_api) and host-side status handling. See host_api.hpp.
#include "runtime/host_api.hpp"

#include "engine/ops_table.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <new>

// The ABI's opaque status type, defined by the host: code + owned message.
struct pb_status {
  pb_status_code code;
  std::string message;
};

namespace patchbay::runtime {
namespace {

spdlog::level::level_enum spd_level(pb_log_level level) {
  switch (level) {
    case PB_LOG_TRACE:
      return spdlog::level::trace;
    case PB_LOG_DEBUG:
      return spdlog::level::debug;
    case PB_LOG_INFO:
      return spdlog::level::info;
    case PB_LOG_WARN:
      return spdlog::level::warn;
    case PB_LOG_ERROR:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

// Every callback is noexcept in effect: nothing may unwind into plugin code.
void host_log(pb_log_level level, const char* component, const char* message) {
  try {
    spdlog::log(spd_level(level), "[{}] {}", component != nullptr ? component : "plugin",
                message != nullptr ? message : "");
  } catch (...) {
  }
}

void* host_alloc(size_t bytes, size_t alignment) {
  if (alignment == 0) alignment = 64;
  if ((alignment & (alignment - 1)) != 0) return nullptr;
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  void* p = nullptr;
  if (posix_memalign(&p, alignment, bytes == 0 ? 1 : bytes) != 0) return nullptr;
  return p;
}

void host_free(void* p) { std::free(p); }

// Returned when a status cannot be allocated: an error status must never be NULL.
pb_status g_out_of_memory_status{PB_STATUS_OUT_OF_MEMORY, "out of memory creating a status"};

pb_status* host_status_create(pb_status_code code, const char* message) {
  if (code == PB_STATUS_OK) return nullptr;
  try {
    return new pb_status{code, message != nullptr ? message : ""};
  } catch (...) {
    return &g_out_of_memory_status;  // status_free recognises and keeps it
  }
}

pb_status_code host_status_code(const pb_status* status) {
  return status == nullptr ? PB_STATUS_OK : status->code;
}

const char* host_status_message(const pb_status* status) {
  return status == nullptr ? "" : status->message.c_str();
}

void host_status_free(pb_status* status) {
  if (status == nullptr || status == &g_out_of_memory_status) return;
  delete status;
}

// The process-wide api carries the engine's ops table from the start, and the table reports
// errors through the host's status objects, so a status from either side reads the same.
pb_host_api& process_api() {
  static pb_host_api api = [] {
    engine::set_ops_status_functions({&host_status_create, &host_status_code,
                                      &host_status_message, &host_status_free});
    return make_host_api(engine::host_ops_table());
  }();
  return api;
}

}  // namespace

std::string Version::str() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

Version host_version() {
  return Version{PATCHBAY_HOST_VERSION_MAJOR, PATCHBAY_HOST_VERSION_MINOR,
                 PATCHBAY_HOST_VERSION_PATCH};
}

pb_host_api make_host_api(const struct pb_ops_table* ops) {
  pb_host_api api{};
  api.struct_size = sizeof(pb_host_api);
  api.abi_major = PB_ABI_VERSION_MAJOR;
  api.abi_minor = PB_ABI_VERSION_MINOR;
  api.log = &host_log;
  api.alloc = &host_alloc;
  api.free = &host_free;
  api.status_create = &host_status_create;
  api.status_code = &host_status_code;
  api.status_message = &host_status_message;
  api.status_free = &host_status_free;
  api.ops = ops;
  return api;
}

const pb_host_api* host_api() { return &process_api(); }

void set_host_ops(const struct pb_ops_table* ops) { process_api().ops = ops; }

void StatusDeleter::operator()(pb_status* status) const { host_status_free(status); }

std::string status_message(const pb_status* status) { return host_status_message(status); }

pb_status_code status_code(const pb_status* status) { return host_status_code(status); }

const char* status_code_name(pb_status_code code) {
  switch (code) {
    case PB_STATUS_OK:
      return "PB_STATUS_OK";
    case PB_STATUS_INVALID_ARGUMENT:
      return "PB_STATUS_INVALID_ARGUMENT";
    case PB_STATUS_NOT_FOUND:
      return "PB_STATUS_NOT_FOUND";
    case PB_STATUS_OUT_OF_RANGE:
      return "PB_STATUS_OUT_OF_RANGE";
    case PB_STATUS_BUFFER_TOO_SMALL:
      return "PB_STATUS_BUFFER_TOO_SMALL";
    case PB_STATUS_UNSUPPORTED:
      return "PB_STATUS_UNSUPPORTED";
    case PB_STATUS_IO_ERROR:
      return "PB_STATUS_IO_ERROR";
    case PB_STATUS_OUT_OF_MEMORY:
      return "PB_STATUS_OUT_OF_MEMORY";
    case PB_STATUS_INTERNAL:
      return "PB_STATUS_INTERNAL";
  }
  return "PB_STATUS_(unknown code)";
}

ErrorKind error_kind_for(pb_status_code code) {
  switch (code) {
    case PB_STATUS_INVALID_ARGUMENT:
    case PB_STATUS_OUT_OF_RANGE:
    case PB_STATUS_UNSUPPORTED:
      return ErrorKind::kInvalidArgument;
    case PB_STATUS_NOT_FOUND:
      return ErrorKind::kNotFound;
    case PB_STATUS_IO_ERROR:
      return ErrorKind::kIo;
    default:
      return ErrorKind::kInternal;
  }
}

void throw_if_error(pb_status* status, const std::string& context) {
  if (status == nullptr) return;
  StatusPtr owned(status);
  const pb_status_code code = host_status_code(status);
  throw Error(error_kind_for(code),
              context + ": " + host_status_message(status) + " [" + status_code_name(code) + "]");
}

}  // namespace patchbay::runtime
