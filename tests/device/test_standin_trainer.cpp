// The trainer with [run] device = "cuda" on the host stand-in device (cuda:0 backed by host
// memory; core/engine/host_standin_device.hpp): the device reaches the model (dense attention
// and the MLP build their parameters there), and the built-in optimizer, whose fused update
// loop reads host memory, refuses the device naming itself and why, before any update or
// checkpoint. The same config on the CPU trains.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "common/error.hpp"
#include "engine/host_standin_device.hpp"
#include "train/trainer.hpp"
#include "train_fixture.hpp"

namespace {

namespace tt = patchbay::train::testing;

}  // namespace

TEST_CASE("run.device = cuda reaches the model; a CPU-only optimizer refuses it by name") {
  (void)patchbay::engine::install_host_standin_device();
  auto folder = tt::fresh_folder("device_trainer");
  tt::write_tiny_corpus(folder.path());
  tt::TinySetup setup;
  patchbay::train::TrainRequest request;
  request.show_progress = false;
  request.print_samples = false;

  const auto on_device = setup.config(tt::tiny_config_text(folder.path()), {"run.device=\"cuda\""});
  try {
    (void)patchbay::train::train_model(on_device, setup.registry, setup.lookup, request);
    FAIL("expected the adamw optimizer to refuse parameters on cuda:0");
  } catch (const patchbay::Error& e) {
    const std::string message = e.what();
    CHECK(message.find("adamw") != std::string::npos);
    CHECK(message.find("CPU") != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(folder.path() / "run" / "checkpoints"));

  const auto on_cpu = setup.config(tt::tiny_config_text(folder.path()),
                                   {"train.max_steps=2", "train.eval_every=0"});
  request.overwrite = true;
  const patchbay::train::TrainSummary summary =
      patchbay::train::train_model(on_cpu, setup.registry, setup.lookup, request);
  CHECK(summary.steps_done == 2);
}
