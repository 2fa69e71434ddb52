// LanguageModel::convert_weights_for_inference (see language_model.hpp): bf16 weight
// matrices for decoding, converted in place so every layer (the plugins' own tensors
// included) reads them.
//
// What converts: every parameter with two or more dims (wte, an untied head, the layers'
// weight matrices) except wpe, which a step only gathers one row of. Vectors (biases, norm
// gains) stay f32: they are a rounding error of the bytes and keep the f32 ops they feed
// exact. The engine multiplies f32 activations by the bf16 matrices with f32 accumulation
// (engine matmul: f32 x bf16 -> f32) and the embedding gathers bf16 rows as f32, so only the
// weights are rounded, once. A decode step then streams half the bytes.
//
// Each tensor keeps its identity: its TensorImpl (the handle the plugin holds) gets the new
// storage, strides and dtype, as PyTorch's `param.data = param.data.to(torch.bfloat16)`.
#include "common/error.hpp"
#include "engine/ops.hpp"
#include "model/model_impl.hpp"

namespace patchbay::model {

namespace eng = engine;

namespace {

// What a converted tensor held before, to restore it when the trial step fails.
struct SavedTensor {
  eng::TensorImpl* impl;
  std::shared_ptr<eng::Storage> storage;
  eng::Shape strides;
  int64_t offset;
  eng::DType dtype;
  bool requires_grad;
};

void restore(const std::vector<SavedTensor>& saved) {
  for (const SavedTensor& s : saved) {
    s.impl->storage = s.storage;
    s.impl->strides = s.strides;
    s.impl->offset = s.offset;
    s.impl->dtype = s.dtype;
    s.impl->requires_grad = s.requires_grad;
  }
}

}  // namespace

void LanguageModel::convert_weights_for_inference(eng::DType dtype) {
  Impl& m = *impl_;
  if (dtype != eng::DType::kF32 && dtype != eng::DType::kBF16) {
    throw Error(ErrorKind::kInvalidArgument,
                std::string("convert_weights_for_inference: weights can be f32 or bf16, found ") +
                    eng::dtype_name(dtype));
  }
  if (dtype == m.weights_dtype) return;
  if (dtype == eng::DType::kF32) {
    throw Error(ErrorKind::kInvalidArgument,
                "convert_weights_for_inference: the weights are bf16 already and cannot get "
                "their f32 digits back; build or load the model again for f32 weights");
  }
  std::vector<SavedTensor> saved;
  for (const NamedParameter& p : m.parameters) {
    if (p.tensor.dim() < 2 || p.name == "wpe.weight" || p.tensor.dtype() != eng::DType::kF32)
      continue;
    eng::TensorImpl* impl = p.tensor.impl();
    saved.push_back(
        {impl, impl->storage, impl->strides, impl->offset, impl->dtype, impl->requires_grad});
    eng::Tensor converted;
    {
      eng::NoGradGuard no_grad;
      converted = p.tensor.detach().to(dtype).contiguous();
    }
    impl->storage = converted.impl()->storage;
    impl->strides = converted.strides();
    impl->offset = converted.storage_offset();
    impl->dtype = dtype;
    impl->requires_grad = false;  // inference only: no optimizer may update these
    impl->grad.reset();
  }
  m.weights_dtype = dtype;
  // A layer that cannot take bf16 matrices fails here, not in the middle of generating.
  try {
    DecodeState trial = start_decoding(1, 1);
    const int32_t token = 0;
    (void)decode_step(trial, eng::Tensor::from_data(&token, {1, 1}, eng::DType::kI32));
  } catch (const Error& e) {
    restore(saved);
    m.weights_dtype = eng::DType::kF32;
    throw Error(ErrorKind::kInvalidArgument,
                std::string("bf16 weights: a layer of this model does not accept bf16 weight "
                            "matrices (") +
                    e.what() + "); decode with f32 weights instead");
  }
}

eng::DType LanguageModel::weights_dtype() const { return impl_->weights_dtype; }

}  // namespace patchbay::model
