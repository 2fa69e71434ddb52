// mirostat_v2 truncation: the first descending position whose surprise -log2 p exceeds mu
// ends the kept prefix (llama.cpp's find_if); an empty prefix becomes the top token.
#include "mirostat_v2.hpp"

#include <cmath>

namespace sampler_basic {

size_t MirostatV2::truncation(RankedCandidates& candidates, size_t) const {
  size_t k = 0;
  while (k < candidates.size() && -std::log2(candidates.prob(k)) <= mu()) ++k;
  return k == 0 ? 1 : k;
}

}  // namespace sampler_basic
