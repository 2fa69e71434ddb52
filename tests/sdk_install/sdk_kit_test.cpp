// The plugin authoring path of a third party, end to end, from an installed prefix only:
//   1. cmake --install <this build> --prefix <scratch>/prefix (SDK, patchbay::testing, CLI,
//      built-in plugins);
//   2. <prefix>/bin/patchbay plugin new KIND kit_KIND for every kind;
//   3. one configure + build (no build type given: Release must be the default) of the SDK
//      examples, the six scaffolds and a copy of the attention example with a one-position
//      future leak, as subdirectories of a scratch project that only does find_package;
//   4. ctest: every kit passes on the examples and scaffolds, and the leaky copy fails its kit;
//   5. `patchbay plugins describe` on the example .so shows what it declares;
//   6. a few training steps with the examples (local attention, geglu, lion) and with the
//      attention scaffold selected by --set model.attention.kind; generate on that run with no
//      --plugin-path; with the plugin file moved away, a clear error naming it.
// Each step's output goes to <scratch>/<step>.log, printed on failure. The scratch folder is
// removed at the end (kept when a step fails, for inspection; the next run clears it).
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace fs = std::filesystem;

namespace {

const fs::path kScratch = PATCHBAY_KIT_SCRATCH_DIR;
const char* const kKinds[] = {"tokenizer", "attention", "feedforward", "optimizer", "sampler", "parallelism"};
const char* const kExamples[] = {"hello_tokenizer", "local_attention", "geglu_feedforward", "lion_optimizer",
                                 "epsilon_sampler"};

std::string quoted(const fs::path& p) {
  std::string out(1, '\'');
  out.append(p.string());
  out.push_back('\'');
  return out;
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file);
  out << text;
}

// Runs `command` with output to <scratch>/<step>.log; returns the exit status and the output.
std::pair<int, std::string> run(const std::string& step, const std::string& command) {
  const fs::path log = kScratch / (step + ".log");
  const int status = std::system((command + " > " + quoted(log) + " 2>&1").c_str());
  return {status, read_text(log)};
}

std::string run_ok(const std::string& step, const std::string& command) {
  auto [status, output] = run(step, command);
  INFO("step '", step, "' ran: ", command, "\n--- output ---\n", output);
  REQUIRE(status == 0);
  return output;
}

void replace_in_file(const fs::path& file, const std::string& from, const std::string& to) {
  std::string text = read_text(file);
  const size_t at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "'", from, "' not found in ", file.string());
  text.replace(at, from.size(), to);
  write_text(file, text);
}

}  // namespace

TEST_CASE("every kind: example and scaffold built, checked, loaded and trained from an installed prefix") {
  const fs::path prefix = kScratch / "prefix", build = kScratch / "build", scaffolds = kScratch / "scaffolds";
  fs::remove_all(kScratch);
  fs::create_directories(scaffolds);
  const std::string cmake = quoted(PATCHBAY_CMAKE_COMMAND);
  // The installed CLI as a user runs it: ctest's PATCHBAY_PLUGIN_PATH (this build's plugin
  // folder) must not leak in.
  const std::string patchbay = "env -u PATCHBAY_PLUGIN_PATH " + quoted(prefix / "bin/patchbay");

  run_ok("install", cmake + " --install " + quoted(PATCHBAY_BUILD_DIR) + " --prefix " + quoted(prefix));
  REQUIRE(fs::exists(prefix / "lib/libpatchbay_testing.so"));
  REQUIRE(fs::exists(prefix / "lib/cmake/Patchbay/PatchbayTestingTargets.cmake"));
  REQUIRE(fs::exists(prefix / "lib/patchbay/plugins/attention_dense.so"));

  for (const char* kind : kKinds)
    run_ok(std::string("new_") + kind, patchbay + " plugin new " + kind + " kit_" + kind + " " +
                                           quoted(scaffolds / (std::string("kit_") + kind)));
  CHECK(fs::exists(scaffolds / "kit_attention/kit_attention.cpp"));
  CHECK(fs::exists(scaffolds / "kit_attention/README.md"));
  CHECK(run("new_again", patchbay + " plugin new attention kit_attention " + quoted(scaffolds / "kit_attention"))
            .first != 0);  // an existing folder is never overwritten

  // The broken copy: the attention example whose mask lets each query see one future key.
  const fs::path broken = kScratch / "broken_attention";
  fs::copy(fs::path(PATCHBAY_SOURCE_DIR) / "sdk/examples/local_attention", broken);
  fs::rename(broken / "local_attention.cpp", broken / "broken_attention.cpp");
  std::string cmakelists = read_text(broken / "CMakeLists.txt");
  for (size_t at = cmakelists.find("local_attention"); at != std::string::npos;
       at = cmakelists.find("local_attention", at))
    cmakelists.replace(at, 15, "broken_attention");
  write_text(broken / "CMakeLists.txt", cmakelists);
  replace_in_file(broken / "broken_attention.cpp", "j > p ||", "j > p + 1 ||");
  replace_in_file(broken / "broken_attention.cpp", "kPreferFusedWindowOp = true", "kPreferFusedWindowOp = false");

  std::string project =
      "cmake_minimum_required(VERSION 3.20)\nproject(sdk_kit_check LANGUAGES CXX)\n"
      "find_package(Patchbay 0.1 REQUIRED)\nenable_testing()\n";
  for (const char* example : kExamples)
    project += "add_subdirectory(\"" + (fs::path(PATCHBAY_SOURCE_DIR) / "sdk/examples" / example).string() + "\" " +
               example + ")\n";
  for (const char* kind : kKinds)
    project += "add_subdirectory(\"" + (scaffolds / (std::string("kit_") + kind)).string() + "\" kit_" + kind + ")\n";
  project += "add_subdirectory(\"" + broken.string() + "\" broken_attention)\n";
  write_text(kScratch / "CMakeLists.txt", project);

  run_ok("configure", cmake + " -S " + quoted(kScratch) + " -B " + quoted(build) + " -G " +
                          quoted(PATCHBAY_CMAKE_GENERATOR) + " -DCMAKE_CXX_COMPILER=" + quoted(PATCHBAY_CXX_COMPILER) +
                          " -DCMAKE_PREFIX_PATH=" + quoted(prefix) + " -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF" +
                          PATCHBAY_LAUNCHER_OPTION);
  CHECK(read_text(build / "CMakeCache.txt").find("CMAKE_BUILD_TYPE:STRING=Release") != std::string::npos);
  run_ok("build", cmake + " --build " + quoted(build));
  const std::string kits = run_ok("kits", "ctest --test-dir " + quoted(build) + " --output-on-failure -E broken");
  CHECK(kits.find("100% tests passed") != std::string::npos);
  CHECK(kits.find("kit_parallelism_conformance") != std::string::npos);
  const auto [leak_status, leak_output] = run("broken_kit", "ctest --test-dir " + quoted(build) + " --output-on-failure -R broken");
  INFO(leak_output);
  CHECK(leak_status != 0);  // the kit catches the future leak
  CHECK(leak_output.find("causal") != std::string::npos);

  const fs::path local_so = build / "local_attention/local_attention.so";
  const std::string described = run_ok("describe", patchbay + " --plugin-path " + quoted(local_so) + " plugins describe local");
  CHECK(described.find("capabilities: causal, rotary") != std::string::npos);
  CHECK(described.find("cache:        kv") != std::string::npos);
  CHECK(described.find("complexity:") != std::string::npos);
  CHECK(described.find("attention interface 1.") != std::string::npos);
  CHECK(described.find("window") != std::string::npos);

  // Training: a tiny corpus, two layers, a few steps.
  // 64 distinct sentences, each 25 times (the split is by line, so validation gets some too).
  const char* subjects[] = {"the cat", "a dog", "the bird", "my fish"};
  const char* verbs[] = {"sat on", "ran to", "looked at", "slept by"};
  const char* objects[] = {"the mat.", "the door.", "a tree.", "the river."};
  std::string corpus;
  for (int i = 0; i < 1600; ++i)
    corpus += std::string(subjects[i % 4]) + " " + verbs[(i / 4) % 4] + " " + objects[(i / 16) % 4] + "\n";
  write_text(kScratch / "corpus.txt", corpus);
  const std::string config =
      "[data]\ncorpus = \"" + (kScratch / "corpus.txt").string() + "\"\nvalidation_fraction = 0.2\noutput_dir = \"" +
      (kScratch / "data").string() +
      "\"\n[tokenizer]\nkind = \"char\"\n[model]\ncontext_length = 32\nn_layers = 2\nn_heads = 2\nd_model = 32\n"
      "[model.attention]\nkind = \"dense\"\n[model.feedforward]\nkind = \"mlp\"\n[optimizer]\nkind = \"adamw\"\n"
      "[train]\nbatch_size = 4\nseq_len = 16\nmax_steps = 4\nlr = 0.01\nwarmup_steps = 1\neval_every = 4\n"
      "eval_batches = 1\ncheckpoint_every = 4\nlog_every = 1\nsample_tokens = 4\n";
  const fs::path examples_run = kScratch / "runs/examples", scaffold_run = kScratch / "runs/scaffold";
  write_text(kScratch / "examples.toml", config + "out_dir = \"" + examples_run.string() + "\"\n");
  write_text(kScratch / "scaffold.toml", config + "out_dir = \"" + scaffold_run.string() + "\"\n");
  run_ok("train_examples",
         patchbay + " --plugin-path " + quoted(build / "local_attention") + " --plugin-path " +
             quoted(build / "geglu_feedforward") + " --plugin-path " + quoted(build / "lion_optimizer") + " train " +
             quoted(kScratch / "examples.toml") + " --no-progress --set model.attention.kind=local --set " +
             "model.attention.window=4 --set model.feedforward.kind=geglu --set optimizer.kind=lion");
  CHECK(fs::exists(examples_run / "checkpoints/latest"));
  CHECK(read_text(kScratch / "train_examples.log").find("already loaded") == std::string::npos);
  const fs::path kit_attention_so = build / "kit_attention/kit_attention.so";
  run_ok("train_scaffold", patchbay + " --plugin-path " + quoted(kit_attention_so) + " train " +
                               quoted(kScratch / "scaffold.toml") + " --no-progress --set model.attention.kind=kit_attention");

  // The run remembers its plugin: no --plugin-path needed to generate from it.
  const std::string generated =
      run_ok("generate", patchbay + " generate " + quoted(scaffold_run) + " --prompt 'the ' --max-new-tokens 6");
  CHECK(!generated.empty());
  run_ok("eval", patchbay + " eval " + quoted(examples_run));
  // Moved away: a clear error naming the file it came from.
  fs::rename(kit_attention_so, kScratch / "moved.so");
  const auto [moved_status, moved_output] =
      run("generate_moved", patchbay + " generate " + quoted(scaffold_run) + " --prompt 'the ' --max-new-tokens 6");
  CHECK(moved_status != 0);
  CHECK(moved_output.find(kit_attention_so.string()) != std::string::npos);
  CHECK(moved_output.find("no longer exists") != std::string::npos);
  // Given its new place, it works again.
  run_ok("generate_moved_path", patchbay + " --plugin-path " + quoted(kScratch / "moved.so") + " generate " +
                                    quoted(scaffold_run) + " --prompt 'the ' --max-new-tokens 6");

  fs::remove_all(kScratch);
}
