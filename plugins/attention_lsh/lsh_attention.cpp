// LshAttention: parameters, the whole-sequence forward composed of engine ops around the
// host-side slot plan (lsh_buckets.hpp), and cached decoding computed on the host.
#include "lsh_attention.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace patchbay_lsh {
namespace {

using patchbay::PluginError;
using patchbay::Tensor;

// Decoding state: per (batch, head) the cached shared qk (raw and unit), v, and per round the
// bucket of every cached position, its rank in the bucket and the bucket member lists.
class LshCache : public patchbay::AttentionState {
 public:
  LshCache(int64_t batch, int64_t capacity, int64_t heads, int64_t dim, const LshSpec& spec)
      : AttentionState(batch, capacity),
        qk(static_cast<size_t>(batch * heads * capacity * dim)),
        unit(qk.size()),
        v(qk.size()),
        bucket(static_cast<size_t>(batch * heads * spec.n_hashes * capacity)),
        rank(bucket.size()),
        members(static_cast<size_t>(batch * heads * spec.n_hashes),
                std::vector<std::vector<int64_t>>(static_cast<size_t>(spec.n_buckets))) {}
  std::vector<float> qk, unit, v;                          // [B][H][capacity][D]
  std::vector<int32_t> bucket;                             // [B][H][n_hashes][capacity]
  std::vector<int64_t> rank;                               // [B][H][n_hashes][capacity]
  std::vector<std::vector<std::vector<int64_t>>> members;  // [B*H*n_hashes][bucket] -> positions
};

// x [B, H, nC, c, D] rolled by one chunk: entry n holds chunk n - 1 (chunk 0 holds the last,
// which the bias masks: it belongs to another bucket or is padding).
Tensor previous_chunk(const Tensor& x, int64_t chunks) {
  if (chunks == 1) return x;  // masked as a whole by the bias (chunk 0 of its bucket)
  return patchbay::Ops(x.ops()).concat({x.slice(2, chunks - 1, chunks), x.slice(2, 0, chunks - 1)},
                                       2);
}

}  // namespace

LshAttention::LshAttention(const patchbay::Host& host, const patchbay::ConfigView& config)
    : host_(host),
      ops_(host.api()->ops),
      dropout_(config.get_float("dropout")),
      fused_(config.get_bool("fused")) {
  spec_.n_buckets = config.get_int("n_buckets");
  spec_.n_hashes = config.get_int("n_hashes");
  spec_.chunk_len = config.get_int("chunk_len");
  spec_.dedup = config.get_bool("dedup");
  if (spec_.n_buckets != 1 && spec_.n_buckets % 2 != 0)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'lsh': n_buckets must be 1 or even (argmax over [xR; -xR]), "
                      "found " +
                          std::to_string(spec_.n_buckets));
  if (!(dropout_ >= 0.0 && dropout_ < 1.0))
    throw PluginError(PB_STATUS_OUT_OF_RANGE,
                      "dropout must lie in [0, 1), found " + std::to_string(dropout_));
}

void LshAttention::init(const pb_layer_context& ctx) {
  if (ctx.device_type != PB_DEVICE_CPU)
    throw PluginError(PB_STATUS_UNSUPPORTED, "attention 'lsh' runs on the CPU only");
  if (ctx.param_dtype != PB_DTYPE_F32 && ctx.param_dtype != PB_DTYPE_BF16 &&
      ctx.param_dtype != PB_DTYPE_F16)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, "param_dtype must be a float dtype");
  d_model_ = ctx.d_model;
  n_heads_ = ctx.n_heads;
  head_dim_ = d_model_ / n_heads_;
  max_seq_len_ = ctx.max_seq_len;
  dtype_ = ctx.param_dtype;
  patchbay::Generator init_generator(ops_.table(), ctx.seed);
  const int64_t c = d_model_;
  qk_weight_ = add_parameter("qk.weight",
                             (ops_.randn({2 * c, c}, init_generator) * ctx.init_std).to(dtype_));
  qk_bias_ = add_parameter("qk.bias", ops_.zeros({2 * c}, dtype_));
  proj_weight_ = add_parameter(
      "proj.weight", (ops_.randn({c, c}, init_generator) * ctx.residual_init_std).to(dtype_));
  proj_bias_ = add_parameter("proj.bias", ops_.zeros({c}, dtype_));
  // Rotations: their own stream, so they do not shift the parameters' initialisation.
  patchbay::Generator rotation_generator(ops_.table(), ctx.seed ^ 0x5bd1e9955bd1e995ull);
  const int64_t half = std::max<int64_t>(spec_.n_buckets / 2, 1);
  rotations_.clear();
  for (int64_t r = 0; r < spec_.n_hashes; ++r)
    rotations_.push_back(ops_.randn({head_dim_, half}, rotation_generator).to_vector());
  dropout_generator_ =
      std::make_unique<patchbay::Generator>(ops_.table(), ctx.seed ^ 0x9e3779b97f4a7c15ull);
}

void LshAttention::project(const Tensor& x, Tensor& qk, Tensor& v) const {
  const std::vector<int64_t> shape = x.shape();
  if (shape.size() != 3 || shape[2] != d_model_)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'lsh' expects x [B, T, " + std::to_string(d_model_) +
                          "], found a tensor of rank " + std::to_string(shape.size()));
  const int64_t b = shape[0], t = shape[1];
  Tensor both = x.to(dtype_).matmul(qk_weight_, false, true) + qk_bias_;  // [B, T, 2C]
  auto head = [&](int64_t which) {
    return both.slice(2, which * d_model_, (which + 1) * d_model_)
        .reshape({b, t, n_heads_, head_dim_})
        .permute({0, 2, 1, 3})
        .to(PB_DTYPE_F32);
  };
  qk = head(0);
  v = head(1);
}

Tensor LshAttention::project_out(const Tensor& o) const {
  const int64_t b = o.size(0), t = o.size(2);
  Tensor merged = o.permute({0, 2, 1, 3}).reshape({b, t, d_model_}).to(dtype_);
  return merged.matmul(proj_weight_, false, true) + proj_bias_;
}

Tensor LshAttention::lsh_attention(const Tensor& qk, const Tensor& v) const {
  const int64_t t = qk.size(2), d = qk.size(3), rows = qk.size(0) * qk.size(1);
  std::vector<float> host;
  {
    patchbay::NoGradGuard no_grad(ops_.table());
    host = qk.detach().contiguous().to_vector();
  }
  // Plan every (b, h) row: all rounds hashed in one pass, then the per-bucket counting sort.
  std::vector<SlotPlan> plans;
  for (int64_t row = 0; row < rows; ++row)
    plans.push_back(plan_slots(
        hash_rounds(host.data() + row * t * d, t, d, rotations_, spec_.n_buckets), t, spec_));
  const pb_ops_table* ops = ops_.table();
  if (fused_ && PB_HAS_FIELD(ops, pb_ops_table, sorted_chunk_attention) &&
      ops->sorted_chunk_attention != nullptr)
    return fused_attention(qk, v, plans);
  return composed_attention(qk, v, plans);
}

Tensor LshAttention::fused_attention(const Tensor& qk, const Tensor& v,
                                     const std::vector<SlotPlan>& plans) const {
  const int64_t b = qk.size(0), h = qk.size(1), rows = b * h;
  int64_t slots = spec_.chunk_len;
  for (const SlotPlan& plan : plans)
    slots = std::max(slots, static_cast<int64_t>(plan.position.size()));
  // The plan as int32 [B, H, S], every row padded to the longest (position -1, group -1).
  std::vector<int32_t> position(static_cast<size_t>(rows * slots), -1), group(position.size(), -1);
  for (int64_t row = 0; row < rows; ++row) {
    const SlotPlan& plan = plans[static_cast<size_t>(row)];
    for (size_t s = 0; s < plan.position.size(); ++s) {
      position[static_cast<size_t>(row * slots) + s] = static_cast<int32_t>(plan.position[s]);
      group[static_cast<size_t>(row * slots) + s] = plan.group[s];
    }
  }
  const pb_ops_table* ops = ops_.table();
  auto int_tensor = [&](const std::vector<int32_t>& values, const char* what) {
    const int64_t shape[3] = {b, h, slots};
    pb_tensor* out = nullptr;
    patchbay::check_ops_status(ops, ops->from_data(values.data(), shape, 3, PB_DTYPE_I32, &out),
                               what);
    return Tensor(ops, out);
  };
  const Tensor slot_position = int_tensor(position, "slot_position");
  const Tensor slot_group = int_tensor(group, "slot_group");
  const Tensor unit = qk * ((qk * qk).sum({-1}, true) + 1e-12).rsqrt();  // unit keys
  pb_sorted_chunk_options options{};
  options.struct_size = sizeof(options);
  options.chunk_len = spec_.chunk_len;
  options.scale = 1.0;  // trax's temperature: queries unscaled, keys unit-normalised
  options.self_bias = kSelfBias;
  options.causal = 1;
  options.dedup = spec_.dedup ? 1 : 0;
  pb_tensor* out = nullptr;
  patchbay::check_ops_status(
      ops,
      ops->sorted_chunk_attention(qk.handle(), unit.handle(), v.handle(), slot_position.handle(),
                                  slot_group.handle(), &options, &out),
      "sorted_chunk_attention");
  return Tensor(ops, out);
}

Tensor LshAttention::composed_attention(const Tensor& qk, const Tensor& v,
                                        const std::vector<SlotPlan>& plans) const {
  const int64_t b = qk.size(0), h = qk.size(1), t = qk.size(2), d = qk.size(3);
  const int64_t c = spec_.chunk_len, rounds = spec_.n_hashes, rows = b * h;
  int64_t slots = c;
  for (const SlotPlan& plan : plans)
    slots = std::max(slots, static_cast<int64_t>(plan.position.size()));
  const int64_t chunks = slots / c;
  std::vector<int64_t> sort_ids(static_cast<size_t>(rows * slots)),
      unsort_ids(static_cast<size_t>(rows * rounds * t));
  std::vector<float> bias(static_cast<size_t>(rows * slots * 2 * c));
  for (int64_t row = 0; row < rows; ++row) {
    const SlotPlan& plan = plans[static_cast<size_t>(row)];
    for (int64_t s = 0; s < slots; ++s) {
      const int64_t pos = s < static_cast<int64_t>(plan.position.size()) ? plan.position[s] : -1;
      sort_ids[static_cast<size_t>(row * slots + s)] = row * t + std::max<int64_t>(pos, 0);
    }
    for (int64_t n = 0; n < rounds * t; ++n)
      unsort_ids[static_cast<size_t>(row * rounds * t + n)] = row * slots + plan.slot_of[n];
    fill_bias(plan, t, slots, spec_, bias.data() + row * slots * 2 * c);
  }
  Tensor sort_index = ops_.from_vector(sort_ids, {rows * slots});
  Tensor unsort_index = ops_.from_vector(unsort_ids, {rows * rounds * t});
  Tensor bias_t = ops_.from_vector(bias, {b, h, chunks, c, 2 * c});

  // Sorted, chunked rows [B, H, nC, c, D].
  Tensor q_c = ops_.embedding(qk.reshape({rows * t, d}), sort_index).reshape({b, h, chunks, c, d});
  Tensor v_c = ops_.embedding(v.reshape({rows * t, d}), sort_index).reshape({b, h, chunks, c, d});
  Tensor k_c = q_c * ((q_c * q_c).sum({-1}, true) + 1e-12).rsqrt();   // unit keys
  Tensor k_win = ops_.concat({previous_chunk(k_c, chunks), k_c}, 3);  // [B, H, nC, 2c, D]
  Tensor v_win = ops_.concat({previous_chunk(v_c, chunks), v_c}, 3);
  Tensor scores = q_c.matmul(k_win, false, true) + bias_t;  // [B, H, nC, c, 2c]
  Tensor row_max = scores.detach().max({-1}, true);
  Tensor lse = (scores - row_max).exp().sum({-1}, true).log() + row_max;  // [B, H, nC, c, 1]
  Tensor o_c = (scores - lse).exp().matmul(v_win);                        // [B, H, nC, c, D]

  // Back to positions: [B, H, rounds, T, D] and [B, H, rounds, T, 1].
  Tensor o_r =
      ops_.embedding(o_c.reshape({rows * slots, d}), unsort_index).reshape({b, h, rounds, t, d});
  if (rounds == 1) return o_r.reshape({b, h, t, d});
  Tensor lse_r = ops_.embedding(lse.reshape({rows * slots, 1}), unsort_index)
                     .reshape({b, h, rounds, t})
                     .permute({0, 1, 3, 2});  // [B, H, T, rounds]
  Tensor weights = lse_r.softmax().permute({0, 1, 3, 2}).reshape({b, h, rounds, t, 1});
  return (o_r * weights).sum({2});
}

Tensor LshAttention::forward(const Tensor& x, bool training) {
  if (x.dim() == 3 && max_seq_len_ > 0 && x.size(1) > max_seq_len_)
    throw PluginError(PB_STATUS_OUT_OF_RANGE, "sequence of " + std::to_string(x.size(1)) +
                                                  " positions exceeds max_seq_len " +
                                                  std::to_string(max_seq_len_));
  Tensor qk, v;
  project(x, qk, v);
  Tensor y = project_out(lsh_attention(qk, v));
  if (training && dropout_ > 0.0) y = y.dropout(dropout_, *dropout_generator_, true);
  return y;
}

std::unique_ptr<patchbay::AttentionState> LshAttention::create_state(int64_t batch,
                                                                     int64_t capacity) {
  if (max_seq_len_ > 0 && capacity > max_seq_len_)
    throw PluginError(PB_STATUS_OUT_OF_RANGE, "capacity " + std::to_string(capacity) +
                                                  " exceeds max_seq_len " +
                                                  std::to_string(max_seq_len_));
  return std::make_unique<LshCache>(batch, capacity, n_heads_, head_dim_, spec_);
}

Tensor LshAttention::forward_step(patchbay::AttentionState& state, const Tensor& x) {
  auto& cache = static_cast<LshCache&>(state);
  const int64_t b_count = x.size(0), steps = x.size(1), d = head_dim_, h_count = n_heads_;
  const int64_t cap = cache.capacity(), rounds = spec_.n_hashes, c = spec_.chunk_len;
  Tensor qk_t, v_t;
  project(x, qk_t, v_t);
  const std::vector<float> qk = qk_t.contiguous().to_vector(), v = v_t.contiguous().to_vector();
  std::vector<float> out(static_cast<size_t>(b_count * h_count * steps * d), 0.f);
  for (int64_t n = 0; n < steps; ++n) {
    const int64_t p = cache.length() + n;
    for (int64_t row = 0; row < b_count * h_count; ++row) {
      const float* q = qk.data() + (row * steps + n) * d;
      float* cq = cache.qk.data() + (row * cap + p) * d;
      float* cu = cache.unit.data() + (row * cap + p) * d;
      float* cv = cache.v.data() + (row * cap + p) * d;
      double norm = 0;
      for (int64_t e = 0; e < d; ++e) norm += double(q[e]) * q[e];
      const float inv = static_cast<float>(1.0 / std::sqrt(norm + 1e-12));
      for (int64_t e = 0; e < d; ++e) {
        cq[e] = q[e];
        cu[e] = q[e] * inv;
        cv[e] = v[static_cast<size_t>((row * steps + n) * d + e)];
      }
      auto bucket_at = [&](int64_t r, int64_t pos) -> int32_t& {
        return cache.bucket[static_cast<size_t>((row * rounds + r) * cap + pos)];
      };
      auto rank_at = [&](int64_t r, int64_t pos) -> int64_t& {
        return cache.rank[static_cast<size_t>((row * rounds + r) * cap + pos)];
      };
      for (int64_t r = 0; r < rounds; ++r) {
        const int32_t bu =
            hash_round(cq, 1, d, rotations_[static_cast<size_t>(r)], spec_.n_buckets)[0];
        auto& list = cache.members[static_cast<size_t>(row * rounds + r)][bu];
        bucket_at(r, p) = bu;
        rank_at(r, p) = static_cast<int64_t>(list.size());
        list.push_back(p);
      }
      auto in_window = [&](int64_t r, int64_t j) {
        if (bucket_at(r, j) != bucket_at(r, p)) return false;
        const int64_t cq_chunk = rank_at(r, p) / c, ck = rank_at(r, j) / c;
        return ck == cq_chunk || ck == cq_chunk - 1;
      };
      // Each round: softmax over the window, then rounds combined by their lse weights.
      std::vector<double> lse_r(static_cast<size_t>(rounds));
      std::vector<std::vector<double>> o_r(static_cast<size_t>(rounds),
                                           std::vector<double>(static_cast<size_t>(d), 0.0));
      for (int64_t r = 0; r < rounds; ++r) {
        const auto& list = cache.members[static_cast<size_t>(row * rounds + r)][bucket_at(r, p)];
        const int64_t hi = rank_at(r, p), lo = std::max<int64_t>(0, (hi / c - 1) * c);
        std::vector<double> s;
        for (int64_t m = lo; m <= hi; ++m) {
          const int64_t j = list[static_cast<size_t>(m)];
          const float* kj = cache.unit.data() + (row * cap + j) * d;
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += double(cq[e]) * kj[e];
          if (j == p) {
            dot += kSelfBias;
          } else if (spec_.dedup && rounds > 1) {
            int64_t count = 0;
            for (int64_t r2 = 0; r2 < rounds; ++r2) count += in_window(r2, j) ? 1 : 0;
            dot -= std::log(static_cast<double>(count));
          }
          s.push_back(dot);
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double e : s) sum += std::exp(e - mx);
        lse_r[static_cast<size_t>(r)] = mx + std::log(sum);
        for (int64_t m = lo; m <= hi; ++m) {
          const double w = std::exp(s[static_cast<size_t>(m - lo)] - lse_r[static_cast<size_t>(r)]);
          const float* vj = cache.v.data() + (row * cap + list[static_cast<size_t>(m)]) * d;
          for (int64_t e = 0; e < d; ++e)
            o_r[static_cast<size_t>(r)][static_cast<size_t>(e)] += w * vj[e];
        }
      }
      const double mx = *std::max_element(lse_r.begin(), lse_r.end());
      double total = 0;
      for (double l : lse_r) total += std::exp(l - mx);
      float* o = out.data() + (row * steps + n) * d;
      for (int64_t r = 0; r < rounds; ++r) {
        const double w = std::exp(lse_r[static_cast<size_t>(r)] - mx) / total;
        for (int64_t e = 0; e < d; ++e)
          o[e] += static_cast<float>(w * o_r[static_cast<size_t>(r)][static_cast<size_t>(e)]);
      }
    }
  }
  cache.advance(steps);
  return project_out(ops_.from_vector(out, {b_count, h_count, steps, d}));
}

}  // namespace patchbay_lsh
