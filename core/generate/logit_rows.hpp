// Small tensor <-> host conversions shared by the beam decoders (beam_generate.cpp,
// seq2seq_generate.cpp): token rows in, each row's last-position logits out.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ops.hpp"
#include "engine/tensor.hpp"

namespace patchbay::generate {

// rows (equal lengths, at least one) as an i32 tensor [rows, length].
inline engine::Tensor token_rows(const std::vector<std::vector<int32_t>>& rows) {
  const int64_t length = static_cast<int64_t>(rows.front().size());
  std::vector<int32_t> flat;
  flat.reserve(rows.size() * rows.front().size());
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return engine::Tensor::from_data(flat.data(), {static_cast<int64_t>(rows.size()), length},
                                   engine::DType::kI32);
}

// logits [rows, T, V] -> each row's last position's logits, as host floats [rows][V].
inline std::vector<std::vector<float>> last_logits_per_row(const engine::Tensor& logits) {
  const engine::Tensor last = engine::narrow(logits, 1, logits.size(1) - 1, 1);  // [rows, 1, V]
  const int64_t rows = logits.size(0), vocab = logits.size(2);
  const std::vector<float> flat = last.to(engine::cpu()).to_vector();
  std::vector<std::vector<float>> out(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i)
    out[static_cast<size_t>(i)].assign(flat.begin() + i * vocab, flat.begin() + (i + 1) * vocab);
  return out;
}

}  // namespace patchbay::generate
