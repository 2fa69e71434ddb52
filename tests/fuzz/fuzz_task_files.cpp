// lm-eval-shaped task files (core/eval): the YAML task spec and the JSON Lines documents it
// names, through build_task_requests (templates, choices, targets, few-shot sampling). The
// input is split at its first NUL byte: the YAML before it, the documents after it, written
// as docs.jsonl in a scratch folder the YAML's relative data_files resolve against (the seed
// corpus names docs.jsonl for every split).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "common/error.hpp"
#include "eval/task_docs.hpp"
#include "eval/task_spec.hpp"
#include "fuzz_input.hpp"

namespace {

const std::filesystem::path& scratch_folder() {
  static const std::filesystem::path folder = [] {
    const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                       ("patchbay_fuzz_task_" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    return path;
  }();
  return folder;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = patchbay_fuzz::text(data, size);
  const size_t nul = input.find('\0');
  const std::string yaml(input.substr(0, nul));
  const std::string_view docs =
      nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  {
    std::ofstream out(scratch_folder() / "docs.jsonl", std::ios::binary | std::ios::trunc);
    out.write(docs.data(), static_cast<std::streamsize>(docs.size()));
  }
  try {
    const patchbay::eval::TaskSpec spec =
        patchbay::eval::parse_task_yaml(yaml, "fuzz task.yaml", scratch_folder());
    (void)patchbay::eval::effective_metrics(spec);
    (void)patchbay::eval::build_task_requests(spec, std::nullopt, int64_t{16});
  } catch (const patchbay::Error&) {
  }
  return 0;
}
