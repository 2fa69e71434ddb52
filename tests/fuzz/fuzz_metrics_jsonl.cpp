// JSON Lines readers (core/run/metrics_log.cpp): metrics.jsonl as compare, resume and reports
// read it, and the resume-time rewrite that drops records after a checkpoint's step.
#include "common/error.hpp"
#include "fuzz_input.hpp"
#include "run/metrics_log.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path file = patchbay_fuzz::as_file(data, size, "metrics.jsonl");
  try {
    (void)patchbay::run::read_metrics(file);
  } catch (const patchbay::Error&) {
  }
  try {
    (void)patchbay::run::drop_metrics_after(file, size % 7);
  } catch (const patchbay::Error&) {
  }
  return 0;
}
