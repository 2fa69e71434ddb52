// Printing a resolved config back as TOML (`patchbay config show`, the copy stored in each
// run directory). Reading the output back gives the same document: plain values first,
// then one [header] per sub-table (inline tables come out as standard tables). Ignored
// per-kind tables, when printed, read back as per-kind tables (ignored again).
#pragma once

#include <string>

#include "config/config_document.hpp"

namespace patchbay::config {

struct PrintOptions {
  // Ends each line with "# file:line" saying where the value (or table) came from.
  bool with_sources = false;
  // Also prints the per-kind options tables set aside as unused (ResolvedConfig::ignored()),
  // each after its section's tables, its header marked "# ignored: <reason>". Off for what a
  // run stores, which holds only what was used; on for `patchbay config show`.
  bool show_ignored = false;
};

std::string to_toml(const ResolvedConfig& config, const PrintOptions& options = {});

}  // namespace patchbay::config
