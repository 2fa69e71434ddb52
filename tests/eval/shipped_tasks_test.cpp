// Every shipped task file (configs/tasks/*.yaml) reads, and its committed JSON Lines build
// well-formed items: a prompt, gold answers in range, the documented document counts.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>

#include "eval/task_docs.hpp"

namespace ev = patchbay::eval;
namespace fs = std::filesystem;

TEST_CASE("the shipped tasks read and build their items") {
  const std::map<std::string, size_t> expected = {{"kjv_cloze", 300},
                                                  {"kjv_next_verse", 300},
                                                  {"wordnet_definitions", 300},
                                                  {"kjv_ppl", 20},
                                                  {"kjv_cloze_generate", 300}};
  size_t found = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(PATCHBAY_TASKS_DIR)) {
    if (e.path().extension() != ".yaml") continue;
    const ev::TaskSpec spec = ev::load_task_file(e.path());
    CAPTURE(spec.name);
    REQUIRE(expected.count(spec.name) == 1);
    const ev::TaskRequests r = ev::build_task_requests(spec, std::nullopt, std::nullopt);
    CHECK(r.items.size() == expected.at(spec.name));
    for (const ev::TaskItem& item : r.items) {
      if (spec.output_type == ev::OutputType::kGenerateUntil)
        CHECK_FALSE(item.gold_text.empty());  // generation has a target, no scored continuation
      else
        CHECK_FALSE(item.continuations.empty());
      if (spec.output_type == ev::OutputType::kMultipleChoice) {
        CHECK(item.choices.size() == 4);
        CHECK(item.gold.size() == 1);
      }
    }
    // Few-shot prompts build from the training split (the rolling task takes none).
    if (spec.output_type != ev::OutputType::kLoglikelihoodRolling)
      CHECK(ev::build_task_requests(spec, 3, 5).items[4].prompt.size() > r.items[4].prompt.size());
    ++found;
  }
  CHECK(found == expected.size());
}
