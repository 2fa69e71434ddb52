// Loading a config: parse a TOML file, compose its includes, apply --set overrides.
//
// Composition: a file may hold `include = ["base/small.toml", ...]` (paths relative to
// the including file). The result is every include merged in order, then the file's own
// keys; later wins. Merging is deep for tables; any other value (arrays included) is
// replaced whole. Includes nest; a file that includes itself, directly or through others,
// is an error listing the chain. The `include` key itself is not kept.
//
// Overrides: `path=value` with a dotted key path (`tokenizer.vocab_size=512`,
// `a."b.c"=1`); value is a TOML value (`512`, `0.1`, `true`, `"x"`, `[1, 2]`,
// `{a = 1}`), or else taken as a bare string (`bpe`, `data/kjv`). Missing tables on the
// path are created. Overrides apply after all files, in command-line order.
//
// Every failure throws ConfigError with file:line, key path, expected/found and a fix.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "config/config_document.hpp"

namespace patchbay::config {

// Loads `file` with its includes, then applies `set_overrides` ("path=value" each).
ResolvedConfig load_config(const std::filesystem::path& file,
                           std::span<const std::string> set_overrides = {});

// Parses TOML text as if it were a file named `source_name` (includes are resolved
// relative to `base_dir`). For tests and for configs stored in run directories.
ResolvedConfig load_config_text(std::string_view toml_text, const std::string& source_name,
                                const std::filesystem::path& base_dir = ".");

// Applies one "path=value" override; see the header comment.
void apply_set_override(ResolvedConfig& config, std::string_view assignment);

}  // namespace patchbay::config
