// Component schema lookup for config validation; see component_lookup.hpp.
#include "cli/component_lookup.hpp"

namespace patchbay::cli {

ComponentLookup make_component_lookup(const GlobalOptions& /*global*/, const config::ResolvedConfig& /*config*/) {
  ComponentLookup result;
  result.unavailable_reason = "this build has no plugin registry (core/runtime), so component keys are not checked";
  return result;
}

}  // namespace patchbay::cli
