// RelativeSelfAttention and T5's relative position bias from engine ops (see
// relative_attention.hpp).
#include "model/relative_attention.hpp"

#include <cmath>

#include "common/error.hpp"
#include "engine/ops.hpp"

namespace patchbay::model {

namespace eng = engine;

eng::Tensor RelativePositionBias::bias(int64_t query_len, int64_t key_len,
                                       int64_t query_offset) const {
  const std::vector<int32_t> ids =
      t5_relative_position_buckets(query_len, key_len, buckets, query_offset);
  const eng::Tensor bucket_ids =
      eng::Tensor::from_data(ids.data(), {query_len, key_len}, eng::DType::kI32).to(table.device());
  const eng::Tensor per_pair = eng::embedding(table, bucket_ids);  // [Tq, Tk, H]
  return eng::unsqueeze(eng::permute(per_pair, {2, 0, 1}), 0);     // [1, H, Tq, Tk]
}

eng::Tensor attention_blocked_mask(const eng::Tensor& key_padding, int64_t batch, int64_t query_len,
                                   int64_t key_len, bool causal, int64_t query_offset) {
  std::vector<float> padding(static_cast<size_t>(batch * key_len), 1.0f);
  if (key_padding.defined()) {
    const eng::Tensor flat = eng::reshape(key_padding.to(eng::cpu()).to(eng::DType::kF32), {-1});
    padding = flat.to_vector();
  }
  std::vector<float> blocked(static_cast<size_t>(batch * query_len * key_len), 0.0f);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < query_len; ++i)
      for (int64_t j = 0; j < key_len; ++j) {
        const bool padded = padding[static_cast<size_t>(b * key_len + j)] == 0.0f;
        const bool future = causal && j > i + query_offset;
        blocked[static_cast<size_t>((b * query_len + i) * key_len + j)] =
            padded || future ? 1.0f : 0.0f;
      }
  return eng::Tensor::from_vector(blocked, {batch, 1, query_len, key_len});
}

RelativeSelfAttention::RelativeSelfAttention(int64_t d_model, int64_t n_heads, double init_std,
                                             double out_std, eng::Generator& gen,
                                             eng::Device device)
    : heads_(n_heads) {
  auto weight = [&](double std) {
    eng::NoGradGuard no_grad;
    eng::Tensor t = eng::mul_scalar(eng::randn({d_model, d_model}, gen), std).to(device);
    t.set_requires_grad(true);
    return t;
  };
  wq_ = weight(init_std);
  wk_ = weight(init_std);
  wv_ = weight(init_std);
  wo_ = weight(out_std);
}

eng::Tensor RelativeSelfAttention::forward(const eng::Tensor& x, const eng::Tensor& bias,
                                           const eng::Tensor& blocked) const {
  Cache whole;  // no earlier positions: keys and values of x only
  return forward_cached(x, whole, bias, blocked);
}

eng::Tensor RelativeSelfAttention::forward_cached(const eng::Tensor& x, Cache& cache,
                                                  const eng::Tensor& bias,
                                                  const eng::Tensor& blocked) const {
  const int64_t b = x.size(0), t = x.size(1), c = x.size(2), d = c / heads_;
  auto heads_of = [&](const eng::Tensor& w) {  // [B, Tn, C] -> [B, H, Tn, D]
    return eng::permute(eng::reshape(eng::linear(x, w, eng::Tensor()), {b, t, heads_, d}),
                        {0, 2, 1, 3});
  };
  const eng::Tensor q = heads_of(wq_);
  const eng::Tensor k_new = heads_of(wk_), v_new = heads_of(wv_);
  cache.k = cache.k.defined() ? eng::concat({cache.k, k_new}, 2) : k_new;  // [B, H, L+Tn, D]
  cache.v = cache.v.defined() ? eng::concat({cache.v, v_new}, 2) : v_new;
  eng::Tensor scores = eng::mul_scalar(eng::matmul(q, cache.k, false, true),
                                       1.0 / std::sqrt(static_cast<double>(d)));
  if (bias.defined()) scores = scores + bias;
  if (blocked.defined()) scores = eng::masked_fill(scores, blocked.to(scores.device()), -1e9);
  const eng::Tensor mixed = eng::matmul(eng::softmax(scores), cache.v);  // [B, H, Tn, D]
  const eng::Tensor joined = eng::reshape(eng::permute(mixed, {0, 2, 1, 3}), {b, t, c});
  return eng::linear(joined, wo_, eng::Tensor());
}

std::vector<std::pair<std::string, eng::Tensor>> RelativeSelfAttention::parameters() const {
  return {{"q.weight", wq_}, {"k.weight", wk_}, {"v.weight", wv_}, {"o.weight", wo_}};
}

}  // namespace patchbay::model
