// Helpers of the sampler tests: logits from probabilities, the set of kept ids, and a check
// that a call throws PluginError with a given code and a message containing a phrase.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "patchbay/sampler.hpp"

namespace sampler_test {

// log(p_i): softmax of the result is p (up to float rounding).
std::vector<float> logits_of(std::initializer_list<double> probs);
// Ids whose logit is finite, ascending.
std::vector<int32_t> kept(std::span<const float> logits);
// Runs apply() on a copy and returns it.
std::vector<float> applied(patchbay::Sampler& s, std::vector<float> logits,
                           std::vector<int32_t> history = {}, size_t prompt_len = 0);
// The code of the PluginError `body` throws; PB_STATUS_OK if it returns, the message in *msg.
template <class Body>
pb_status_code thrown_code(Body&& body, std::string* msg = nullptr) {
  try {
    body();
  } catch (const patchbay::PluginError& e) {
    if (msg != nullptr) *msg = e.what();
    return e.code();
  }
  return PB_STATUS_OK;
}

}  // namespace sampler_test
