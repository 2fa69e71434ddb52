// patchbay::guarded and Status::from_current_exception (component.hpp): every SDK adapter
// and so every plugin reports exceptions through them. PluginError keeps its code and
// message, std::bad_alloc becomes OUT_OF_MEMORY, any other std::exception INTERNAL with its
// what(), anything else INTERNAL with a fixed text; the context prefixes the message, and a
// body that returns gives NULL (success).
#include <doctest/doctest.h>

#include <new>
#include <stdexcept>
#include <string>

#include "patchbay/component.hpp"
#include "patchbay/testing/standalone_host.hpp"

namespace {

struct Outcome {
  pb_status_code code;
  std::string message;
};

// Runs `body` through guarded() and reads (then frees) the status it gives.
template <class Body>
Outcome outcome_of(Body&& body) {
  const pb_host_api* host = patchbay::testing::standalone_test_host();
  pb_status* status = patchbay::guarded(host, "widget frob", body);
  Outcome out{host->status_code(status), host->status_message(status)};
  host->status_free(status);
  return out;
}

}  // namespace

TEST_CASE("a body that returns gives success (NULL)") {
  int calls = 0;
  const pb_host_api* host = patchbay::testing::standalone_test_host();
  CHECK(patchbay::guarded(host, "widget frob", [&] { ++calls; }) == nullptr);
  CHECK(calls == 1);
}

TEST_CASE("PluginError keeps its code and message, prefixed with the context") {
  for (pb_status_code code :
       {PB_STATUS_INVALID_ARGUMENT, PB_STATUS_NOT_FOUND, PB_STATUS_OUT_OF_RANGE,
        PB_STATUS_UNSUPPORTED, PB_STATUS_IO_ERROR, PB_STATUS_INTERNAL}) {
    const Outcome o =
        outcome_of([code] { throw patchbay::PluginError(code, "expected 3 heads, found 4"); });
    CHECK(o.code == code);
    CHECK(o.message == "widget frob: expected 3 heads, found 4");
  }
}

TEST_CASE("std::bad_alloc becomes OUT_OF_MEMORY") {
  const Outcome o = outcome_of([] { throw std::bad_alloc(); });
  CHECK(o.code == PB_STATUS_OUT_OF_MEMORY);
  CHECK(o.message.find("out of memory") != std::string::npos);
  // A derived allocation failure is still one.
  CHECK(outcome_of([] { throw std::bad_array_new_length(); }).code == PB_STATUS_OUT_OF_MEMORY);
}

TEST_CASE("any other exception becomes INTERNAL, with what() when it has one") {
  const Outcome runtime = outcome_of([] { throw std::runtime_error("kernel table is empty"); });
  CHECK(runtime.code == PB_STATUS_INTERNAL);
  CHECK(runtime.message == "widget frob: kernel table is empty");
  // Standard exceptions have no status of their own: their meaning inside a plugin is
  // unknown, so they are bugs to report (plugins throw PluginError for caller errors).
  CHECK(outcome_of([] { throw std::invalid_argument("bad"); }).code == PB_STATUS_INTERNAL);
  CHECK(outcome_of([] { throw std::out_of_range("far"); }).code == PB_STATUS_INTERNAL);
  const Outcome odd = outcome_of([] { throw 42; });
  CHECK(odd.code == PB_STATUS_INTERNAL);
  CHECK(odd.message == "widget frob: unknown exception (not derived from std::exception)");
}

TEST_CASE("Status::error makes a status with the host and never throws") {
  const pb_host_api* host = patchbay::testing::standalone_test_host();
  pb_status* s = patchbay::Status::error(host, PB_STATUS_BUFFER_TOO_SMALL, "need 12 ids");
  CHECK(host->status_code(s) == PB_STATUS_BUFFER_TOO_SMALL);
  CHECK(std::string(host->status_message(s)) == "need 12 ids");
  host->status_free(s);
  CHECK(patchbay::Status::ok() == nullptr);
}
