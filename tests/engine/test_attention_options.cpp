// The attention options of ops-table version 3 (sliding window, ALiBi) through the engine op
// and the C entry attention_with_options: forward against a naive attention written here
// (explicit scores + bias, mask, softmax, times V, in double), gradients against finite
// differences, KV-cache views read in place (no copy of the prefix: the allocator's peak
// shows it), and the options struct's struct_size contract.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/ops_table.hpp"
#include "test_util.hpp"

using namespace patchbay::engine;
using namespace patchbay::engine::testing;

namespace {

struct Options {
  bool causal = false;
  int64_t window = 0;
  std::vector<float> slopes;  // empty = no ALiBi
};

// softmax(q k^T * scale + bias + mask) v per (b, h), double precision; query i sits at
// position p = i + Tk - Tq; bias = -slope_h |p - j|; visible: (j <= p if causal) and
// |p - j| < window (window > 0; only p - j < window matters when causal).
ref::Array naive(const Tensor& q, const Tensor& k, const Tensor& v, const Options& o) {
  const std::vector<float> qv = q.to_vector(), kv = k.to_vector(), vv = v.to_vector();
  const int64_t b_n = q.size(0), h_n = q.size(1), tq = q.size(2), d = q.size(3);
  const int64_t hkv = k.size(1), tk = k.size(2), group = h_n / hkv;
  const double scale = 1.0 / std::sqrt(double(d));
  ref::Array out{q.shape(), ref::Values(size_t(q.numel()), 0.0)};
  for (int64_t b = 0; b < b_n; ++b)
    for (int64_t h = 0; h < h_n; ++h)
      for (int64_t i = 0; i < tq; ++i) {
        const int64_t p = i + tk - tq, hk = h / group;
        std::vector<double> w(size_t(tk), -std::numeric_limits<double>::infinity());
        double top = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < tk; ++j) {
          const bool hidden =
              (o.causal && j > p) || (o.window > 0 && std::llabs(p - j) >= o.window);
          if (hidden) continue;
          double dot = 0;
          for (int64_t x = 0; x < d; ++x)
            dot += double(qv[size_t(((b * h_n + h) * tq + i) * d + x)]) *
                   kv[size_t(((b * hkv + hk) * tk + j) * d + x)];
          w[size_t(j)] =
              dot * scale - (o.slopes.empty() ? 0.0 : o.slopes[size_t(h)] * std::llabs(p - j));
          top = std::max(top, w[size_t(j)]);
        }
        if (top == -std::numeric_limits<double>::infinity()) continue;  // no key: zeros
        double z = 0;
        for (double& e : w) z += (e = std::exp(e - top));
        for (int64_t j = 0; j < tk; ++j)
          for (int64_t x = 0; x < d; ++x)
            out.values[size_t(((b * h_n + h) * tq + i) * d + x)] +=
                w[size_t(j)] / z * vv[size_t(((b * hkv + hk) * tk + j) * d + x)];
      }
  return out;
}

Tensor with_options(const Tensor& q, const Tensor& k, const Tensor& v, const Options& o) {
  AttentionOptions options;
  options.causal = o.causal;
  options.window = o.window;
  if (!o.slopes.empty())
    options.alibi_slopes = Tensor::from_vector(o.slopes, {int64_t(o.slopes.size())});
  return scaled_dot_product_attention(q, k, v, options);
}

std::vector<float> slopes_for(int64_t heads) {
  std::vector<float> s;
  for (int64_t h = 0; h < heads; ++h) s.push_back(0.6f / float(h + 1));
  return s;
}

}  // namespace

TEST_CASE("attention with window and ALiBi matches a naive attention") {
  struct Case {
    int64_t b, h, hkv, tq, tk, d;
    bool causal;
    int64_t window;
    bool alibi;
  };
  const Case cases[] = {
      {1, 2, 2, 9, 9, 8, true, 3, false}, {1, 2, 2, 9, 9, 8, true, 0, true},
      {2, 4, 2, 7, 7, 8, true, 4, true},  {1, 2, 2, 3, 10, 4, true, 5, true},  // Tq < Tk
      {1, 2, 1, 1, 12, 8, true, 6, true}, {1, 2, 2, 8, 8, 8, false, 3, true},  // non-causal
      {1, 2, 2, 8, 8, 8, false, 0, true}, {1, 1, 1, 70, 70, 16, true, 20, true}};
  uint64_t seed = 5000;
  for (const Case& c : cases) {
    Tensor q = random_tensor({c.b, c.h, c.tq, c.d}, seed++),
           k = random_tensor({c.b, c.hkv, c.tk, c.d}, seed++),
           v = random_tensor({c.b, c.hkv, c.tk, c.d}, seed++);
    Options o{c.causal, c.window, c.alibi ? slopes_for(c.h) : std::vector<float>{}};
    check_close(with_options(q, k, v, o), naive(q, k, v, o), 1e-4, 1e-5,
                "attention options Tq=" + std::to_string(c.tq) + " Tk=" + std::to_string(c.tk) +
                    " window=" + std::to_string(c.window) + (c.alibi ? " alibi" : ""));
  }
}

TEST_CASE("attention with window and ALiBi: backward matches finite differences") {
  for (bool causal : {true, false})
    check_gradients(
        [causal](const std::vector<Tensor>& in) {
          return with_options(in[0], in[1], in[2], Options{causal, 3, slopes_for(2)});
        },
        {random_tensor({1, 2, 4, 4}, 5100, -1, 1, true),
         random_tensor({1, 2, 6, 4}, 5101, -1, 1, true),
         random_tensor({1, 2, 6, 4}, 5102, -1, 1, true)},
        causal ? "attention window alibi causal" : "attention window alibi");
}

TEST_CASE("a KV-cache view is read in place: no copy of the prefix per decode step") {
  // Cache buffers [1, 4, capacity, 32] f32, filled to len; a decode step's q is [1, 4, 1, 32].
  const int64_t capacity = 4096, len = 4000, d = 32;
  Tensor k_cache = random_tensor({1, 4, capacity, d}, 5200),
         v_cache = random_tensor({1, 4, capacity, d}, 5201);
  Tensor q = random_tensor({1, 4, 1, d}, 5202);
  Tensor k_view = k_cache.slice(2, 0, len), v_view = v_cache.slice(2, 0, len);
  REQUIRE_FALSE(k_view.is_contiguous());
  const Options o{true, 0, slopes_for(4)};
  const size_t before = memory_stats(cpu()).current_bytes;
  reset_peak(cpu());
  Tensor out = with_options(q, k_view, v_view, o);
  const size_t grown = memory_stats(cpu()).peak_bytes - before;
  // A contiguous copy of the k and v prefixes would be 2 * 4 * 4000 * 32 * 4 B = 4 MB.
  const size_t prefix_bytes = size_t(2 * 4 * len * d) * sizeof(float);
  CHECK(grown < prefix_bytes / 64);
  // Same answer as on packed copies.
  check_close(out, to_array(with_options(q, k_view.contiguous(), v_view.contiguous(), o)), 1e-6,
              1e-7, "in-place view vs packed");
}

TEST_CASE("ops table version 3: attention_with_options, NULL options, struct_size contract") {
  const pb_ops_table* t = host_ops_table();
  REQUIRE(t->version >= 3);
  REQUIRE(PB_HAS_FIELD(t, pb_ops_table, attention_with_options));
  Tensor q = random_tensor({1, 2, 5, 8}, 5300), k = random_tensor({1, 2, 5, 8}, 5301),
         v = random_tensor({1, 2, 5, 8}, 5302);
  Tensor slopes = Tensor::from_vector(slopes_for(2), {2});
  // Handles come from the table itself: copies of the tensors made through from_data.
  auto from = [&](const Tensor& x) {
    std::vector<float> data = x.to_vector();
    pb_tensor* h = nullptr;
    REQUIRE(t->from_data(data.data(), x.shape().data(), x.shape().size(), PB_DTYPE_F32, &h) ==
            nullptr);
    return h;
  };
  pb_tensor *hq = from(q), *hk = from(k), *hv = from(v), *hs = from(slopes);
  auto values = [&](pb_tensor* x) {
    std::vector<float> out(size_t(t->numel(x)));
    REQUIRE(t->copy_to_host(x, out.data(), out.size() * sizeof(float)) == nullptr);
    return out;
  };

  pb_attention_options options{};
  options.struct_size = sizeof(options);
  options.causal = 1;
  options.window = 2;
  options.alibi_slopes = hs;
  pb_tensor* out = nullptr;
  REQUIRE(t->attention_with_options(hq, hk, hv, &options, &out) == nullptr);
  check_close(Tensor::from_vector(values(out), {1, 2, 5, 8}),
              naive(q, k, v, Options{true, 2, slopes_for(2)}), 1e-4, 1e-5, "table entry");
  t->release(out);

  // NULL options: non-causal, 1/sqrt(D), equal to the old entry with causal 0.
  pb_tensor *a = nullptr, *b = nullptr;
  REQUIRE(t->attention_with_options(hq, hk, hv, nullptr, &a) == nullptr);
  REQUIRE(t->attention(hq, hk, hv, 0, 0.0, &b) == nullptr);
  CHECK(values(a) == values(b));
  t->release(a);
  t->release(b);

  // Too small a struct_size, and a set field past the known ones, are refused.
  pb_attention_options small = options;
  small.struct_size = offsetof(pb_attention_options, window);
  pb_status* s = t->attention_with_options(hq, hk, hv, &small, &out);
  REQUIRE(s != nullptr);
  CHECK(t->status_code(s) == PB_STATUS_INVALID_ARGUMENT);
  CHECK(std::string(t->status_message(s)).find("struct_size") != std::string::npos);
  t->status_free(s);
  struct Newer {
    pb_attention_options known;
    int64_t appended;
  } newer{};
  newer.known = options;
  newer.known.struct_size = sizeof(Newer);
  newer.appended = 0;  // zero: "off", accepted
  REQUIRE(t->attention_with_options(hq, hk, hv, &newer.known, &out) == nullptr);
  t->release(out);
  newer.appended = 7;  // a field this engine does not know, set: refused
  s = t->attention_with_options(hq, hk, hv, &newer.known, &out);
  REQUIRE(s != nullptr);
  CHECK(std::string(t->status_message(s)).find("cannot honour") != std::string::npos);
  t->status_free(s);

  // Bad window and bad slopes are clear errors.
  options.window = -1;
  s = t->attention_with_options(hq, hk, hv, &options, &out);
  REQUIRE(s != nullptr);
  CHECK(std::string(t->status_message(s)).find("window must be >= 0") != std::string::npos);
  t->status_free(s);
  options.window = 0;
  options.alibi_slopes = hq;  // wrong shape
  s = t->attention_with_options(hq, hk, hv, &options, &out);
  REQUIRE(s != nullptr);
  CHECK(std::string(t->status_message(s)).find("alibi_slopes must be a float tensor [H]") !=
        std::string::npos);
  t->status_free(s);
  for (pb_tensor* h : {hq, hk, hv, hs}) t->release(h);
}
