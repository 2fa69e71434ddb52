// The trainer with [run] device = "cuda" on the host stand-in device (cuda:0 backed by host
// memory, the CPU kernels aliased to it; core/engine/host_standin_device.hpp): the device
// reaches the model, the built-in optimizers update device parameters through the ops table's
// optimizer_update (version 12) and gradient clipping sums device gradients on the device. With
// clipping off, training equals the CPU run bit for bit (the same per-element update rule as the
// plugins' own CPU loops; evaluation to f32 rounding, see below); with clipping on, to f32 rounding
// (the device sums the norm in f32, the CPU in double). An optimizer without a device path
// (adafactor) refuses the device naming itself, before any update or checkpoint.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/host_standin_device.hpp"
#include "train/trainer.hpp"
#include "train_fixture.hpp"

namespace {

namespace tt = patchbay::train::testing;

patchbay::train::TrainSummary train_tiny(tt::TinySetup& setup, const std::filesystem::path& folder,
                                         std::vector<std::string> overrides) {
  patchbay::train::TrainRequest request;
  request.show_progress = false;
  request.print_samples = false;
  request.overwrite = true;
  overrides.push_back("train.checkpoint_every=0");
  const auto config = setup.config(tt::tiny_config_text(folder), overrides);
  return patchbay::train::train_model(config, setup.registry, setup.lookup, request);
}

}  // namespace

TEST_CASE("run.device = cuda trains like the CPU: optimizer updates and clipping on the device") {
  (void)patchbay::engine::install_host_standin_device();
  auto folder = tt::fresh_folder("device_trainer");
  tt::write_tiny_corpus(folder.path());
  tt::TinySetup setup;
  for (const char* optimizer : {"adamw", "sgd", "lion"}) {
    CAPTURE(std::string(optimizer));
    const std::string kind = std::string("optimizer.kind=\"") + optimizer + "\"";
    const auto cpu = train_tiny(setup, folder.path(), {kind, "train.grad_clip=0"});
    const auto device =
        train_tiny(setup, folder.path(), {kind, "train.grad_clip=0", "run.device=\"cuda\""});
    CHECK(device.steps_done == 6);
    CHECK(device.last_loss == cpu.last_loss);  // training: bit for bit
    // Evaluation records no gradient, so on the CPU the products take the row-invariant kernel
    // (engine/ops/batch_invariance.hpp) while the device keeps its own: equal to f32 rounding.
    REQUIRE(device.last_eval.has_value());
    CHECK(std::fabs(device.last_eval->loss - cpu.last_eval->loss) <=
          1e-6 * std::fabs(cpu.last_eval->loss));
  }
  const auto cpu = train_tiny(setup, folder.path(), {"train.grad_clip=0.05"});
  const auto device =
      train_tiny(setup, folder.path(), {"train.grad_clip=0.05", "run.device=\"cuda\""});
  CHECK(std::fabs(device.last_loss - cpu.last_loss) <= 1e-5 * std::fabs(cpu.last_loss));
}

TEST_CASE("an optimizer without a device path refuses run.device = cuda by name") {
  (void)patchbay::engine::install_host_standin_device();
  auto folder = tt::fresh_folder("device_trainer_refusal");
  tt::write_tiny_corpus(folder.path());
  tt::TinySetup setup;
  try {
    (void)train_tiny(setup, folder.path(), {"optimizer.kind=\"adafactor\"", "run.device=\"cuda\""});
    FAIL("expected adafactor to refuse parameters on cuda:0");
  } catch (const patchbay::Error& e) {
    const std::string message = e.what();
    CHECK(message.find("adafactor") != std::string::npos);
    CHECK(message.find("CPU") != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(folder.path() / "run" / "checkpoints"));
}
