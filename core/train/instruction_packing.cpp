// First-fit packing of instruction examples and their packed batches; see
// instruction_packing.hpp.
#include "train/instruction_packing.hpp"

#include <algorithm>
#include <string>

#include "common/error.hpp"
#include "train/objective.hpp"

namespace patchbay::train {

int64_t packed_length(const InstructionExample& example) {
  return static_cast<int64_t>(example.ids.size()) - 1;
}

namespace {

// The free positions of up to `slots` rows as a max tree, so that first-fit finds the leftmost
// row with room for an example in O(log slots) rather than by scanning every open row. Rows
// not opened yet have all seq_len positions free: when no open row has room, the leftmost
// such row is the next one to open.
class RowRoom {
 public:
  RowRoom(size_t slots, int64_t seq_len) {
    while (leaves_ < slots) leaves_ *= 2;
    tree_.assign(2 * leaves_, seq_len);
  }
  // Leftmost row with at least `length` free positions (one exists while length <= seq_len).
  size_t leftmost_with(int64_t length) const {
    size_t node = 1;
    while (node < leaves_) node = tree_[2 * node] >= length ? 2 * node : 2 * node + 1;
    return node - leaves_;
  }
  void take(size_t row, int64_t length) {
    size_t node = row + leaves_;
    tree_[node] -= length;
    for (node /= 2; node >= 1; node /= 2)
      tree_[node] = std::max(tree_[2 * node], tree_[2 * node + 1]);
  }

 private:
  size_t leaves_ = 1;
  std::vector<int64_t> tree_;
};

}  // namespace

std::vector<std::vector<int64_t>> first_fit_rows(const std::vector<int64_t>& order,
                                                 const std::vector<InstructionExample>& examples,
                                                 int64_t seq_len) {
  std::vector<std::vector<int64_t>> rows;
  RowRoom room(std::max<size_t>(order.size(), 1), seq_len);  // never more rows than examples
  for (const int64_t index : order) {
    const InstructionExample& example = examples[static_cast<size_t>(index)];
    const int64_t length = packed_length(example);
    if (length < 1 || length > seq_len)
      throw Error(ErrorKind::kInternal, example.where + ": an example of " +
                                            std::to_string(example.ids.size()) +
                                            " ids does not fit a packed row of " +
                                            std::to_string(seq_len) + " positions");
    const size_t row = room.leftmost_with(length);
    if (row == rows.size()) rows.emplace_back();  // the leftmost unopened row: open it
    rows[row].push_back(index);
    room.take(row, length);
  }
  return rows;
}

Batch packed_instruction_batch(const std::vector<std::vector<const InstructionExample*>>& rows,
                               int64_t seq_len, int32_t pad_id) {
  const int64_t n = static_cast<int64_t>(rows.size());
  std::vector<int32_t> inputs(static_cast<size_t>(n * seq_len), pad_id);
  std::vector<int32_t> targets(static_cast<size_t>(n * seq_len),
                               static_cast<int32_t>(kIgnoreTarget));
  std::vector<int32_t> segments(static_cast<size_t>(n * seq_len), 0);
  for (int64_t r = 0; r < n; ++r) {
    int64_t position = 0;
    int32_t segment = 0;
    for (const InstructionExample* example : rows[static_cast<size_t>(r)]) {
      const int64_t length = packed_length(*example);
      if (position + length > seq_len)
        throw Error(ErrorKind::kInternal, "packed row " + std::to_string(r) + " overflows " +
                                              std::to_string(seq_len) + " positions at " +
                                              example->where);
      for (int64_t t = 0; t < length; ++t) {
        const size_t at = static_cast<size_t>(r * seq_len + position + t);
        inputs[at] = example->ids[static_cast<size_t>(t)];
        if (example->assistant[static_cast<size_t>(t + 1)] != 0)
          targets[at] = example->ids[static_cast<size_t>(t + 1)];
        segments[at] = segment;
      }
      position += length;
      ++segment;
    }
    for (; position < seq_len; ++position)  // trailing padding: a segment of its own
      segments[static_cast<size_t>(r * seq_len + position)] = segment;
  }
  Batch batch{engine::Tensor::from_data(inputs.data(), {n, seq_len}, engine::DType::kI32),
              engine::Tensor::from_data(targets.data(), {n, seq_len}, engine::DType::kI32)};
  batch.segment_ids = engine::Tensor::from_data(segments.data(), {n, seq_len}, engine::DType::kI32);
  return batch;
}

}  // namespace patchbay::train
