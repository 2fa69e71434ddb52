// Building the model + optimizer from a config, and one optimizer update with gradient
// accumulation and clipping; see trainer.hpp.
#include <cmath>
#include <optional>

#include "common/error.hpp"
#include "config/component_view.hpp"
#include "engine/ops.hpp"
#include "model/encoder_decoder.hpp"
#include "train/device_step.hpp"
#include "train/grad_clip.hpp"
#include "train/grad_norm_in_backward.hpp"
#include "train/lr_scale.hpp"
#include "train/lr_schedule.hpp"
#include "train/objective.hpp"
#include "train/param_groups.hpp"
#include "train/trainer.hpp"

namespace patchbay::train {

TrainableModel build_trainable_model(const config::ResolvedConfig& config,
                                     runtime::Registry& registry,
                                     const config::ComponentSchemaLookup& lookup,
                                     int64_t vocab_size, int64_t tp_rank, int64_t tp_size,
                                     const InitialWeights* initial) {
  TrainableModel t;
  if (model::model_architecture(config) == "encoder_decoder") {
    if (tp_size > 1)
      throw Error(ErrorKind::kInvalidArgument,
                  "model.architecture = \"encoder_decoder\" cannot be split over tensor-parallel "
                  "ranks yet; use parallelism.kind = \"mpi_data\" or none");
    t.model = model::LanguageModel::build_encoder_decoder(
        model::encoder_decoder_options_from_config(config, vocab_size),
        model::component_tables_from_config(config), registry);
  } else {
    model::ModelOptions options = model::model_options_from_config(config, vocab_size);
    options.tp_rank = tp_rank;
    options.tp_size = tp_size;
    t.model =
        model::LanguageModel::build(options, model::component_tables_from_config(config), registry);
  }
  const config::SelectedComponent selected =
      config::select_component(config, make_training_schema(), lookup, "optimizer");
  t.optimizer_name = selected.name;
  t.optimizer = std::make_unique<runtime::OptimizerHandle>(
      registry.create(PB_KIND_OPTIMIZER, selected.name, *selected.config.view()), registry.host());
  TrainOptions fine_tuning;
  read_fine_tuning_options(config, fine_tuning);
  const std::vector<model::NamedParameter> model_parameters = t.model->parameters();
  if (initial != nullptr) load_initial_weights(model_parameters, *initial);
  if (fine_tuning.lora.enabled) {
    // A LoRA run stores the adapters, plus the layers' own non-trainable state (Performer's
    // features and redraw count), which changes while training and is not in the base weights.
    std::vector<model::NamedParameter> layer_state;
    for (const model::NamedParameter& p : model_parameters)
      if (!p.tensor.requires_grad()) layer_state.push_back(p);
    const model::ModelOptions& mo = t.model->options();
    t.lora = std::make_shared<LoraAdapters>(
        model_parameters, mo.d_model, fine_tuning.lora, mo.seed,
        [&mo](const std::string& name) { return parameter_owner(mo, name); });
    t.parameters = t.lora->parameters();
    t.parameters.insert(t.parameters.end(), layer_state.begin(), layer_state.end());
  } else {
    if (!fine_tuning.freeze.empty()) freeze_parameters(fine_tuning.freeze, model_parameters);
    t.parameters = model_parameters;
  }
  t.optimizer_parameters = optimizer_parameters(t.parameters, fine_tuning.lr_scales);
  for (const runtime::OptimizerHandle::Parameter& p : t.optimizer_parameters)
    t.parameter_tensors.push_back(p.tensor);
  t.optimizer->add_parameters(t.optimizer_parameters);
  return t;
}

std::vector<runtime::OptimizerHandle::Parameter> optimizer_parameters(
    const std::vector<model::NamedParameter>& parameters, const std::vector<LrScale>& lr_scales) {
  const std::vector<double> lr_factor = lr_scale_per_parameter(lr_scales, parameters);
  std::vector<runtime::OptimizerHandle::Parameter> params;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const model::NamedParameter& p = parameters[i];
    // Non-trainable state (Performer's features and redraw count) is checkpointed with the
    // parameters but never handed to the optimizer or the gradient reducers: a zero gradient
    // there would still let weight decay move it.
    if (!p.tensor.requires_grad()) continue;
    const pb_param_options options = param_options(p.name, p.tensor.shape());
    params.push_back({p.name, p.tensor, options.weight_decay_scale,
                      options.lr_scale * lr_factor[i],
                      options.group != nullptr ? options.group : "default"});
  }
  return params;
}

void use_bf16_weight_copies(TrainableModel& trainable) {
  if (!trainable.use_bf16_copies || trainable.optimizer_step || !trainable.optimizer) return;
  if (!trainable.bf16_copies) {
    trainable.bf16_copies =
        std::make_shared<Bf16WeightCopies>(*trainable.optimizer, trainable.parameter_tensors);
  }
  trainable.bf16_copies->use_in_scope();
}

void pause_bf16_weight_copies(TrainableModel& trainable) {
  if (trainable.bf16_copies) trainable.bf16_copies->pause();
}

namespace {

// The rest of a device step (device_step.hpp): the norm, clipping and the step's values stay
// on the device; the update is made whatever they are (the trainer checks them when it reads).
StepResult device_step_update(TrainableModel& trainable, const TrainOptions& options,
                              const engine::Tensor& loss_sum, const engine::Tensor& aux_sum,
                              StepResult result) {
  const double per_micro = 1.0 / static_cast<double>(options.grad_accum_steps);
  const engine::Tensor loss = engine::mul_scalar(loss_sum, per_micro);
  const engine::Tensor aux = aux_sum.defined()
                                 ? engine::mul_scalar(aux_sum, per_micro)
                                 : engine::zeros({}, engine::DType::kF32, loss.device());
  engine::Tensor square_sum = device_grad_square_sum(trainable.parameter_tensors);
  if (!square_sum.defined()) square_sum = engine::zeros({}, engine::DType::kF32, loss.device());
  const engine::Tensor norm = engine::sqrt(square_sum);
  if (options.grad_clip > 0)
    clip_grads_on_device(trainable.parameter_tensors, norm, options.grad_clip);
  trainable.optimizer->step(result.lr);
  for (engine::Tensor& p : trainable.parameter_tensors) p.zero_grad();
  result.device_values =
      pack_step_values(loss.to(engine::DType::kF32), aux.to(engine::DType::kF32), norm);
  result.values_pending = true;
  return result;
}

}  // namespace

StepResult train_step(TrainableModel& trainable, const TrainOptions& options, int64_t step,
                      const std::function<Batch(int64_t micro_step)>& micro_batch) {
  StepResult result;
  const int64_t accum = options.grad_accum_steps;
  // bf16 mixed precision: matmuls in bf16 for this update's forwards and backwards (one bf16
  // copy per weight, written by the optimizer's previous update pass where it can); the scope
  // closes before clipping and the optimizer touch the f32 master weights.
  std::optional<engine::AutocastGuard> autocast;
  if (options.precision == "bf16") {
    autocast.emplace(engine::DType::kBF16);
    use_bf16_weight_copies(trainable);  // copies the optimizer wrote in the previous update
  } else {
    pause_bf16_weight_copies(trainable);
  }
  // The norm is summed during the last backward (grad_norm_in_backward.hpp), unless the
  // trainer's own hooks reduce or rewrite the gradients after backward (data parallelism).
  // On a device the step's values stay there (device_step.hpp): no host read in this step.
  const bool on_device = keeps_step_values_on_device(trainable);
  const bool norm_in_backward = !on_device && !trainable.grad_norm && !trainable.after_backward;
  std::optional<GradNormInBackward> backward_norm;
  engine::Tensor device_loss, device_aux;  // device scalars: sums over the micro-batches
  for (int64_t m = 0; m < accum; ++m) {
    const Batch batch = micro_batch(m);
    // LoRA's dropout masks: a function of the run's seed and the micro-batch's global index.
    if (trainable.lora) trainable.lora->begin_micro_batch(static_cast<uint64_t>(step * accum + m));
    const model::ForwardResult out = forward_batch(*trainable.model, batch, /*training=*/true);
    if (trainable.lora) trainable.lora->check_applied();  // a plugin that bypassed the adapters
    const int64_t vocab = out.logits.size(-1);
    const engine::Tensor loss = engine::cross_entropy(
        out.logits.reshape({-1, vocab}), batch.targets.reshape({-1}).to(out.logits.device()));
    engine::Tensor total = loss;
    if (out.aux_loss.defined()) {
      total = total + out.aux_loss;
      if (on_device) {
        device_aux = device_aux.defined() ? engine::add(device_aux, out.aux_loss.detach())
                                          : out.aux_loss.detach();
      } else {
        result.aux_loss += out.aux_loss.item() / static_cast<double>(accum);
      }
    }
    if (on_device) {
      device_loss = device_loss.defined() ? engine::add(device_loss, loss.detach()) : loss.detach();
    } else {
      result.loss += loss.item() / static_cast<double>(accum);
    }
    result.layer_stats.add(out.stats);
    if (trainable.before_backward) trainable.before_backward(m, accum);
    if (norm_in_backward && m == accum - 1) backward_norm.emplace(trainable.parameter_tensors);
    engine::backward(accum == 1 ? total : total * (1.0 / static_cast<double>(accum)));
  }
  autocast.reset();  // bf16 scope ends before gradients are reduced, clipped and applied
  if (trainable.after_backward) trainable.after_backward(result);  // (data parallel: averaged)
  result.lr = learning_rate(options.schedule, step);
  if (on_device) return device_step_update(trainable, options, device_loss, device_aux, result);
  // Clipping: the norm was summed during backward (or is taken now); the factor is applied
  // inside the optimizer's update pass (optimizer_step_scaled), not by a pass of its own over
  // the gradients.
  result.grad_norm = trainable.grad_norm ? trainable.grad_norm()
                     : backward_norm     ? backward_norm->finish()
                                         : global_grad_norm(trainable.parameter_tensors);
  const double grad_scale = clip_factor(result.grad_norm, options.grad_clip);
  result.finite = std::isfinite(result.loss) && std::isfinite(result.aux_loss) &&
                  std::isfinite(result.grad_norm);
  if (result.finite) {
    if (trainable.optimizer_step) {
      trainable.optimizer_step(result.lr, grad_scale);
    } else {
      optimizer_step_scaled(*trainable.optimizer, trainable.parameter_tensors, result.lr,
                            grad_scale);
    }
  }
  for (engine::Tensor& p : trainable.parameter_tensors) p.zero_grad();
  return result;
}

}  // namespace patchbay::train
