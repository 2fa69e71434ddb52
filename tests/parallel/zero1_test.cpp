// ZeRO-1 against plain data parallelism (ctest runs this under mpirun on 2 and 3 ranks; 3
// ranks give uneven shards: the tiny model's parameter count is not a multiple of 3):
//   - 6 AdamW steps with clipping and weight decay under [parallelism] kind = "mpi_zero1"
//     end with the same parameters AND optimizer state (gathered to unsharded names and shapes)
//     as kind = "mpi_data". Per element the update is the same arithmetic; what differs is
//     the reduction (reduce-scatter vs all-reduce, Open MPI may order the sums differently
//     with 3 ranks) and the clipping norm (summed per shard, then over ranks), so the check
//     is 1e-5 absolute rather than bitwise;
//   - the ZeRO-1 checkpoint (world-size independent) resumes in one process.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "../train/train_fixture.hpp"
#include "mpi_test_fixture.hpp"
#include "parallel/parallel_run.hpp"
#include "run/metrics_log.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"

namespace fs = std::filesystem;
namespace tt = patchbay::train::testing;
namespace eng = patchbay::engine;
using patchbay::parallel::ParallelRun;
namespace pt = patchbay::parallel::testing;
using pt::quiet;
using pt::setup;

namespace {


const std::string kParallel = "[parallelism]\nkind = \"mpi_data\"\nbucket_mb = 0.002\n";

ParallelRun& world() { return pt::world(kParallel); }

fs::path shared_folder(std::optional<patchbay::testing::TempDir>& owned, const std::string& name) {
  return pt::shared_folder(world(), owned, name);
}

double max_abs_difference(const patchbay::train::Checkpoint& a,
                          const patchbay::train::Checkpoint& b) {
  double worst = 0;
  for (const std::string& name : a.names()) {
    const std::vector<float> x = a.tensor(name).to_vector(), y = b.tensor(name).to_vector();
    REQUIRE(x.size() == y.size());
    for (size_t i = 0; i < x.size(); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(x[i] - y[i])));
  }
  return worst;
}

}  // namespace

TEST_CASE("ZeRO-1 equals plain data parallel (parameters and optimizer state), and resumes on 1") {
  const int64_t w = world().world_size();
  std::optional<patchbay::testing::TempDir> owned;
  const fs::path folder = shared_folder(owned, "zero1");
  if (world().writer()) tt::write_tiny_corpus(folder);
  world().barrier();
  const std::vector<std::string> common = {"train.batch_size=" + std::to_string(2 * w),
                                           "train.grad_clip=0.5", "optimizer.weight_decay=0.1"};
  auto run = [&](const std::string& kind, const std::string& out) {
    std::vector<std::string> o = common;
    o.push_back("parallelism.kind=\"" + kind + "\"");
    o.push_back("train.out_dir=\"" + (folder / out).string() + "\"");
    patchbay::train::train_model(setup().config(tt::tiny_config_text(folder) + kParallel, o),
                                 setup().registry, setup().lookup, quiet());
  };
  run("mpi_data", "dp");
  run("mpi_zero1", "zero");
  world().barrier();
  if (world().writer()) {
    const auto dp = patchbay::train::load_checkpoint(folder / "dp");
    const auto zero = patchbay::train::load_checkpoint(folder / "zero");
    std::vector<std::string> dp_names = dp.names(), zero_names = zero.names();
    std::sort(dp_names.begin(), dp_names.end());
    std::sort(zero_names.begin(), zero_names.end());
    CHECK(dp_names == zero_names);  // the same parameters and optimizer state names
    for (size_t i = 0; i < std::min(dp_names.size(), zero_names.size()); ++i)
      if (dp_names[i] != zero_names[i]) FAIL_CHECK(dp_names[i] << " vs " << zero_names[i]);
    const double diff = max_abs_difference(dp, zero);
    MESSAGE("world ", w,
            ": max |zero1 - data parallel| over parameters and optimizer state: ", diff);
    CHECK(diff < 1e-5);
    std::vector<std::string> o = common;
    o.push_back("train.out_dir=\"" + (folder / "resumed").string() + "\"");
    patchbay::train::TrainRequest resume = quiet();
    resume.resume = folder / "zero" / "checkpoints" / "step_3.safetensors";
    patchbay::train::train_model(setup().config(tt::tiny_config_text(folder), o), setup().registry,
                                 setup().lookup, resume);
    CHECK(max_abs_difference(patchbay::train::load_checkpoint(folder / "resumed"), zero) < 1e-4);
  }
  world().barrier();
}
