// The trainer with [run] device = "cuda" on the host stand-in device (cuda:0 backed by host
// memory, the CPU kernels aliased to it; core/engine/host_standin_device.hpp): the device
// reaches the model, the built-in optimizers update device parameters through the ops table's
// optimizer_update (version 12) and gradient clipping sums device gradients on the device. With
// clipping off, training equals the CPU run bit for bit (the same per-element update rule as the
// plugins' own CPU loops; evaluation to f32 rounding, see below); with clipping on, to f32 rounding
// (the device sums the norm in f32, the CPU in double). An optimizer without a device path
// (adafactor) refuses the device naming itself, before any update or checkpoint. A device step
// reads nothing back to the host: the loss and gradient norm are read at logging steps only
// (train/device_step.hpp), and a non-finite value is still caught there.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/host_standin_device.hpp"
#include "engine/ops.hpp"
#include "train/trainer.hpp"
#include "train_fixture.hpp"

namespace {

namespace tt = patchbay::train::testing;

patchbay::train::TrainSummary train_tiny(tt::TinySetup& setup, const std::filesystem::path& folder,
                                         std::vector<std::string> overrides,
                                         patchbay::train::TrainRequest request = {}) {
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

TEST_CASE("a device training step reads nothing back; the values are read at logging steps") {
  (void)patchbay::engine::install_host_standin_device();
  auto folder = tt::fresh_folder("device_trainer_reads");
  tt::write_tiny_corpus(folder.path());
  tt::TinySetup setup;
  // Device -> host transfers seen at the start of each step: a step's reads show as the
  // difference to the next step's start.
  std::vector<size_t> reads_at_start;
  patchbay::train::TrainRequest request;
  request.before_step = [&](int64_t, const std::vector<patchbay::model::NamedParameter>&) {
    reads_at_start.push_back(patchbay::engine::standin_transfer_counts().device_to_host);
  };
  const std::vector<std::string> overrides = {"train.grad_clip=0.05", "train.log_every=3",
                                              "train.eval_every=0", "run.device=\"cuda\""};
  const auto device = train_tiny(setup, folder.path(), overrides, request);
  REQUIRE(reads_at_start.size() == 6);
  CHECK(reads_at_start[1] == reads_at_start[0]);  // step 1: nothing read
  CHECK(reads_at_start[2] == reads_at_start[1]);  // step 2: nothing read
  // Step 3 logs: one read of its values, and with it one of the device's index-error record
  // (embedding and cross_entropy checked their ids on the device since the last read).
  CHECK(reads_at_start[3] == reads_at_start[2] + 2);
  CHECK(reads_at_start[4] == reads_at_start[3]);
  CHECK(reads_at_start[5] == reads_at_start[4]);
  // The same run on the CPU (clipping on: the device's norm and factor in f32).
  const auto cpu = train_tiny(setup, folder.path(),
                              {"train.grad_clip=0.05", "train.log_every=3", "train.eval_every=0"});
  CHECK(device.steps_done == 6);
  CHECK(std::fabs(device.last_loss - cpu.last_loss) <= 1e-5 * std::fabs(cpu.last_loss));
}

TEST_CASE("a device run still stops on a non-finite loss, naming the unread steps") {
  (void)patchbay::engine::install_host_standin_device();
  auto folder = tt::fresh_folder("device_trainer_nan");
  tt::write_tiny_corpus(folder.path());
  tt::TinySetup setup;
  patchbay::train::TrainRequest request;
  request.before_step = [](int64_t step,
                           const std::vector<patchbay::model::NamedParameter>& params) {
    if (step != 3) return;  // a NaN weight from step 4 (1-based) on, on the device
    patchbay::engine::NoGradGuard no_grad;
    patchbay::engine::Tensor first =
        patchbay::engine::narrow(params[0].tensor.detach().reshape({-1}), 0, 0, 1);
    patchbay::engine::fill_(first, std::nan(""));
  };
  const auto device =
      train_tiny(setup, folder.path(),
                 {"train.log_every=3", "train.eval_every=0", "run.device=\"cuda\""}, request);
  CHECK(device.numeric_failure);
  CHECK(device.steps_done == 5);  // found at the read of step 6
  CAPTURE(device.failure_message);
  CHECK(device.failure_message.find("one of steps 4 to 6") != std::string::npos);
}
