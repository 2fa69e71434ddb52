// Shared pieces of the MPI tests (ctest runs each under mpirun): one plugin registry and one
// process group per process, rank 0's temporary folder known to every rank, quiet requests.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../train/train_fixture.hpp"
#include "engine/tensor.hpp"
#include "parallel/parallel_run.hpp"
#include "train/trainer.hpp"

namespace patchbay::parallel::testing {

// One registry for the process: MPI starts once and ends when the plugin unloads at exit.
inline train::testing::TinySetup& setup() {
  static auto* s = new train::testing::TinySetup();
  return *s;
}

// The process group for the test's own coordination (path broadcast, barriers), made from the
// tiny config plus `parallelism_section` by the first call; later calls return the same group.
inline ParallelRun& world(const std::string& parallelism_section) {
  static std::unique_ptr<ParallelRun> run = [&] {
    const config::ResolvedConfig c =
        setup().config(train::testing::tiny_config_text("/nonexistent") + parallelism_section);
    return ParallelRun::from_config(c, setup().registry, train::make_training_schema(),
                                    setup().lookup);
  }();
  return *run;
}

// Rank 0's temporary folder (owned by rank 0's `owned`), known to every rank: the path is
// broadcast as bytes over `group`.
inline std::filesystem::path shared_folder(ParallelRun& group,
                                           std::optional<patchbay::testing::TempDir>& owned,
                                           const std::string& name) {
  std::vector<int32_t> bytes(512, 0);
  if (group.writer()) {
    owned.emplace("parallel_" + name);
    const std::string p = owned->path().string();
    REQUIRE(p.size() < bytes.size());
    for (size_t i = 0; i < p.size(); ++i) bytes[i] = static_cast<unsigned char>(p[i]);
  }
  engine::Tensor t = engine::Tensor::from_data(bytes.data(), {512}, engine::DType::kI32);
  group.group().broadcast(t, 0);
  std::string p;
  for (int64_t i = 0; i < 512 && t.data<int32_t>()[i] != 0; ++i)
    p += static_cast<char>(t.data<int32_t>()[i]);
  return p;
}

inline train::TrainRequest quiet() {
  train::TrainRequest r;
  r.show_progress = false;
  r.print_samples = false;
  return r;
}

}  // namespace patchbay::parallel::testing
