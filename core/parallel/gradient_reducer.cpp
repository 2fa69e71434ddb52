// GradientReducer (see gradient_reducer.hpp).
#include "parallel/gradient_reducer.hpp"

#include <chrono>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"

namespace patchbay::parallel {

GradientReducer::GradientReducer(runtime::ParallelismHandle& group,
                                 std::vector<engine::Tensor> parameters, int64_t bucket_bytes,
                                 bool overlap)
    : group_(group), parameters_(std::move(parameters)), overlap_(overlap) {
  bucket_of_.resize(parameters_.size());
  int64_t bytes_in_bucket = 0;
  for (size_t k = parameters_.size(); k-- > 0;) {
    const engine::Tensor& p = parameters_[k];
    if (p.dtype() != engine::DType::kF32)
      throw Error(ErrorKind::kInvalidArgument,
                  "data parallel: parameter " + std::to_string(k) + " is " +
                      engine::dtype_name(p.dtype()) +
                      "; the gradient buckets hold f32 master gradients only");
    if (buckets_.empty() || bytes_in_bucket >= bucket_bytes) {
      buckets_.emplace_back();
      bytes_in_bucket = 0;
    }
    buckets_.back().parameters.push_back(k);
    bucket_of_[k] = buckets_.size() - 1;
    bytes_in_bucket += p.numel() * 4;
    index_of_[p.data_ptr()] = k;
  }
}

GradientReducer::~GradientReducer() {
  if (active_) engine::set_leaf_grad_ready_hook(nullptr);
}

void GradientReducer::begin() {
  for (Bucket& b : buckets_) {
    b.ready = 0;
    b.started = false;
  }
  next_to_start_ = 0;
  if (!overlap_) return;
  active_ = true;
  engine::set_leaf_grad_ready_hook([this](const engine::Tensor& leaf) { on_ready(leaf); });
}

void GradientReducer::on_ready(const engine::Tensor& leaf) {
  const auto it = index_of_.find(leaf.data_ptr());
  if (it == index_of_.end()) return;  // a leaf that is not a trained parameter
  ++buckets_[bucket_of_[it->second]].ready;
  const int64_t before = static_cast<int64_t>(next_to_start_);
  start_ready_buckets();
  started_in_backward_ += static_cast<int64_t>(next_to_start_) - before;
}

void GradientReducer::start_ready_buckets() {
  while (next_to_start_ < buckets_.size() &&
         buckets_[next_to_start_].ready >= buckets_[next_to_start_].parameters.size()) {
    start(buckets_[next_to_start_]);
    ++next_to_start_;
  }
}

void GradientReducer::start(Bucket& bucket) {
  std::vector<engine::Tensor> pieces;
  pieces.reserve(bucket.parameters.size());
  for (size_t k : bucket.parameters) {
    const engine::Tensor g = parameters_[k].grad();
    pieces.push_back(g.defined() ? g.reshape({-1}) : engine::zeros({parameters_[k].numel()}));
  }
  bucket.flat = pieces.size() == 1 ? pieces[0].contiguous().clone() : engine::concat(pieces, 0);
  bucket.request = group_.all_reduce_start(bucket.flat, PB_COLLECTIVE_AVG);
  bucket.started = true;
}

void GradientReducer::finish() {
  if (active_) {
    engine::set_leaf_grad_ready_hook(nullptr);
    active_ = false;
  }
  const auto t0 = std::chrono::steady_clock::now();
  // Parameters backward never reached (unused this step) count as ready with zero gradients.
  for (; next_to_start_ < buckets_.size(); ++next_to_start_) start(buckets_[next_to_start_]);
  for (Bucket& bucket : buckets_) {
    group_.wait(bucket.request);
    int64_t offset = 0;
    for (size_t k : bucket.parameters) {
      engine::Tensor& p = parameters_[k];
      const int64_t n = p.numel();
      engine::Tensor averaged = bucket.flat.narrow(0, offset, n).reshape(p.shape());
      engine::Tensor g = p.grad();
      if (g.defined()) {
        engine::copy_(g, averaged);
      } else {
        p.set_grad(averaged.contiguous().clone());
      }
      offset += n;
    }
    bucket.flat = engine::Tensor();
  }
  unhidden_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace patchbay::parallel
