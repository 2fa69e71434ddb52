// Sampler chains from config: `[[generate.chain]]` entries (an array of tables, so the order
// is explicit and one component may appear twice), the default chain, and the command-line
// overrides of `patchbay generate`.
//
//   [[generate.chain]]
//   name = "temperature"      # the sampler component (patchbay plugins list)
//   temperature = 0.8         # every other key is that component's config
//   [[generate.chain]]
//   name = "top_k"
//   k = 40
//   [[generate.chain]]
//   name = "sample"           # exactly one selector, last
//   seed = 1
//
// Per-kind options (as in component sections, config/component_options.hpp): an entry may
// keep the options of several samplers in tables named after them; the entry's `name` picks
// which one is used, so swapping an entry's sampler is one edit of `name`:
//   [[generate.chain]]
//   name = "top_k"            # or "top_p": the other table is then the one used
//   top_k = {k = 40}
//   top_p = {p = 0.95}
// Flat keys belong to the named sampler and win over its table; the tables of other samplers
// are ignored but checked against their own schema (an unknown sampler or key is an error).
//
// Default chain (no chain in the config): temperature 0.8 -> top_k 40 -> sample(seed), the
// llama.cpp defaults for those knobs in HF's order (temperature before truncation); see
// core/generate/README.md. Each entry is checked against its component's schema (unknown key,
// wrong type, out of range: an error naming `generate.chain[i]`, the component and the
// valid keys), then the chain's shape (runtime::SamplerChain).
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <optional>
#include <string>

#include "runtime/sampler_handle.hpp"

namespace patchbay::runtime {
class Registry;
}

namespace patchbay::generate {

inline constexpr double kDefaultTemperature = 0.8;
inline constexpr int64_t kDefaultTopK = 40;

// The default chain as config entries: temperature -> top_k -> sample(seed).
toml::array default_chain_entries(uint64_t seed);

// Command-line knobs of `patchbay generate`. Applied to a chain's entries: a knob whose
// sampler is in the chain sets its key; top_p / min_p / repetition_penalty that are absent
// are inserted before the selector (after temperature and top_k); temperature <= 0 means
// greedy decoding (the temperature entry and the selector are replaced by "greedy"); seed sets
// the selector's `seed` (an error when the selector has none, e.g. greedy — unless it is
// the default seed the command always passes: see `seed_is_explicit`).
struct SamplerOverrides {
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<uint64_t> seed;
};
void apply_overrides(toml::array& entries, const SamplerOverrides& overrides);

// Builds the chain from entries (each a table with `name`; options flat or per-kind, see
// above), each sampler's view built through config::ComponentConfigView. `label` prefixes the entry
// names in messages ("generate.chain" gives "generate.chain[2]"). Throws
// Error(kInvalidArgument) for a bad entry or shape, Error(kNotFound) for an unknown sampler.
runtime::SamplerChain build_sampler_chain(const toml::array& entries, runtime::Registry& registry,
                                          const std::string& label = "generate.chain");

// The `generate.chain` array of a parsed TOML document, or nullopt when it has none. Throws
// Error(kInvalidArgument) when generate.chain is not an array of tables.
std::optional<toml::array> chain_entries_from_toml(const toml::table& document);

}  // namespace patchbay::generate
