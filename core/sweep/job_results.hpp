// What a finished sweep job scored, recorded in the ledger beside its state
// (ledger.json: jobs.<id>.final): the fields of the last evaluation record of the job's
// metrics.jsonl — step, val_loss, val_ppl, val_bpb, and with [eval] tasks every
// "task.<task>.<metric>" (with its _stderr and items) — and the training speed,
// tokens_per_second (the mean over the training records after the first, whose window holds
// the warm-up, as `patchbay compare` reads it), so a sweep's results can be read per job
// without opening the runs. `patchbay compare` still reads the runs themselves.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace patchbay::sweep {

// The numeric fields of the last record holding "val_loss" whose names are "step", start with
// "val_" or "task." or equal "task_seconds", plus "tokens_per_second" when at least two
// training records carry a speed; an empty object when there is no evaluation (no metrics
// file, or a run that never evaluated).
nlohmann::json final_evaluation(const std::filesystem::path& run_dir);

// "val_loss 2.3141, tokens/s 5120, task.kjv_next_verse.acc 0.3100, ..." (val_loss, val_bpb,
// the speed and the task metrics without their _stderr / items; empty when `final` is).
std::string final_evaluation_summary(const nlohmann::json& final);

}  // namespace patchbay::sweep
