// The GEMM reference-rate helper reports a plausible, positive rate and names oneDNN's
// implementation; machine_info describes the machine. (Timing values are not asserted
// beyond sanity: benchmarks are commands, not tests.)
#include <doctest/doctest.h>

#include "common/error.hpp"
#include "onednn/gemm_reference_rate.hpp"

namespace patchbay::onednn {
namespace {

TEST_CASE("measure_onednn_matmul_rate returns a positive rate for f32 and bf16") {
  GemmRateOptions options;
  options.warmup_iterations = 1;
  options.repeats = 3;
  options.min_sample_seconds = 0.002;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    options.packed_weights = dtype == DType::kBF16;
    const GemmRate rate = measure_onednn_matmul_rate(64, 96, 128, dtype, options);
    CAPTURE(rate.median_gflops);
    CAPTURE(rate.median_seconds);
    CAPTURE(rate.iterations_per_sample);
    CAPTURE(rate.implementation);
    CHECK(rate.median_gflops > 0.0);  // no speed floor: the CI machine may be loaded
    CHECK(rate.best_gflops >= rate.median_gflops);
    CHECK(rate.median_seconds > 0.0);
    CHECK(rate.iterations_per_sample >= 1);
    CHECK_FALSE(rate.implementation.empty());
    CHECK(rate.packed_weights == options.packed_weights);
  }
  CHECK_THROWS_AS(measure_onednn_matmul_rate(0, 1, 1, DType::kF32), Error);
}

TEST_CASE("machine_info names the CPU, the threads and oneDNN") {
  const MachineInfo info = machine_info();
  CHECK_FALSE(info.cpu_model.empty());
  CHECK(info.logical_cpus >= 1);
  CHECK(info.openmp_threads >= 1);
  CHECK(info.onednn.find("oneDNN 2.") == 0);
  CHECK(machine_info_line(info).find(info.cpu_model) == 0);
}

}  // namespace
}  // namespace patchbay::onednn
