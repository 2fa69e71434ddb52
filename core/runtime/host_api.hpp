// Host services handed to every plugin (pb_host_api, patchbay/host.h): logging through
// spdlog (logger "plugin"), a 64-byte-aligned allocator, and status objects. Also the host
// side of status handling: owning a pb_status a plugin returned and turning it into
// patchbay::Error.
//
// One process-wide pb_host_api lives for the whole process, so objects created by plugins
// can never outlive it. Its `ops` field holds the engine's table from the start
// (set_host_ops() replaces it, e.g. in tests).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/error.hpp"
#include "patchbay/host.h"

namespace patchbay::runtime {

struct Version {
  uint32_t major = 0;
  uint32_t minor = 0;
  uint32_t patch = 0;
  std::string str() const;  // "0.1.0"
  friend auto operator<=>(const Version&, const Version&) = default;
};

// This host's release (the CMake project version it was built from).
Version host_version();

// A pb_host_api whose status/log/alloc functions are the host's and whose ops table is
// `ops` (may be null: a host without the engine).
pb_host_api make_host_api(const struct pb_ops_table* ops);

// The process-wide api every Registry uses by default. Never null; lives forever.
const pb_host_api* host_api();
// Sets host_api()->ops. Call once at start-up, before any plugin object exists.
void set_host_ops(const struct pb_ops_table* ops);

// Owns a status returned by a plugin function (freed with the host's status_free).
struct StatusDeleter {
  void operator()(pb_status* status) const;
};
using StatusPtr = std::unique_ptr<pb_status, StatusDeleter>;

// The status's message ("" for null), code (PB_STATUS_OK for null).
std::string status_message(const pb_status* status);
pb_status_code status_code(const pb_status* status);
const char* status_code_name(pb_status_code code);  // "PB_STATUS_IO_ERROR"

// Maps a plugin's status code onto the host's error kinds.
ErrorKind error_kind_for(pb_status_code code);

// Frees `status`; when it is not null throws Error(error_kind_for(code),
// "<context>: <plugin message> [CODE_NAME]").
void throw_if_error(pb_status* status, const std::string& context);

}  // namespace patchbay::runtime
