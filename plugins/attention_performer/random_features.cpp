// draw_orthogonal_features (random_features.hpp): Gaussian blocks, modified Gram-Schmidt in
// double, chi-distributed row norms. std::mt19937_64 and a Box-Muller transform written here,
// so the draw is the same with every standard library.
#include "random_features.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace patchbay_performer {
namespace {

// Standard normal variates from a 64-bit Mersenne twister by Box-Muller (both outputs used).
class Gaussian {
 public:
  explicit Gaussian(uint64_t seed) : rng_(seed) {}
  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double two_pi = 6.283185307179586;
    double u1 = 0.0;
    while (u1 <= 0.0) u1 = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
    const double u2 = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(two_pi * u2);
    has_spare_ = true;
    return r * std::cos(two_pi * u2);
  }

 private:
  std::mt19937_64 rng_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

uint64_t mix(uint64_t x) {  // splitmix64 finaliser: decorrelates (seed, draw) pairs
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

int64_t default_feature_count(int64_t d) {
  const double value = std::floor(static_cast<double>(d) * std::log(static_cast<double>(d)));
  return value < 1.0 ? 1 : static_cast<int64_t>(value);
}

std::vector<float> draw_orthogonal_features(int64_t m, int64_t d, uint64_t seed, uint64_t draw) {
  Gaussian gaussian(mix(seed ^ mix(draw + 0x5eed)));
  std::vector<float> out(static_cast<size_t>(m * d));
  std::vector<double> block(static_cast<size_t>(d * d));
  for (int64_t start = 0; start < m; start += d) {
    const int64_t rows = std::min(d, m - start);
    // Gaussian rows, orthonormalised in order (modified Gram-Schmidt); a row that collapses
    // (probability zero) is redrawn.
    for (int64_t r = 0; r < rows; ++r) {
      double* row = block.data() + r * d;
      double norm = 0.0;
      while (norm < 1e-8) {
        for (int64_t i = 0; i < d; ++i) row[i] = gaussian.next();
        for (int64_t p = 0; p < r; ++p) {
          const double* prev = block.data() + p * d;
          double dot = 0.0;
          for (int64_t i = 0; i < d; ++i) dot += row[i] * prev[i];
          for (int64_t i = 0; i < d; ++i) row[i] -= dot * prev[i];
        }
        norm = 0.0;
        for (int64_t i = 0; i < d; ++i) norm += row[i] * row[i];
        norm = std::sqrt(norm);
      }
      // chi_d norm: the length of an independent Gaussian vector.
      double chi = 0.0;
      for (int64_t i = 0; i < d; ++i) {
        const double g = gaussian.next();
        chi += g * g;
      }
      chi = std::sqrt(chi);
      for (int64_t i = 0; i < d; ++i) {
        row[i] /= norm;
        out[static_cast<size_t>((start + r) * d + i)] = static_cast<float>(row[i] * chi);
      }
    }
  }
  return out;
}

}  // namespace patchbay_performer
