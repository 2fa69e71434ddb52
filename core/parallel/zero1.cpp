// Zero1 (see zero1.hpp).
#include "parallel/zero1.hpp"

#include <set>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"

namespace patchbay::parallel {

namespace {

// "exp_avg/blocks.0.w@128" -> {"exp_avg", "blocks.0.w@128"}; the state's prefix is what
// precedes the last '/' that is followed by the piece name.
bool split_state_name(const std::string& state, const std::string& piece, std::string& prefix) {
  if (state.size() <= piece.size() + 1 ||
      state.compare(state.size() - piece.size(), piece.size(), piece) != 0 ||
      state[state.size() - piece.size() - 1] != '/')
    return false;
  prefix = state.substr(0, state.size() - piece.size() - 1);
  return true;
}

}  // namespace

Zero1::Zero1(runtime::ParallelismHandle& group,
             const std::vector<runtime::OptimizerHandle::Parameter>& parameters,
             const std::function<std::unique_ptr<runtime::OptimizerHandle>()>& make_optimizer)
    : group_(group), parameters_(parameters) {
  for (const auto& p : parameters_) {
    if (p.tensor.dtype() != engine::DType::kF32)
      throw Error(ErrorKind::kInvalidArgument, "ZeRO-1: parameter '" + p.name + "' is " +
                                                   engine::dtype_name(p.tensor.dtype()) +
                                                   "; shards hold f32 only");
    offsets_.push_back(total_);
    total_ += p.tensor.numel();
  }
  const int64_t world = group_.world_size();
  shard_ = (total_ + world - 1) / world;
  const int64_t begin = group_.rank() * shard_, end = std::min(total_, begin + shard_);
  engine::NoGradGuard no_grad;
  std::vector<runtime::OptimizerHandle::Parameter> registered;
  for (size_t k = 0; k < parameters_.size(); ++k) {
    const int64_t lo = std::max(begin, offsets_[k]);
    const int64_t hi = std::min(end, offsets_[k] + parameters_[k].tensor.numel());
    if (lo >= hi) continue;
    Piece piece{k, lo - offsets_[k], lo - begin, hi - lo,
                parameters_[k].name + "@" + std::to_string(lo - offsets_[k])};
    engine::Tensor view =
        parameters_[k].tensor.reshape({-1}).narrow(0, piece.param_offset, piece.length);
    view.set_requires_grad(true);
    registered.push_back({piece.name, view, parameters_[k].weight_decay_scale,
                          parameters_[k].lr_scale, parameters_[k].group});
    piece_info_.push_back(piece);
    pieces_.push_back(view);
  }
  optimizer_ = make_optimizer();
  optimizer_->add_parameters(registered);
}

engine::Tensor Zero1::flat_shard_of(
    const std::function<engine::Tensor(size_t piece)>& piece_values) const {
  engine::Tensor shard = engine::zeros({shard_});
  for (size_t i = 0; i < piece_info_.size(); ++i) {
    engine::Tensor dst = shard.narrow(0, piece_info_[i].shard_offset, piece_info_[i].length);
    engine::copy_(dst, piece_values(i).reshape({-1}));
  }
  return shard;
}

void Zero1::reduce_scatter_gradients() {
  engine::NoGradGuard no_grad;
  const int64_t world = group_.world_size();
  std::vector<engine::Tensor> flat;
  for (const auto& p : parameters_) {
    const engine::Tensor g = p.tensor.grad();
    flat.push_back(g.defined() ? g.reshape({-1}) : engine::zeros({p.tensor.numel()}));
  }
  if (world * shard_ > total_) flat.push_back(engine::zeros({world * shard_ - total_}));
  const engine::Tensor all = engine::concat(flat, 0);
  engine::Tensor mine = group_.reduce_scatter(all, PB_COLLECTIVE_AVG);
  for (size_t i = 0; i < piece_info_.size(); ++i)
    pieces_[i].set_grad(
        mine.narrow(0, piece_info_[i].shard_offset, piece_info_[i].length).contiguous().clone());
}

void Zero1::step(double lr) {
  optimizer_->step(lr);
  all_gather_parameters();
}

void Zero1::all_gather_parameters() {
  engine::NoGradGuard no_grad;
  const engine::Tensor shard = flat_shard_of([&](size_t i) { return pieces_[i]; });
  const engine::Tensor all = group_.all_gather(shard);
  for (size_t k = 0; k < parameters_.size(); ++k) {
    engine::Tensor dst = parameters_[k].tensor;
    engine::copy_(dst, all.narrow(0, offsets_[k], dst.numel()).reshape(dst.shape()));
  }
}

std::vector<runtime::OptimizerHandle::StateTensor> Zero1::full_state() {
  engine::NoGradGuard no_grad;
  const std::vector<runtime::OptimizerHandle::StateTensor> mine = optimizer_->state();
  // Which prefixes are element-wise (one value per element) and which are per-parameter
  // scalars (a step count): decided on the first piece longer than one element.
  std::map<std::string, std::vector<const engine::Tensor*>>
      by_prefix;  // prefix -> tensor per piece
  for (const auto& s : mine)
    for (size_t i = 0; i < piece_info_.size(); ++i) {
      std::string prefix;
      if (!split_state_name(s.name, piece_info_[i].name, prefix)) continue;
      auto& slots = by_prefix[prefix];
      slots.resize(piece_info_.size(), nullptr);
      slots[i] = &s.tensor;
    }
  // Every rank must gather the same prefixes in the same order: the optimizer's prefixes are
  // the same everywhere (std::map orders them).
  std::vector<runtime::OptimizerHandle::StateTensor> out;
  for (const auto& [prefix, slots] : by_prefix) {
    bool elementwise = true;
    for (size_t i = 0; i < slots.size(); ++i)
      if (slots[i] != nullptr && piece_info_[i].length > 1) {
        elementwise = slots[i]->numel() == piece_info_[i].length;
        break;
      }
    if (elementwise) {
      const engine::Tensor shard = flat_shard_of([&](size_t i) { return *slots[i]; });
      const engine::Tensor all = group_.all_gather(shard);
      for (size_t k = 0; k < parameters_.size(); ++k)
        out.push_back({prefix + "/" + parameters_[k].name,
                       all.narrow(0, offsets_[k], parameters_[k].tensor.numel())
                           .reshape(parameters_[k].tensor.shape())
                           .contiguous()
                           .clone()});
    } else {
      // A per-parameter scalar is the same on every piece of that parameter; the owner of the
      // parameter's first element contributes it (others may hold no piece of it).
      std::vector<float> values(parameters_.size(), 0.0f);
      engine::Shape shape;
      engine::DType dtype = engine::DType::kF32;
      for (size_t i = 0; i < slots.size(); ++i) {
        if (slots[i] == nullptr) continue;
        shape = slots[i]->shape();
        dtype = slots[i]->dtype();
        if (piece_info_[i].param_offset == 0)
          values[piece_info_[i].parameter] = slots[i]->to_vector().at(0);
      }
      engine::Tensor v = engine::Tensor::from_vector(values, {static_cast<int64_t>(values.size())});
      group_.all_reduce(v, PB_COLLECTIVE_SUM);
      const std::vector<float> summed = v.to_vector();
      for (size_t k = 0; k < parameters_.size(); ++k)
        out.push_back({prefix + "/" + parameters_[k].name, engine::full(shape, summed[k], dtype)});
    }
  }
  return out;
}

void Zero1::restore_full_state(const std::map<std::string, engine::Tensor>& saved) {
  engine::NoGradGuard no_grad;
  std::map<std::string, engine::Tensor> mine;
  for (const auto& s : optimizer_->state())
    for (size_t i = 0; i < piece_info_.size(); ++i) {
      std::string prefix;
      if (!split_state_name(s.name, piece_info_[i].name, prefix)) continue;
      const std::string full_name = prefix + "/" + parameters_[piece_info_[i].parameter].name;
      const auto it = saved.find(full_name);
      if (it == saved.end())
        throw Error(ErrorKind::kInvalidArgument,
                    "ZeRO-1 resume: the checkpoint has no optimizer state '" + full_name + "'");
      if (s.tensor.numel() == piece_info_[i].length && it->second.numel() != 1) {
        mine[s.name] = it->second.reshape({-1})
                           .narrow(0, piece_info_[i].param_offset, piece_info_[i].length)
                           .reshape(s.tensor.shape())
                           .contiguous();
      } else {
        mine[s.name] = it->second.reshape(s.tensor.shape()).contiguous();
      }
    }
  optimizer_->restore_state(mine);
}

}  // namespace patchbay::parallel
