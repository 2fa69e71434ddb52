// TensorParallel (see tensor_parallel.hpp). Layout arithmetic, for a tensor of shape
// [pre..., n, post...] split along the dim of n into `stride` blocks and W ranks:
//   full  viewed as [pre, stride, W, n / (stride W), post]
//   local viewed as [pre, stride,    n / (stride W), post]   (the rank's index along W)
// gather: all-gather the flattened locals -> [W, pre, stride, piece, post] -> permute (1, 2,
// 0, 3, 4) -> full; slice: narrow the W axis of the full view to this rank.
#include "parallel/tensor_parallel.hpp"

#include <algorithm>
#include <utility>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "engine/tensor_parallel.hpp"

namespace patchbay::parallel {
namespace {

struct Split {
  int64_t pre = 1, n = 0, post = 1;
};

Split split_of(const engine::Shape& shape, int64_t dim) {
  Split s;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t d = static_cast<int64_t>(i);
    if (d < dim) s.pre *= shape[i];
    if (d == dim) s.n = shape[i];
    if (d > dim) s.post *= shape[i];
  }
  return s;
}

}  // namespace

TensorParallel::TensorParallel(runtime::ParallelismHandle& group,
                               std::map<std::string, ShardLayout> partitioned)
    : group_(group), partitioned_(std::move(partitioned)) {
  engine::set_tensor_parallel_all_reduce(
      [this](engine::Tensor& t) { group_.all_reduce(t, PB_COLLECTIVE_SUM); });
}

TensorParallel::~TensorParallel() { engine::set_tensor_parallel_all_reduce({}); }

int64_t TensorParallel::rank() const { return group_.rank(); }
int64_t TensorParallel::world_size() const { return group_.world_size(); }

engine::Tensor TensorParallel::gather(const std::string& name, const engine::Tensor& local) const {
  engine::NoGradGuard no_grad;
  const auto it = partitioned_.find(name);
  if (it == partitioned_.end()) return local.detach().contiguous();
  const ShardLayout layout = it->second;
  const Split s = split_of(local.shape(), layout.dim);
  const int64_t w = world_size(), piece = s.n / layout.stride;
  const engine::Tensor all =
      group_.all_gather(local.detach().contiguous().reshape({1, local.numel()}));
  engine::Shape full_shape = local.shape();
  full_shape[static_cast<size_t>(layout.dim)] = s.n * w;
  return all.reshape({w, s.pre, layout.stride, piece, s.post})
      .permute({1, 2, 0, 3, 4})
      .contiguous()
      .reshape(full_shape);
}

engine::Tensor TensorParallel::slice(const std::string& name, const engine::Tensor& full) const {
  engine::NoGradGuard no_grad;
  const auto it = partitioned_.find(name);
  if (it == partitioned_.end()) return full;
  const ShardLayout layout = it->second;
  const int64_t w = world_size();
  if (layout.dim >= full.dim())
    throw Error(ErrorKind::kInvalidArgument, "tensor parallelism: '" + name + "' " + full.str() +
                                                 " has no dim " + std::to_string(layout.dim));
  const Split s = split_of(full.shape(), layout.dim);
  if (s.n % (layout.stride * w) != 0)
    throw Error(ErrorKind::kInvalidArgument,
                "tensor parallelism: '" + name + "' " + full.str() + " does not split along dim " +
                    std::to_string(layout.dim) + " into " + std::to_string(layout.stride) +
                    " blocks of " + std::to_string(w) + " equal slices");
  const int64_t piece = s.n / (layout.stride * w);
  engine::Shape local_shape = full.shape();
  local_shape[static_cast<size_t>(layout.dim)] = s.n / w;
  return full.contiguous()
      .reshape({s.pre, layout.stride, w, piece, s.post})
      .narrow(2, rank(), 1)
      .contiguous()
      .reshape(local_shape);
}

std::string TensorParallel::partitioned_owner(
    const std::string& state_name, int64_t numel,
    const std::map<std::string, engine::Tensor>& parameters) const {
  const size_t slash = state_name.rfind('/');
  if (slash == std::string::npos) return {};
  const std::string owner = state_name.substr(slash + 1);
  const auto p = parameters.find(owner);
  if (!partitioned(owner) || p == parameters.end() || p->second.numel() != numel) return {};
  return owner;
}

std::vector<runtime::OptimizerHandle::StateTensor> TensorParallel::full_state(
    const std::vector<runtime::OptimizerHandle::StateTensor>& local,
    const std::map<std::string, engine::Tensor>& parameters) const {
  std::vector<runtime::OptimizerHandle::StateTensor> out;
  for (const auto& s : local) {  // the optimizer's order is the same on every rank
    const std::string owner = partitioned_owner(s.name, s.tensor.numel(), parameters);
    if (owner.empty()) {
      out.push_back(s);
      continue;
    }
    const engine::Tensor shaped = s.tensor.reshape(parameters.at(owner).shape());
    out.push_back({s.name, gather(owner, shaped)});
  }
  return out;
}

std::map<std::string, engine::Tensor> TensorParallel::local_state(
    const std::map<std::string, engine::Tensor>& saved,
    const std::vector<runtime::OptimizerHandle::StateTensor>& current,
    const std::map<std::string, engine::Tensor>& parameters) const {
  std::map<std::string, engine::Tensor> out;
  for (const auto& s : current) {
    const auto it = saved.find(s.name);
    if (it == saved.end()) continue;  // restore_state names what is missing
    const std::string owner = partitioned_owner(s.name, s.tensor.numel(), parameters);
    if (owner.empty()) {
      out[s.name] = it->second;
      continue;
    }
    // The full parameter's shape: the local one with the split dim W times longer.
    engine::Shape full_shape = parameters.at(owner).shape();
    full_shape[static_cast<size_t>(partitioned_.at(owner).dim)] *= world_size();
    out[s.name] = slice(owner, it->second.reshape(full_shape)).reshape(s.tensor.shape());
  }
  // Saved state this optimizer does not hold (another optimizer's, or AMSGrad's maximum) goes
  // through unchanged, so that restore_state refuses it by name as in one process.
  for (const auto& [name, tensor] : saved)
    if (out.count(name) == 0 &&
        std::none_of(current.begin(), current.end(), [&](const auto& s) { return s.name == name; }))
      out[name] = tensor;
  return out;
}

}  // namespace patchbay::parallel
