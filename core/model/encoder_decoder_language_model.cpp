// LanguageModel::build_encoder_decoder: an EncoderDecoderModel held by a LanguageModel, so the
// trainer, optimizers and checkpoints handle it through the one model type they know
// (language_model.hpp). Its ModelOptions count both stacks' blocks and name the components
// it uses; wte is the (decoder's) embedding, so parameter_count(true) leaves it out.
#include <algorithm>

#include "model/encoder_decoder.hpp"
#include "model/model_impl.hpp"

namespace patchbay::model {

std::unique_ptr<LanguageModel> LanguageModel::build_encoder_decoder(
    const EncoderDecoderOptions& options, const ComponentTables& tables,
    runtime::Registry& registry) {
  auto impl = std::make_unique<Impl>();
  impl->encoder_decoder = EncoderDecoderModel::build(options, tables, registry);
  const EncoderDecoderOptions& built = impl->encoder_decoder->options();
  impl->options = built.base;
  impl->options.n_layers = built.encoder_layers + built.decoder_layers;
  impl->options.positional = PositionalKind::kNone;
  impl->options.attention_kinds = {built.cross_attention};
  impl->options.feedforward_kinds = built.decoder_feedforward;
  for (const std::string& kind : built.encoder_feedforward)
    if (std::find(impl->options.feedforward_kinds.begin(), impl->options.feedforward_kinds.end(),
                  kind) == impl->options.feedforward_kinds.end())
      impl->options.feedforward_kinds.push_back(kind);
  impl->parameters = impl->encoder_decoder->parameters();
  for (const NamedParameter& p : impl->parameters)
    if (p.name == "shared.weight" || p.name == "decoder.embed.weight") impl->wte = p.tensor;
  return std::unique_ptr<LanguageModel>(new LanguageModel(std::move(impl)));
}

EncoderDecoderModel* LanguageModel::encoder_decoder() const { return impl_->encoder_decoder.get(); }

}  // namespace patchbay::model
