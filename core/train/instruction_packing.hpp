// Packing several instruction examples into one training row ([train.sft] pack_examples;
// docs/packing.md, "Packing examples in another objective"), so that short conversations do not
// each waste a row on padding.
//
// An example of L ids (L <= T + 1, after the overlong rule) takes L - 1 positions of a row:
// inputs ids[0, L - 1), targets[t] = ids[t + 1] where that id is the assistant's, else
// kIgnoreTarget — exactly the (input, target) pairs it has alone in a padded row, whose last
// input ids[L - 1] has no target and, attention being causal, is seen by no position that has
// one. So no target ever reaches into the next example. Every example of a row gets its own
// segment id (0, 1, ... in row order) and trailing padding one more (pad id as input,
// kIgnoreTarget as target): the model then attends within each example only and restarts its
// positions at each (LanguageModel::forward_packed), and each example gets exactly the loss and
// gradients it gets alone (tests/train/test_sft_packing.cpp).
//
// Which examples share a row: the examples of an epoch, in that epoch's shuffled order, go
// first-fit into rows of T positions (each into the first row opened so far with room for it, a
// new row when none has). The rows of epoch 0, then epoch 1, ... make one stream of packed rows,
// a pure function of (seed, epoch): the objective reads global row g of it.
#pragma once

#include <cstdint>
#include <vector>

#include "train/batches.hpp"
#include "train/instruction_data.hpp"

namespace patchbay::train {

// Positions an example takes in a packed row: ids.size() - 1.
int64_t packed_length(const InstructionExample& example);

// First-fit packing of `order` (indices into `examples`) into rows of `seq_len` positions, each
// row's examples in the order they were placed. Every example must fit a row alone
// (packed_length <= seq_len, which the overlong rule guarantees).
std::vector<std::vector<int64_t>> first_fit_rows(const std::vector<int64_t>& order,
                                                 const std::vector<InstructionExample>& examples,
                                                 int64_t seq_len);

// The batch of packed rows (see above): inputs, targets and segment_ids [rows.size(), seq_len]
// i32. An empty row is padding only (one segment).
Batch packed_instruction_batch(const std::vector<std::vector<const InstructionExample*>>& rows,
                               int64_t seq_len, int32_t pad_id);

}  // namespace patchbay::train
