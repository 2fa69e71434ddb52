// Checkpoints are device-independent (issue 34): tensors saved from the host stand-in device
// (core/engine/host_standin_device.hpp) load bit-exactly into CPU parameters, and a
// checkpoint saved from the CPU loads into parameters on the device, in place.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine/host_standin_device.hpp"
#include "engine/ops.hpp"
#include "patchbay/testing/temp_dir.hpp"
#include "train/checkpoint.hpp"

namespace {

using namespace patchbay::engine;
using patchbay::train::NamedTensor;

std::vector<unsigned char> bytes_of(const Tensor& t) {
  Tensor c = t.to(cpu()).contiguous();
  std::vector<unsigned char> out(c.nbytes());
  if (!out.empty()) std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}

std::vector<NamedTensor> parameters_on(Device device, uint64_t seed) {
  Generator gen(seed);
  return {{"wte.weight", randn({7, 4}, gen, DType::kF32, device)},
          {"blocks.0.ln.gain", randn({4}, gen, DType::kF32, device).to(DType::kBF16)},
          {"optimizer/step", full({1}, 3.0, DType::kI64, device)}};
}

}  // namespace

TEST_CASE("a checkpoint saved from device tensors loads on the CPU, and the other way round") {
  const Device dev = install_host_standin_device();
  patchbay::testing::TempDir dir("device_checkpoint");

  const std::vector<NamedTensor> on_device = parameters_on(dev, 1);
  const auto from_device = patchbay::train::save_checkpoint(
      dir.path() / "a", 5, on_device,
      {{patchbay::train::kMetaConfig, "[run]\nname = \"device\"\n"}});
  const patchbay::train::Checkpoint loaded(from_device);
  std::vector<NamedTensor> on_cpu = parameters_on(cpu(), 2);  // other values, same shapes
  loaded.load_into(on_cpu);
  for (size_t i = 0; i < on_cpu.size(); ++i) {
    CAPTURE(on_cpu[i].name);
    CHECK(on_cpu[i].tensor.device() == cpu());
    CHECK(bytes_of(on_cpu[i].tensor) == bytes_of(on_device[i].tensor));
    CHECK(bytes_of(loaded.tensor(on_cpu[i].name)) == bytes_of(on_device[i].tensor));
  }

  const std::vector<NamedTensor> cpu_source = parameters_on(cpu(), 3);
  const auto from_cpu = patchbay::train::save_checkpoint(
      dir.path() / "b", 6, cpu_source,
      {{patchbay::train::kMetaConfig, "[run]\nname = \"device\"\n"}});
  std::vector<NamedTensor> device_target = parameters_on(dev, 4);
  const void* storage_before = device_target[0].tensor.data_ptr();
  patchbay::train::Checkpoint(from_cpu).load_into(device_target);
  CHECK(device_target[0].tensor.data_ptr() == storage_before);  // in place
  for (size_t i = 0; i < device_target.size(); ++i) {
    CAPTURE(device_target[i].name);
    CHECK(device_target[i].tensor.device() == dev);
    CHECK(bytes_of(device_target[i].tensor) == bytes_of(cpu_source[i].tensor));
  }
}
