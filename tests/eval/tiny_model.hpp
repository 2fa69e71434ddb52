// The tiny model the scoring tests run on (tests/model's fixture: V = 11, C = 16, L = 2,
// T = 8) and the slow reference: log-softmax of one direct forward, in double.
#pragma once

#include <cmath>
#include <memory>
#include <vector>

#include "engine/autograd.hpp"
#include "model_fixture.hpp"

namespace eval_test {

namespace eng = patchbay::engine;
namespace pm = patchbay::model;
using V = std::vector<int32_t>;

inline std::unique_ptr<pm::LanguageModel> tiny_model() {
  pm::ModelOptions o = model_test::tiny_options();
  o.init_std = 0.5;  // peaked, varied distributions
  return pm::LanguageModel::build(o, {}, model_test::registry());
}

// Sum of log p(continuation | context) from one forward of (context + continuation)[-(L+1):][:-1].
inline double direct_logprob(pm::LanguageModel& model, const V& context, const V& continuation) {
  V all = context;
  all.insert(all.end(), continuation.begin(), continuation.end());
  const int64_t max_length = model.options().context_length;
  if (static_cast<int64_t>(all.size()) > max_length + 1)
    all.erase(all.begin(), all.end() - (max_length + 1));
  const V input(all.begin(), all.end() - 1);
  eng::NoGradGuard no_grad;
  const std::vector<float> logits =
      model
          .forward(eng::Tensor::from_data(input.data(), {1, static_cast<int64_t>(input.size())},
                                          eng::DType::kI32),
                   false)
          .logits.to_vector();
  const size_t vocab = static_cast<size_t>(model.options().vocab_size);
  double total = 0;
  const size_t n = continuation.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t pos = input.size() - n + k;
    double z = 0;
    for (size_t v = 0; v < vocab; ++v) z += std::exp(static_cast<double>(logits[pos * vocab + v]));
    total += logits[pos * vocab + static_cast<size_t>(continuation[k])] - std::log(z);
  }
  return total;
}

}  // namespace eval_test
