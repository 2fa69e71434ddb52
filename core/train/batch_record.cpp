// Recording training batches as JSON Lines; see batch_record.hpp.
#include "train/batch_record.hpp"

#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/tensor.hpp"

namespace patchbay::train {
namespace {

// A CPU i32 [rows, n] tensor as nested arrays.
nlohmann::json int_rows(const engine::Tensor& tensor, const char* what) {
  if (tensor.dtype() != engine::DType::kI32 || tensor.dim() != 2)
    throw Error(ErrorKind::kInternal, std::string("batch record: ") + what +
                                          " must be i32 [rows, n], found " + tensor.str());
  const engine::Tensor dense = tensor.contiguous();
  const int32_t* values = dense.data<int32_t>();
  const int64_t rows = dense.size(0), columns = dense.size(1);
  nlohmann::json out = nlohmann::json::array();
  for (int64_t r = 0; r < rows; ++r)
    out.push_back(std::vector<int32_t>(values + r * columns, values + (r + 1) * columns));
  return out;
}

}  // namespace

nlohmann::json batch_record(int64_t step, int64_t micro, const Batch& batch) {
  nlohmann::json line = {{"step", step},
                         {"micro", micro},
                         {"inputs", int_rows(batch.inputs, "inputs")},
                         {"targets", int_rows(batch.targets, "targets")}};
  if (batch.segment_ids.defined()) line["segment_ids"] = int_rows(batch.segment_ids, "segment_ids");
  if (batch.source.defined()) line["source"] = int_rows(batch.source, "source");
  return line;
}

BatchRecorder::BatchRecorder(const std::filesystem::path& file, bool append)
    : file_(file), out_(file, append ? std::ios::app : std::ios::trunc) {
  if (!out_)
    throw Error(ErrorKind::kIo, "cannot open " + file.string() +
                                    " to record the training batches (--record-batches); check "
                                    "the folder exists and is writable");
}

void BatchRecorder::record(int64_t step, int64_t micro, const Batch& batch) {
  out_ << batch_record(step, micro, batch).dump() << '\n';
  out_.flush();
  if (!out_)
    throw Error(ErrorKind::kIo, "writing " + file_.string() +
                                    " (--record-batches) failed at step " + std::to_string(step) +
                                    "; is the disk full?");
}

}  // namespace patchbay::train
