// [train] / [optimizer] validation: unknown keys and components fail with clear messages;
// rules across keys are checked.
#include <doctest/doctest.h>

#include "common/error.hpp"
#include "config/config_error.hpp"
#include "train_fixture.hpp"

using namespace patchbay;
using train::testing::TinySetup;

TEST_CASE("a valid tiny config gives typed [train] options and defaults") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("config_ok");
  const config::ResolvedConfig c = setup.config(train::testing::tiny_config_text(folder));
  const train::TrainOptions o = train::train_options_from_config(c);
  CHECK(o.batch_size == 4);
  CHECK(o.seq_len == 16);
  CHECK(o.grad_accum_steps == 1);  // default
  CHECK(o.schedule.kind == train::LrScheduleKind::kCosine);
  CHECK(o.seed == 7);
  CHECK(c.find("optimizer.adamw.beta2") != nullptr);  // component defaults filled in, in the kind's own table
}

TEST_CASE("an unknown [train] key is an error naming the key") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("config_key");
  try {
    setup.config(train::testing::tiny_config_text(folder), {"train.learning_rate=0.1"});
    FAIL("expected a config error");
  } catch (const patchbay::Error& e) {
    CHECK(std::string(e.what()).find("learning_rate") != std::string::npos);
  }
}

TEST_CASE("an unknown optimizer component is an error naming it and the available ones") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("config_optimizer");
  try {
    setup.config(train::testing::tiny_config_text(folder), {"optimizer.kind=\"adamx\""});
    FAIL("expected a config error");
  } catch (const patchbay::Error& e) {
    const std::string message = e.what();
    CHECK(message.find("adamx") != std::string::npos);
    CHECK(message.find("adamw") != std::string::npos);
  }
  try {
    setup.config(train::testing::tiny_config_text(folder), {"optimizer.momentum=0.9"});  // an sgd key on adamw
    FAIL("expected a config error");
  } catch (const patchbay::Error& e) {
    CHECK(std::string(e.what()).find("momentum") != std::string::npos);
  }
}

TEST_CASE("min_lr above lr is refused") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("config_lr");
  const config::ResolvedConfig c = setup.config(train::testing::tiny_config_text(folder), {"train.min_lr=0.5"});
  CHECK_THROWS_WITH_AS(train::train_options_from_config(c), doctest::Contains("min_lr"), patchbay::Error);
}
