// CPU tests of the bf16 flash attention's CPU twin (attention_bf16_reference.hpp), the
// algorithm the tensor-core kernels run (their tiling, online softmax and rounding points, via
// the shared math/flash_bf16.hpp): against the plain double-precision reference
// (attention_reference.hpp) on the same bf16-rounded inputs, forward and gradients, within
// bf16 tolerance (relative norm); causality and segment isolation exactly (bit for bit); packed
// segments against independent per-segment references. Ragged T (not multiples of the 64-row
// tiles), T = 1, head dims 64 and 128.
#include <doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "patchbay/kernels/cuda/attention_bf16_reference.hpp"
#include "patchbay/kernels/cuda/attention_reference.hpp"
#include "patchbay/kernels/cuda/math/bf16.hpp"

namespace cuda = patchbay::kernels::cuda;
namespace math = patchbay::kernels::cuda::math;

namespace {

struct Bf16Values {
  std::vector<uint16_t> bits;
  std::vector<float> values;  // the same numbers, exact in f32
};

Bf16Values random_bf16(size_t count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Bf16Values x{std::vector<uint16_t>(count), std::vector<float>(count)};
  for (size_t i = 0; i < count; ++i) {
    x.bits[i] = math::bf16_from_float(normal(generator));
    x.values[i] = math::float_from_bf16(x.bits[i]);
  }
  return x;
}

double relative_error(const std::vector<float>& a, const std::vector<float>& reference) {
  double error = 0.0, norm = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    error += (double(a[i]) - reference[i]) * (double(a[i]) - reference[i]);
    norm += double(reference[i]) * reference[i];
  }
  return std::sqrt(error / std::max(norm, 1e-30));
}

struct Results {
  std::vector<float> out, lse, dq, dk, dv;
};

Results run_twin(const Bf16Values& q, const Bf16Values& k, const Bf16Values& v,
                 const Bf16Values& dout, int64_t bh, int64_t steps, int64_t dim, float scale,
                 const int32_t* segments = nullptr, int64_t heads = 1) {
  const size_t n = q.bits.size(), rows = size_t(bh * steps);
  Results r{std::vector<float>(n), std::vector<float>(rows), std::vector<float>(n),
            std::vector<float>(n), std::vector<float>(n)};
  cuda::causal_attention_bf16_forward_twin(q.bits.data(), k.bits.data(), v.bits.data(),
                                           r.out.data(), r.lse.data(), bh, steps, dim, scale,
                                           segments, heads);
  cuda::causal_attention_bf16_backward_twin(
      q.bits.data(), k.bits.data(), v.bits.data(), r.out.data(), dout.bits.data(), r.lse.data(),
      r.dq.data(), r.dk.data(), r.dv.data(), bh, steps, dim, scale, segments, heads);
  return r;
}

Results run_reference(const std::vector<float>& q, const std::vector<float>& k,
                      const std::vector<float>& v, const std::vector<float>& dout, int64_t bh,
                      int64_t steps, int64_t dim, float scale) {
  const size_t n = q.size(), rows = size_t(bh * steps);
  Results r{std::vector<float>(n), std::vector<float>(rows), std::vector<float>(n),
            std::vector<float>(n), std::vector<float>(n)};
  cuda::causal_attention_forward_reference(q.data(), k.data(), v.data(), r.out.data(), r.lse.data(),
                                           bh, steps, dim, scale);
  cuda::causal_attention_backward_reference(q.data(), k.data(), v.data(), dout.data(), r.dq.data(),
                                            r.dk.data(), r.dv.data(), bh, steps, dim, scale);
  return r;
}

// Rows [from, to) of a [T][width] block inside a [bh][T][width] tensor, for head bh.
std::vector<float> rows_of(const std::vector<float>& x, int64_t head, int64_t steps, int64_t width,
                           int64_t from, int64_t to) {
  const auto begin = x.begin() + (head * steps + from) * width;
  return std::vector<float>(begin, begin + (to - from) * width);
}

void check_bf16_close(const Results& twin, const Results& reference, const std::string& label) {
  INFO(label);
  // bf16 P and dS (relative rounding 2^-9) through T-term sums: 1e-3 to 2e-3 measured.
  CHECK(relative_error(twin.out, reference.out) < 5e-3);
  CHECK(relative_error(twin.lse, reference.lse) < 1e-6);  // f32 all the way (~5e-8)
  CHECK(relative_error(twin.dq, reference.dq) < 1e-2);
  CHECK(relative_error(twin.dk, reference.dk) < 1e-2);
  CHECK(relative_error(twin.dv, reference.dv) < 5e-3);
}

}  // namespace

TEST_CASE(
    "bf16 flash attention twin: forward and gradients within bf16 tolerance of the "
    "double reference") {
  const int64_t cases[][3] = {{2, 77, 64}, {2, 130, 128}, {1, 1, 64}, {3, 200, 64}, {1, 64, 128}};
  uint32_t seed = 100;
  for (const auto& c : cases) {
    const int64_t bh = c[0], steps = c[1], dim = c[2];
    const size_t n = size_t(bh * steps * dim);
    const float scale = 1.0f / std::sqrt(float(dim));
    const auto q = random_bf16(n, seed++), k = random_bf16(n, seed++), v = random_bf16(n, seed++),
               dout = random_bf16(n, seed++);
    const Results twin = run_twin(q, k, v, dout, bh, steps, dim, scale);
    const Results reference =
        run_reference(q.values, k.values, v.values, dout.values, bh, steps, dim, scale);
    check_bf16_close(
        twin, reference,
        "bh " + std::to_string(bh) + ", T " + std::to_string(steps) + ", D " + std::to_string(dim));
    // The rounding is real: P in bf16 moves the output off the exact answer (a twin that
    // skipped the rounding points would match the reference to ~1e-7).
    if (steps > 1) CHECK(relative_error(twin.out, reference.out) > 1e-5);
  }
}

TEST_CASE("bf16 flash attention twin: causal, bit for bit (future keys, values never read)") {
  const int64_t bh = 2, steps = 150, dim = 64, cut = 70;  // cut inside the second 64-row tile
  const size_t n = size_t(bh * steps * dim);
  const float scale = 0.125f;
  auto q = random_bf16(n, 7), k = random_bf16(n, 8), v = random_bf16(n, 9),
       dout = random_bf16(n, 10);
  const Results before = run_twin(q, k, v, dout, bh, steps, dim, scale);
  const auto other_k = random_bf16(n, 11), other_v = random_bf16(n, 12);
  for (int64_t h = 0; h < bh; ++h)
    for (int64_t t = cut + 1; t < steps; ++t)
      for (int64_t d = 0; d < dim; ++d) {
        const size_t i = size_t((h * steps + t) * dim + d);
        k.bits[i] = other_k.bits[i];
        v.bits[i] = other_v.bits[i];
      }
  const Results after = run_twin(q, k, v, dout, bh, steps, dim, scale);
  for (int64_t h = 0; h < bh; ++h) {
    CHECK(rows_of(after.out, h, steps, dim, 0, cut + 1) ==
          rows_of(before.out, h, steps, dim, 0, cut + 1));
    CHECK(rows_of(after.lse, h, steps, 1, 0, cut + 1) ==
          rows_of(before.lse, h, steps, 1, 0, cut + 1));
    CHECK(rows_of(after.dq, h, steps, dim, 0, cut + 1) ==
          rows_of(before.dq, h, steps, dim, 0, cut + 1));
  }
  CHECK(after.out != before.out);  // the later rows did change
}

TEST_CASE("bf16 flash attention twin: packed segments match independent sequences") {
  // Batch 2, 2 heads; row 0 packs segments of 50, 90 and 60 positions, row 1 one sequence.
  const int64_t batch = 2, heads = 2, steps = 200, dim = 64, bh = batch * heads;
  const int64_t bounds[] = {0, 50, 140, 200};
  std::vector<int32_t> segments(size_t(batch * steps), 0);
  for (int s = 0; s < 3; ++s)
    for (int64_t t = bounds[s]; t < bounds[s + 1]; ++t) segments[size_t(t)] = 10 + s;
  const size_t n = size_t(bh * steps * dim);
  const float scale = 1.0f / 8.0f;
  auto q = random_bf16(n, 20), k = random_bf16(n, 21), v = random_bf16(n, 22),
       dout = random_bf16(n, 23);
  const Results twin = run_twin(q, k, v, dout, bh, steps, dim, scale, segments.data(), heads);
  for (int64_t h = 0; h < bh; ++h)
    for (int s = 0; s < (h < heads ? 3 : 1); ++s) {
      const int64_t from = h < heads ? bounds[s] : 0, to = h < heads ? bounds[s + 1] : steps;
      const int64_t len = to - from;
      const Results reference = run_reference(
          rows_of(q.values, h, steps, dim, from, to), rows_of(k.values, h, steps, dim, from, to),
          rows_of(v.values, h, steps, dim, from, to), rows_of(dout.values, h, steps, dim, from, to),
          1, len, dim, scale);
      Results part{
          rows_of(twin.out, h, steps, dim, from, to), rows_of(twin.lse, h, steps, 1, from, to),
          rows_of(twin.dq, h, steps, dim, from, to), rows_of(twin.dk, h, steps, dim, from, to),
          rows_of(twin.dv, h, steps, dim, from, to)};
      check_bf16_close(part, reference,
                       "head " + std::to_string(h) + ", segment " + std::to_string(s));
    }
  // Isolation, bit for bit: new values in segment 2 of row 0 change nothing in segments 0, 1.
  const auto other = random_bf16(n, 24);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = (h * steps + bounds[2]) * dim; i < (h * steps + steps) * dim; ++i)
      for (Bf16Values* x : {&q, &k, &v, &dout}) x->bits[size_t(i)] = other.bits[size_t(i)];
  const Results changed = run_twin(q, k, v, dout, bh, steps, dim, scale, segments.data(), heads);
  for (int64_t h = 0; h < heads; ++h)
    for (const auto& [a, b] : {std::pair{&changed.out, &twin.out}, std::pair{&changed.dq, &twin.dq},
                               std::pair{&changed.dk, &twin.dk}, std::pair{&changed.dv, &twin.dv}})
      CHECK(rows_of(*a, h, steps, dim, 0, bounds[2]) == rows_of(*b, h, steps, dim, 0, bounds[2]));
}
