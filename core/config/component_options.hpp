// Per-kind options of component sections: where the options of each component a section
// uses come from, and the canonical form a resolved config stores.
//
// A component section ([tokenizer], [optimizer], [model.attention], ...) names its component
// with `kind` and, for model layers, more components with `pattern`. Options reach a
// component in two ways:
//
//   [optimizer]
//   kind = "adamw"
//   weight_decay = 0.1     # flat key: an option of the `kind` component (the original form)
//   [optimizer.adamw]      # per-kind table, named after a component:
//   beta2 = 0.99           #   used when adamw is `kind` or in `pattern`,
//   [optimizer.sgd]        #   ignored otherwise (still checked against sgd's schema),
//   momentum = 0.9         #   so `--set optimizer.kind=sgd` swaps in one override
//
// A component's options = its per-kind table, with the flat keys laid over it when the
// component is `kind` (a flat key wins: `--set optimizer.beta2=0.95` still works on a config
// that keeps beta2 in [optimizer.adamw]). Each component in `pattern` takes its options from
// its own table. Tables are never option values (options are bools, numbers, strings or
// string arrays), so a table inside a component section is always a per-kind table (or a
// child section the host declares).
//
// Canonical form (what apply_defaults leaves and a run stores): the section's host keys
// (`kind`, `pattern`) plus one per-kind table for each used component, holding every option
// (flat keys moved into the kind's table); unused per-kind tables are set aside in
// ResolvedConfig::ignored(). Resolving a canonical config again changes nothing.
#pragma once

#include <toml++/toml.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/config_document.hpp"
#include "config/schema_registry.hpp"

namespace patchbay::config {

// The host key of model layer sections listing the components cycled over the blocks.
inline constexpr const char* kComponentPatternKey = "pattern";

// The keys a component section's host declares (`kind`, and `pattern` where declared).
std::vector<std::string> host_key_names(const HostSection& section);

// The components a component section table uses, each once: `kind` (when a string), then the
// string entries of `pattern` when `pattern` is one of `host_keys`.
// `also_used` (kinds_used_elsewhere) are appended when not listed already.
std::vector<std::string> used_component_names(const toml::table& section,
                                              std::span<const std::string> host_keys,
                                              std::span<const std::string> also_used = {});

// Kinds of the component section at `section_path` that the config names outside it, so that
// their per-kind tables are used (validated, defaulted, kept) rather than ignored: an
// encoder-decoder ([model] architecture = "encoder_decoder") names its cross-attention in
// model.cross_attention ("model.attention") and its feed-forward kinds per stack in
// model.encoder_feedforward / model.decoder_feedforward ("model.feedforward"). `root` is the
// whole config table; empty for every other section.
std::vector<std::string> kinds_used_elsewhere(const toml::table& root,
                                              std::string_view section_path);

// The options of component `name` in a component section table: a copy of its per-kind table
// (when present), with the flat keys (non-table values whose key is not a host key) laid over
// it when `name` is the section's `kind` (`selector_key`: sampler chain entries select with
// `name`). Works on raw and canonical tables alike.
toml::table component_options(const toml::table& section, std::string_view name,
                              std::span<const std::string> host_keys,
                              std::string_view selector_key = kComponentSelectorKey);

// Rewrites the component section at `section_path` (a table of `config`) into canonical form
// (see above), moving the sources of flat keys with them and appending unused per-kind tables
// to config.ignored(). `kind_label` names the component kind in the reasons ("optimizer").
void canonicalize_component_section(ResolvedConfig& config, toml::table& section,
                                    const std::string& section_path,
                                    std::span<const std::string> host_keys,
                                    const std::string& kind_label);

// Problems with `options` as the options of a component whose schema is `fields`, one
// sentence each: an unknown key (with the closest names and the valid keys), a wrong type, a
// value out of range or not among the choices, and (when `check_required`) a missing
// required key. For options that did not go through validate_config (sampler chains,
// hand-built tables); configs get the located issues of the validator instead.
std::vector<std::string> option_problems(const toml::table& options,
                                         std::span<const pb_config_field> fields,
                                         bool check_required);

}  // namespace patchbay::config
