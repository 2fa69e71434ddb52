// The user's side of devices (issue 34): `--device` and `[run] device` on the built CLI. On a
// machine without a usable GPU (CI, the development machines) `cuda` is refused before any
// work starts, with the reason (no CUDA in the build, or "no GPU: <the runtime's words>") and
// what to do; an unknown device name is refused naming the valid ones; `--device cpu` still
// trains. On a GPU machine the refusal checks are skipped with a message.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "command_runner.hpp"
#include "cuda/cuda_device.hpp"
#include "patchbay/testing/temp_dir.hpp"

namespace {

using patchbay::testing::run_patchbay;

std::string quickstart() { return std::string(PATCHBAY_CONFIGS) + "/quickstart.toml"; }

}  // namespace

TEST_CASE("--device cuda without a usable GPU is refused with the reason, before any work") {
  const patchbay::cuda::CudaProbe& probe = patchbay::cuda::initialise_cuda();
  if (probe.usable) {
    MESSAGE("a GPU is usable here (" << probe.description << "): refusal checks skipped");
    return;
  }
  patchbay::testing::TempDir dir("device_cli");
  const std::string out = "--set run.output_dir='" + dir.path().string() + "' ";
  for (const std::string& how :
       {std::string("--device cuda"), std::string("--set run.device=cuda")}) {
    CAPTURE(how);
    const auto result = run_patchbay("train " + quickstart() + " " + out + how);
    CHECK(result.exit_code == 2);
    CHECK(result.output.find("run.device = \"cuda\"") != std::string::npos);
    CHECK(result.output.find("cannot be used") != std::string::npos);
    CHECK(result.output.find(probe.reason) != std::string::npos);
    CHECK(result.output.find("--device cpu") != std::string::npos);
    CHECK(std::filesystem::is_empty(dir.path()));  // no run directory, no data prepared
  }
  const auto bench = run_patchbay("bench train " + quickstart() + " --steps 1 --device cuda");
  CHECK(bench.exit_code == 2);
  CHECK(bench.output.find("cannot be used") != std::string::npos);
}

TEST_CASE("an unknown device is refused naming the valid ones") {
  const auto result = run_patchbay("train " + quickstart() + " --device tpu");
  CHECK(result.exit_code != 0);
  CHECK(result.output.find("tpu") != std::string::npos);
  CHECK(result.output.find("cuda") != std::string::npos);
}

TEST_CASE("--help of the model commands shows --device") {
  for (const char* command : {"train", "eval", "generate", "bench train"}) {
    CAPTURE(command);
    const auto result = run_patchbay(std::string(command) + " --help");
    CHECK(result.exit_code == 0);
    CHECK(result.output.find("--device") != std::string::npos);
  }
}
