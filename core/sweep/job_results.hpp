// What a finished sweep job scored, recorded in the ledger beside its state
// (ledger.json: jobs.<id>.final): the fields of the last evaluation record of the job's
// metrics.jsonl — step, val_loss, val_ppl, val_bpb, and with [eval] tasks every
// "task.<task>.<metric>" (with its _stderr and items) — so a sweep's results can be read per
// job without opening the runs. `patchbay compare` still reads the runs themselves.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace patchbay::sweep {

// The numeric fields of the last record holding "val_loss" whose names are "step", start with
// "val_" or "task." or equal "task_seconds"; an empty object when there is none (no metrics
// file, or a run that never evaluated).
nlohmann::json final_evaluation(const std::filesystem::path& run_dir);

// "val_loss 2.3141, task.kjv_next_verse.acc 0.3100, ..." (val_loss, val_bpb and the task
// metrics without their _stderr / items; empty when `final` is).
std::string final_evaluation_summary(const nlohmann::json& final);

}  // namespace patchbay::sweep
