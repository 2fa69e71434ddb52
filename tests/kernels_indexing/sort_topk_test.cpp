// Sort / top-k kernels: known answers (stability in both directions, NaN placement),
// agreement with the insertion-sort and selection references on data full of ties, top-k
// equal to the head of a stable sort, and the shared backward pass.
#include "patchbay/kernels/sort_topk.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace pk = patchbay::kernels;

namespace {

// Values from a 9-element set, so most rows have many ties.
std::vector<float> tie_heavy_values(size_t count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int> level(-4, 4);
  std::vector<float> values(count);
  for (auto& v : values) v = 0.5f * float(level(generator));
  return values;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

}  // namespace

TEST_CASE("sort is stable in both directions") {
  const std::vector<float> x = {3, 1, 2, 1};
  std::vector<float> values(4);
  std::vector<int64_t> indices(4);
  pk::sort_last_dim(x.data(), 1, 4, pk::SortOrder::kAscending, values.data(), indices.data());
  CHECK(values == std::vector<float>{1, 1, 2, 3});
  CHECK(indices == std::vector<int64_t>{1, 3, 2, 0});
  pk::sort_last_dim(x.data(), 1, 4, pk::SortOrder::kDescending, values.data(), indices.data());
  CHECK(values == std::vector<float>{3, 2, 1, 1});
  CHECK(indices == std::vector<int64_t>{0, 2, 1, 3});
}

TEST_CASE("negative zero equals zero, so their order is kept (stability)") {
  const std::vector<float> x = {0.0f, -0.0f, -1.5f, 0.0f, -0.0f, 2.0f};
  std::vector<int64_t> indices(6);
  pk::sort_last_dim(x.data(), 1, 6, pk::SortOrder::kAscending, nullptr, indices.data());
  CHECK(indices == std::vector<int64_t>{2, 0, 1, 3, 4, 5});
  pk::sort_last_dim(x.data(), 1, 6, pk::SortOrder::kDescending, nullptr, indices.data());
  CHECK(indices == std::vector<int64_t>{5, 0, 1, 3, 4, 2});
  pk::topk_last_dim(x.data(), 1, 6, 3, false, nullptr, indices.data());
  CHECK(std::vector<int64_t>(indices.begin(), indices.begin() + 3) ==
        std::vector<int64_t>{2, 0, 1});
}

TEST_CASE("NaN sorts as the largest value") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {1, nan, -inf, inf};
  std::vector<int64_t> indices(4);
  pk::sort_last_dim(x.data(), 1, 4, pk::SortOrder::kAscending, nullptr, indices.data());
  CHECK(indices == std::vector<int64_t>{2, 0, 3, 1});
  pk::sort_last_dim(x.data(), 1, 4, pk::SortOrder::kDescending, nullptr, indices.data());
  CHECK(indices == std::vector<int64_t>{1, 3, 0, 2});
  std::vector<float> top(2);
  pk::topk_last_dim(x.data(), 1, 4, 2, true, top.data(), indices.data());
  CHECK(std::isnan(top[0]));
  CHECK(top[1] == inf);
}

TEST_CASE("sort and top-k match the references on tie-heavy rows") {
  const int64_t rows = 40, length = 150;  // rows * length above the threading threshold
  auto x = tie_heavy_values(size_t(rows * length), 7);
  x[17] = std::numeric_limits<float>::quiet_NaN();
  x[18] = -std::numeric_limits<float>::quiet_NaN();  // sign bit set: still the largest
  x[19] = -std::numeric_limits<float>::infinity();
  x[20] = -0.0f;
  for (auto order : {pk::SortOrder::kAscending, pk::SortOrder::kDescending}) {
    std::vector<float> values(x.size()), values_ref(x.size());
    std::vector<int64_t> indices(x.size()), indices_ref(x.size());
    pk::sort_last_dim(x.data(), rows, length, order, values.data(), indices.data());
    pk::sort_last_dim_reference(x.data(), rows, length, order, values_ref.data(),
                                indices_ref.data());
    CHECK(indices == indices_ref);
    CHECK(same_bits(values, values_ref));
  }
  for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{10}, length}) {
    for (bool largest : {true, false}) {
      CAPTURE(k);
      CAPTURE(largest);
      const auto n = size_t(rows * k);
      std::vector<float> values(n), values_ref(n);
      std::vector<int64_t> indices(n), indices_ref(n);
      pk::topk_last_dim(x.data(), rows, length, k, largest, values.data(), indices.data());
      pk::topk_last_dim_reference(x.data(), rows, length, k, largest, values_ref.data(),
                                  indices_ref.data());
      CHECK(indices == indices_ref);
      CHECK(same_bits(values, values_ref));

      // Top-k is the head of the stable sort in the matching direction.
      std::vector<int64_t> sorted(x.size());
      pk::sort_last_dim(x.data(), rows, length,
                        largest ? pk::SortOrder::kDescending : pk::SortOrder::kAscending, nullptr,
                        sorted.data());
      bool head_matches = true;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < k; ++j)
          head_matches &= indices[size_t(r * k + j)] == sorted[size_t(r * length + j)];
      CHECK(head_matches);
    }
  }
}

TEST_CASE("selection backward scatters gradients to the selected positions") {
  // Two rows of length 4, k = 2.
  const std::vector<int64_t> indices = {3, 0, 1, 2};
  const std::vector<float> grad_selected = {10, 20, 30, 40};
  std::vector<float> grad(8, -1.0f);
  pk::selection_backward_last_dim(grad_selected.data(), indices.data(), 2, 4, 2, grad.data());
  CHECK(grad == std::vector<float>{20, 0, 0, 10, 0, 30, 40, 0});
}
