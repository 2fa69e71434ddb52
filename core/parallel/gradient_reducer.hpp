// Data-parallel gradient averaging in buckets, started during backward as buckets fill
// (PyTorch DDP's scheme, REFERENCES.md §3.1):
//   - parameters are packed into buckets of about `bucket_bytes` in REVERSE registration
//     order (the last layers' gradients are ready first);
//   - begin() installs the engine's leaf-ready hook (engine/autograd.hpp); when every
//     parameter of the next bucket in order has its final gradient, the bucket's gradients are
//     packed into one flat buffer and a non-blocking AVG all-reduce starts
//     (ParallelismHandle::all_reduce_start, SDK 1.1). Buckets start strictly in index order on
//     every rank, so the ranks' collectives always pair up;
//   - finish() starts what is left (parameters backward never reached get zeros), waits for
//     every bucket in order and copies the averaged values back into each parameter's .grad.
// Only the time spent inside finish() is communication NOT hidden behind backward
// (unhidden_seconds). With overlap = false every bucket starts in finish() (no hook).
// With gradient accumulation call begin() before the LAST micro-batch's backward only.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/tensor.hpp"
#include "runtime/parallelism_handle.hpp"

namespace patchbay::parallel {

class GradientReducer {
 public:
  GradientReducer(runtime::ParallelismHandle& group, std::vector<engine::Tensor> parameters,
                  int64_t bucket_bytes, bool overlap);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  void begin();
  void finish();

  size_t bucket_count() const { return buckets_.size(); }
  // Parameter indices (registration order) of bucket b.
  const std::vector<size_t>& bucket_parameters(size_t b) const { return buckets_[b].parameters; }
  double unhidden_seconds() const { return unhidden_seconds_; }  // summed over finish() calls
  int64_t buckets_started_in_backward() const { return started_in_backward_; }

 private:
  struct Bucket {
    std::vector<size_t> parameters;
    size_t ready = 0;
    bool started = false;
    engine::Tensor flat;  // [sum of numels] f32 while in flight
    runtime::ParallelismHandle::Request request;
  };
  void on_ready(const engine::Tensor& leaf);
  void start(Bucket& bucket);
  void start_ready_buckets();

  runtime::ParallelismHandle& group_;
  std::vector<engine::Tensor> parameters_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;                     // parameter index -> bucket
  std::unordered_map<const void*, size_t> index_of_;  // parameter storage -> index
  size_t next_to_start_ = 0;
  bool overlap_;
  bool active_ = false;
  double unhidden_seconds_ = 0;
  int64_t started_in_backward_ = 0;
};

}  // namespace patchbay::parallel
