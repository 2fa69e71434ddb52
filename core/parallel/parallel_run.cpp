// ParallelRun (see parallel_run.hpp).
#include "parallel/parallel_run.hpp"

#include <bit>

#include "common/error.hpp"
#include "config/component_view.hpp"
#include "data/split.hpp"
#include "engine/ops.hpp"

namespace patchbay::parallel {

std::unique_ptr<ParallelRun> ParallelRun::from_config(const config::ResolvedConfig& config,
                                                      runtime::Registry& registry,
                                                      const config::SchemaRegistry& schema,
                                                      const config::ComponentSchemaLookup& lookup) {
  auto run = std::make_unique<ParallelRun>();
  run->options_ = parallel_options_from_config(config);
  if (!run->options_.enabled) return run;
  const config::SelectedComponent selected =
      config::select_component(config, schema, lookup, "parallelism");
  run->group_ = std::make_unique<runtime::ParallelismHandle>(
      registry.create(PB_KIND_PARALLELISM, selected.name, *selected.config.view()),
      registry.host());
  return run;
}

runtime::ParallelismHandle& ParallelRun::group() {
  if (!group_)
    throw Error(ErrorKind::kInternal, "ParallelRun::group(): the run has no process group");
  return *group_;
}

engine::Tensor ParallelRun::shard_rows(const engine::Tensor& global) const {
  const int64_t w = world_size();
  if (w == 1) return global;
  const int64_t rows = global.shape().at(0);
  if (rows % w != 0)
    throw Error(ErrorKind::kInvalidArgument,
                "data parallel: train.batch_size (" + std::to_string(rows) +
                    ") must be a multiple of the " + std::to_string(w) +
                    " ranks, so that every rank trains on an equal share of each batch; "
                    "set train.batch_size to a multiple of the -np count");
  const int64_t per_rank = rows / w;
  return global.narrow(0, rank() * per_rank, per_rank);
}

void ParallelRun::check_agreement(const std::string& config_text,
                                  const std::string& plugin_set) const {
  if (!distributed()) return;
  const std::vector<int64_t> mine = {static_cast<int64_t>(data::fnv1a64(config_text)),
                                     static_cast<int64_t>(data::fnv1a64(plugin_set))};
  engine::Tensor local = engine::Tensor::from_data(mine.data(), {1, 2}, engine::DType::kI64);
  const engine::Tensor all = group_->all_gather(local);
  const int64_t* h = all.data<int64_t>();
  for (int64_t r = 1; r < world_size(); ++r) {
    const bool config_differs = h[2 * r] != h[0];
    const bool plugins_differ = h[2 * r + 1] != h[1];
    if (!config_differs && !plugins_differ) continue;
    std::string what = config_differs && plugins_differ ? "resolved config and plugin set"
                       : config_differs                 ? "resolved config"
                                        : "plugin set (components, versions, files)";
    throw Error(
        ErrorKind::kInvalidArgument,
        "rank " + std::to_string(r) + " of " + std::to_string(world_size()) + " runs a different " +
            what +
            " than rank 0; every rank must get the same config, --set overrides and plugin files "
            "(check the command line and PATCHBAY_PLUGIN_PATH on every host)");
  }
}

void ParallelRun::broadcast_from_writer(std::vector<engine::Tensor>& tensors) const {
  if (!distributed()) return;
  for (engine::Tensor& t : tensors) group_->broadcast(t, 0);
}

std::vector<double> ParallelRun::average(const std::vector<double>& values) const {
  if (!distributed() || values.empty()) return values;
  std::vector<float> f(values.begin(), values.end());
  engine::Tensor t = engine::Tensor::from_vector(f, {static_cast<int64_t>(f.size())});
  group_->all_reduce(t, PB_COLLECTIVE_AVG);
  const std::vector<float> out = t.to_vector();
  return std::vector<double>(out.begin(), out.end());
}

double ParallelRun::sum(double value) const {
  if (!distributed()) return value;
  const int64_t bits = std::bit_cast<int64_t>(value);
  const engine::Tensor all =
      group_->all_gather(engine::Tensor::from_data(&bits, {1}, engine::DType::kI64));
  double total = 0;
  for (int64_t r = 0; r < world_size(); ++r) total += std::bit_cast<double>(all.data<int64_t>()[r]);
  return total;
}

void ParallelRun::barrier() const {
  if (group_) group_->barrier();
}

void ParallelRun::fail(int exit_code, const std::string& message) const {
  if (!distributed()) return;
  group_->abort_job(exit_code, message);
}

}  // namespace patchbay::parallel
