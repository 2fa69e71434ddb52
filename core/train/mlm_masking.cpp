// mask_tokens (mlm_masking.hpp): one pass over the tokens with a 64-bit Mersenne twister;
// each position draws one uniform for selection and, when selected, one for the 80/10/10
// choice and (for "random") one uniform token.
#include "train/mlm_masking.hpp"

#include <algorithm>
#include <random>
#include <string>

#include "common/error.hpp"

namespace patchbay::train {

MlmMaskedBatch mask_tokens(const std::vector<int32_t>& tokens, int64_t vocab_size, int32_t mask_id,
                           const std::vector<int32_t>& protected_ids,
                           const MlmMaskingOptions& options, uint64_t seed) {
  auto refuse = [](const std::string& why) { throw Error(ErrorKind::kInvalidArgument, why); };
  for (double rate : {options.select_rate, options.mask_rate, options.random_rate})
    if (!(rate >= 0.0 && rate <= 1.0))
      refuse("MLM masking rates must lie in [0, 1], found " + std::to_string(rate));
  if (options.mask_rate + options.random_rate > 1.0 + 1e-12)
    refuse("MLM masking: mask_rate + random_rate must be <= 1 (the rest stays unchanged), found " +
           std::to_string(options.mask_rate) + " + " + std::to_string(options.random_rate));
  if (vocab_size < 1 || mask_id < 0 || mask_id >= vocab_size)
    refuse("MLM masking: the mask token id " + std::to_string(mask_id) +
           " must lie in the vocabulary [0, " + std::to_string(vocab_size) +
           "); add the mask token to the tokenizer as a special token");
  std::vector<int32_t> replacements;  // ids a random replacement may take
  for (int64_t id = 0; id < vocab_size; ++id)
    if (id != mask_id &&
        std::find(protected_ids.begin(), protected_ids.end(), id) == protected_ids.end())
      replacements.push_back(static_cast<int32_t>(id));
  if (replacements.empty() && options.random_rate > 0.0)
    refuse("MLM masking: no ordinary token left for random replacement");

  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::uniform_int_distribution<size_t> pick(0, replacements.empty() ? 0 : replacements.size() - 1);
  MlmMaskedBatch out;
  out.inputs = tokens;
  out.targets.assign(tokens.size(), options.ignore_index);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t token = tokens[i];
    if (token < 0 || token >= vocab_size)
      refuse("MLM masking: token " + std::to_string(token) + " at position " + std::to_string(i) +
             " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    const double select = uniform(rng);
    if (token == mask_id ||
        std::find(protected_ids.begin(), protected_ids.end(), token) != protected_ids.end())
      continue;
    if (select >= options.select_rate) continue;
    out.targets[i] = token;
    ++out.selected;
    const double choice = uniform(rng);
    if (choice < options.mask_rate)
      out.inputs[i] = mask_id;
    else if (choice < options.mask_rate + options.random_rate)
      out.inputs[i] = replacements[pick(rng)];
  }
  return out;
}

}  // namespace patchbay::train
