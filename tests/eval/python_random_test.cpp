// PythonRandom against values CPython 3.11 printed:
//   r = random.Random(1234); r.getrandbits(32), r.getrandbits(32) -> 4150886329, 3342196574
//   r = random.Random(1234); r.sample(range(10), 3), r.sample(range(10), 3) -> [7, 1, 0], [1, 0, 9]
//   random.Random(1234).sample(range(100), 7) -> [99, 56, 14, 0, 11, 74, 4]   (the set branch)
//   random.Random(0).sample(range(5), 5) -> [3, 4, 0, 1, 2]
//   random.Random(42).sample(range(1000), 8) -> [654, 114, 25, 759, 281, 250, 228, 142]
#include "eval/python_random.hpp"

#include <doctest/doctest.h>

#include "common/error.hpp"

using patchbay::eval::PythonRandom;
using V = std::vector<int64_t>;

TEST_CASE("PythonRandom reproduces CPython's Mersenne Twister seeding and getrandbits") {
  PythonRandom r(1234);
  CHECK(r.getrandbits(32) == 4150886329u);
  CHECK(r.getrandbits(32) == 3342196574u);
}

TEST_CASE("sample_indices reproduces random.sample in both of its branches") {
  PythonRandom r(1234);
  CHECK(r.sample_indices(10, 3) == V{7, 1, 0});
  CHECK(r.sample_indices(10, 3) == V{1, 0, 9});  // the generator advances: lm-eval's per-doc draws
  CHECK(PythonRandom(1234).sample_indices(100, 7) == V{99, 56, 14, 0, 11, 74, 4});
  CHECK(PythonRandom(0).sample_indices(5, 5) == V{3, 4, 0, 1, 2});
  CHECK(PythonRandom(42).sample_indices(1000, 8) == V{654, 114, 25, 759, 281, 250, 228, 142});
  CHECK_THROWS_AS(PythonRandom(1).sample_indices(3, 4), patchbay::Error);
}
