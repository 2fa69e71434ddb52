// ALiBi slopes for any head count; see alibi_slopes.hpp.
#include "alibi_slopes.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace patchbay_dense {
namespace {

// 2^(-8(h+1)/n) for h = 0..n-1, n a power of two.
std::vector<double> power_of_two_slopes(int64_t n) {
  std::vector<double> slopes;
  for (int64_t h = 0; h < n; ++h)
    slopes.push_back(std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(n)));
  return slopes;
}

}  // namespace

std::vector<double> alibi_slopes(int64_t n_heads) {
  if (n_heads < 1)
    throw std::invalid_argument("ALiBi needs at least one head, found n_heads = " +
                                std::to_string(n_heads));
  int64_t closest = 1;  // largest power of two <= n_heads
  while (closest * 2 <= n_heads) closest *= 2;
  std::vector<double> slopes = power_of_two_slopes(closest);
  if (closest == n_heads) return slopes;
  const std::vector<double> doubled = alibi_slopes(2 * closest);
  for (int64_t h = 0; static_cast<int64_t>(slopes.size()) < n_heads; h += 2)
    slopes.push_back(doubled[static_cast<size_t>(h)]);
  return slopes;
}

}  // namespace patchbay_dense
