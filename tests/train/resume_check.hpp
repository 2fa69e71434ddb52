// The bit-identical resume check the objective tests share: a run trained straight against the
// same run interrupted at step 3 and resumed from its step-3 checkpoint.
#pragma once

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/checkpoint.hpp"
#include "train/trainer.hpp"
#include "train_fixture.hpp"

namespace patchbay::train::testing {

// `overrides` must give train.max_steps > 3 and train.checkpoint_every = 3. Trains them into
// folder/straight in one go, and into folder/resumed stopped before step 3 and resumed: the
// resumed run starts at step 3, ends on the same loss, and every checkpoint tensor is equal
// byte for byte.
inline void check_resume_bit_identical(TinySetup& setup, const std::string& text,
                                       const std::vector<std::string>& overrides,
                                       const std::filesystem::path& folder,
                                       const TrainRequest& quiet) {
  std::vector<std::string> straight = overrides, resumed = overrides;
  straight.push_back("train.out_dir=\"" + (folder / "straight").string() + "\"");
  resumed.push_back("train.out_dir=\"" + (folder / "resumed").string() + "\"");
  const TrainSummary full =
      train_model(setup.config(text, straight), setup.registry, setup.lookup, quiet);
  const config::ResolvedConfig resumed_config = setup.config(text, resumed);
  TrainRequest stop_at_3 = quiet;
  stop_at_3.before_step = [](int64_t step, const std::vector<model::NamedParameter>&) {
    if (step == 3) throw std::runtime_error("interrupted");
  };
  CHECK_THROWS_WITH(train_model(resumed_config, setup.registry, setup.lookup, stop_at_3),
                    "interrupted");
  TrainRequest resume = quiet;
  resume.resume = folder / "resumed";
  const TrainSummary second = train_model(resumed_config, setup.registry, setup.lookup, resume);
  CHECK(second.start_step == 3);
  CHECK(second.last_loss == full.last_loss);
  const Checkpoint a = load_checkpoint(folder / "straight"),
                   b = load_checkpoint(folder / "resumed");
  REQUIRE(a.names() == b.names());
  for (const std::string& name : a.names()) {
    const engine::Tensor x = a.tensor(name), y = b.tensor(name);
    INFO("tensor " << name);
    REQUIRE(x.nbytes() == y.nbytes());
    CHECK(std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0);
  }
}

}  // namespace patchbay::train::testing
