// The T5 interop through the `patchbay` executable: `train` a tiny encoder-decoder, `export
// --format hf`, `import` the export, and `logits --source-ids ... --ids ...` of both runs must be
// equal bit for bit (d_head 16: the q scaling round-trips exactly); the refusals: `logits`
// without a source for an encoder-decoder run and with one for a single-stack run, and the
// export of a cross-attention with trained biases (exit 1, the tensor named).
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "../command_runner.hpp"
#include "../train/train_fixture.hpp"
#include "run/safetensors.hpp"

namespace {

using Result = patchbay::testing::CommandResult;
namespace fs = std::filesystem;

Result run_patchbay(const std::string& arguments) {
  return patchbay::testing::run_patchbay(arguments + " 2>&1", "OMP_NUM_THREADS=1");
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const char* kT5Overrides =
    " --set 'model.architecture=\"encoder_decoder\"' --set 'model.positional=\"t5_relative\"'"
    " --set 'model.norm=\"rmsnorm\"' --set model.relative_attention_num_buckets=8"
    " --set 'train.objective=\"span_corruption\"' --set train.span_corruption.sentinels=8"
    " --set model.feedforward.bias=false --set train.max_steps=3 --set train.checkpoint_every=3"
    " --no-progress";

std::vector<float> logits_of(const fs::path& file) {
  const patchbay::run::SafetensorsFile st(file);
  const auto& t = st.tensor("logits");
  const auto* data = reinterpret_cast<const float*>(t.data.data());
  return std::vector<float>(data, data + t.data.size() / sizeof(float));
}

}  // namespace

TEST_CASE("patchbay export / import / logits of an encoder-decoder as T5ForConditionalGeneration") {
  const auto folder = patchbay::train::testing::fresh_folder("t5_cli");
  patchbay::train::testing::write_tiny_corpus(folder);
  const std::string config = (folder / "t5.toml").string();
  std::ofstream(config) << patchbay::train::testing::tiny_config_text(folder);
  const std::string run = (folder / "run").string(), hf = (folder / "hf").string(),
                    imported = (folder / "imported").string();
  const Result trained =
      run_patchbay("train '" + config + "'" + kT5Overrides + " --set model.attention.bias=false");
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const Result exported = run_patchbay("export '" + run + "' --format hf '" + hf + "'");
  INFO(exported.output);
  REQUIRE(exported.exit_code == 0);
  CHECK(contains(exported.output, "as T5ForConditionalGeneration"));
  const Result import = run_patchbay("import '" + hf + "' '" + imported + "'");
  INFO(import.output);
  REQUIRE(import.exit_code == 0);
  CHECK(contains(import.output, "T5ForConditionalGeneration"));

  const std::string ids = " --source-ids 3,1,4,1,5,9,2,6,5,3 --ids 0,2,7,1,8 --out ";
  const fs::path a = folder / "a.safetensors", b = folder / "b.safetensors";
  const Result la = run_patchbay("logits '" + run + "'" + ids + "'" + a.string() + "'");
  INFO(la.output);
  REQUIRE(la.exit_code == 0);
  CHECK(contains(la.output, "(source 10 ids)"));
  REQUIRE(run_patchbay("logits '" + imported + "'" + ids + "'" + b.string() + "'").exit_code == 0);
  const std::vector<float> before = logits_of(a), after = logits_of(b);
  CHECK(before.size() % 5 == 0);
  CHECK(before == after);

  const Result no_source = run_patchbay("logits '" + run + "' --ids 0,2 --out '" +
                                        (folder / "c.safetensors").string() + "'");
  CHECK(no_source.exit_code != 0);
  CHECK(contains(no_source.output, "holds an encoder-decoder; give its source with --source-ids"));

  // Trained cross-attention biases have no T5 counterpart: refused naming the tensor.
  const std::string biased = (folder / "biased").string();
  REQUIRE(run_patchbay("train '" + config + "'" + kT5Overrides + " --set 'train.out_dir=\"" +
                       biased + "\"'")
              .exit_code == 0);
  const Result refused =
      run_patchbay("export '" + biased + "' --format hf '" + (folder / "hf2").string() + "'");
  CHECK(refused.exit_code == 1);
  CHECK(contains(refused.output, "'decoder.blocks.0.cross_attn.qkv.bias' is not zero"));

  // A single-stack run given a source.
  const std::string clm_config = (folder / "clm.toml").string();
  std::ofstream(clm_config) << patchbay::train::testing::tiny_config_text(folder);
  const std::string clm = (folder / "clm").string();
  REQUIRE(run_patchbay("train '" + clm_config +
                       "' --set train.max_steps=2 --set "
                       "train.checkpoint_every=2 --no-progress --set 'train.out_dir=\"" +
                       clm + "\"'")
              .exit_code == 0);
  const Result single = run_patchbay("logits '" + clm + "' --source-ids 1,2 --ids 1,2 --out '" +
                                     (folder / "d.safetensors").string() + "'");
  CHECK(single.exit_code != 0);
  CHECK(contains(single.output, "--source-ids / --source are for encoder-decoder runs"));
}
