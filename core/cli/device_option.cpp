// --device and the usable-device check (device_option.hpp).
#include "cli/device_option.hpp"

#include "common/error.hpp"
#include "config/config_loader.hpp"
#include "cuda/cuda_device.hpp"
#include "engine/device_name.hpp"

namespace patchbay::cli {

void add_device_option(boost::program_options::options_description& options, std::string& device) {
  options.add_options()("device", boost::program_options::value(&device),
                        "cpu or cuda: sets run.device (default: the config's, else cpu)");
}

engine::Device apply_device_option(config::ResolvedConfig& config, const std::string& device) {
  if (!device.empty()) config::apply_set_override(config, "run.device=\"" + device + "\"");
  const toml::node* node = config.find("run.device");
  const std::string name = node != nullptr && node->is_string() ? node->as_string()->get() : "cpu";
  const engine::Device parsed = engine::parse_device(name);
  if (parsed.type == engine::DeviceType::kCpu) return parsed;
  const cuda::CudaProbe& probe = cuda::initialise_cuda();
  if (!probe.usable)
    throw Error(ErrorKind::kInvalidArgument,
                "run.device = \"" + name + "\" (" + config.locate("run.device").to_string() +
                    ") cannot be used: " + probe.reason +
                    ". Run on the CPU with --device cpu (or run.device = \"cpu\")");
  if (parsed.index >= probe.device_count)
    throw Error(ErrorKind::kInvalidArgument, "run.device = \"" + name + "\": this machine has " +
                                                 std::to_string(probe.device_count) +
                                                 " CUDA device(s)");
  return parsed;
}

}  // namespace patchbay::cli
