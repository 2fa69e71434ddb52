// seq2seq_batch (seq2seq_batch.hpp).
#include "train/seq2seq_batch.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace patchbay::train {

Batch seq2seq_batch(const std::vector<Seq2SeqExample>& examples, int32_t pad_id) {
  constexpr int32_t kIgnore = -100;  // objective.hpp's kIgnoreTarget
  size_t source_len = 1, target_len = 1;
  for (const Seq2SeqExample& e : examples) {
    if (e.source.empty() || e.target.empty())
      throw Error(ErrorKind::kInternal, "seq2seq_batch: an example with an empty source or target");
    source_len = std::max(source_len, e.source.size());
    target_len = std::max(target_len, e.target.size());
  }
  const size_t n = examples.size();
  std::vector<int32_t> source(n * source_len, pad_id), source_padding(n * source_len, 0);
  std::vector<int32_t> inputs(n * target_len, pad_id), targets(n * target_len, kIgnore),
      target_padding(n * target_len, 0);
  for (size_t r = 0; r < n; ++r) {
    const Seq2SeqExample& e = examples[r];
    for (size_t i = 0; i < e.source.size(); ++i) {
      source[r * source_len + i] = e.source[i];
      source_padding[r * source_len + i] = 1;
    }
    for (size_t i = 0; i < e.target.size(); ++i) {
      targets[r * target_len + i] = e.target[i];
      inputs[r * target_len + i] = i == 0 ? pad_id : e.target[i - 1];
      target_padding[r * target_len + i] = 1;
    }
  }
  const int64_t rows = static_cast<int64_t>(n);
  auto tensor = [&](const std::vector<int32_t>& v, size_t len) {
    return engine::Tensor::from_data(v.data(), {rows, static_cast<int64_t>(len)},
                                     engine::DType::kI32);
  };
  Batch batch;
  batch.inputs = tensor(inputs, target_len);
  batch.targets = tensor(targets, target_len);
  batch.source = tensor(source, source_len);
  batch.source_padding = tensor(source_padding, source_len);
  batch.target_padding = tensor(target_padding, target_len);
  return batch;
}

}  // namespace patchbay::train
