// First-fit packing of instruction examples and their packed batches; see
// instruction_packing.hpp.
#include "train/instruction_packing.hpp"

#include <string>

#include "common/error.hpp"
#include "train/objective.hpp"

namespace patchbay::train {

int64_t packed_length(const InstructionExample& example) {
  return static_cast<int64_t>(example.ids.size()) - 1;
}

std::vector<std::vector<int64_t>> first_fit_rows(const std::vector<int64_t>& order,
                                                 const std::vector<InstructionExample>& examples,
                                                 int64_t seq_len) {
  std::vector<std::vector<int64_t>> rows;
  std::vector<int64_t> room;  // free positions of each row
  for (const int64_t index : order) {
    const InstructionExample& example = examples[static_cast<size_t>(index)];
    const int64_t length = packed_length(example);
    if (length < 1 || length > seq_len)
      throw Error(ErrorKind::kInternal, example.where + ": an example of " +
                                            std::to_string(example.ids.size()) +
                                            " ids does not fit a packed row of " +
                                            std::to_string(seq_len) + " positions");
    size_t row = 0;
    while (row < rows.size() && room[row] < length) ++row;
    if (row == rows.size()) {
      rows.emplace_back();
      room.push_back(seq_len);
    }
    rows[row].push_back(index);
    room[row] -= length;
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
