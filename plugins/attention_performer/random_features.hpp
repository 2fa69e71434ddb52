// FAVOR+ random feature matrices (Choromanski et al. 2021, "Rethinking Attention with
// Performers"): m rows omega_f in R^d, drawn as independent d x d blocks of Gaussian vectors
// orthogonalised by Gram-Schmidt (the last block truncated to the remaining rows), each row
// then rescaled to the norm of a fresh Gaussian d-vector (chi_d distributed norms, lucidrains'
// `scaling = 0`), so every row is marginally N(0, I_d) and rows within a block are exactly
// orthogonal. Deterministic from (seed, draw): every rank of a data-parallel run that has
// seen the same number of training steps draws the same matrix.
#pragma once

#include <cstdint>
#include <vector>

namespace patchbay_performer {

// Row-major [m, d] in float (drawn and orthogonalised in double). m >= 1, d >= 1.
std::vector<float> draw_orthogonal_features(int64_t m, int64_t d, uint64_t seed, uint64_t draw);

// floor(d ln d), at least 1: the default number of features (lucidrains' nb_features).
int64_t default_feature_count(int64_t d);

}  // namespace patchbay_performer
