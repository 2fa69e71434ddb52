// BERT masking for the masked-language-model objective (Devlin et al. 2019, §3.1 and
// appendix A.1): each position is selected with probability `select_rate` (0.15); a selected
// position's input becomes the mask token with probability `mask_rate` (0.8), a uniformly
// random token of the vocabulary with probability `random_rate` (0.1), and stays unchanged
// otherwise (0.1). The target is the original token at selected positions and
// `ignore_index` elsewhere, so cross_entropy(..., ignore_index) averages the loss over the
// selected positions only. Positions holding a protected id (special tokens such as the mask
// itself or padding) are never selected. Deterministic from the seed.
//
// This is the first piece of `[train] objective = "mlm"` (issue 10, part 4); the trainer,
// config keys, tokenizer mask token and evaluation are not wired yet.
#pragma once

#include <cstdint>
#include <vector>

namespace patchbay::train {

struct MlmMaskingOptions {
  double select_rate = 0.15;  // fraction of positions predicted
  double mask_rate = 0.8;     // of the selected: replaced by the mask token
  double random_rate = 0.1;   // of the selected: replaced by a random token (rest: unchanged)
  int64_t ignore_index = -100;
};

struct MlmMaskedBatch {
  std::vector<int32_t> inputs;   // the corrupted tokens fed to the model
  std::vector<int64_t> targets;  // original token at selected positions, ignore_index elsewhere
  int64_t selected = 0;          // number of selected positions
};

// tokens: any flat batch of ids in [0, vocab_size); mask_id in [0, vocab_size). Random
// replacements are drawn uniformly from [0, vocab_size) without the protected ids. Throws
// Error(kInvalidArgument) for rates outside [0, 1], mask_rate + random_rate > 1, or ids out of
// range.
MlmMaskedBatch mask_tokens(const std::vector<int32_t>& tokens, int64_t vocab_size, int32_t mask_id,
                           const std::vector<int32_t>& protected_ids,
                           const MlmMaskingOptions& options, uint64_t seed);

}  // namespace patchbay::train
