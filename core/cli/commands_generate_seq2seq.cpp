// Encoder-decoder generation for `patchbay generate` (generate_seq2seq.hpp): the sources
// decoded one at a time by generate/seq2seq_generate.hpp (the encoder once per source, the
// decoder with its caches; beam rows share the encoder memory).
#include <algorithm>
#include <chrono>
#include <iostream>

#include "cli/generate_seq2seq.hpp"
#include "common/error.hpp"
#include "generate/beam_generate.hpp"
#include "generate/seq2seq_generate.hpp"
#include "model/encoder_decoder.hpp"

namespace patchbay::cli {
namespace {

std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::replace(text.begin(), text.end(), '\r', ' ');
  return text;
}

}  // namespace

void build_encoder_decoder_checkpoint(CheckpointModel& run) {
  run.model = model::LanguageModel::build_encoder_decoder(
      model::encoder_decoder_options_from_config(run.config, run.tokenizer.vocab_size()),
      model::component_tables_from_config(run.config), *run.components.registry);
  std::vector<train::NamedTensor> params;
  for (const model::NamedParameter& p : run.model->parameters())
    params.push_back({p.name, p.tensor});
  run.checkpoint.load_into(params);
}

int generate_seq2seq(CheckpointModel& run, const Seq2SeqGenerateRequest& request,
                     runtime::SamplerChain& chain) {
  build_encoder_decoder_checkpoint(run);
  model::EncoderDecoderModel& model = *run.model->encoder_decoder();
  const generate::Seq2SeqTokens tokens =
      generate::seq2seq_tokens(run.tokenizer, request.stop_at_special);
  const int64_t context = model.options().base.context_length;
  std::cerr << "checkpoint: " << run.checkpoint.path().string() << " (step "
            << run.checkpoint.step() << "), encoder-decoder decoding\n";
  std::optional<generate::ChainBeamProcessors> processors;
  generate::BeamSearchOptions beam;
  if (request.beam) {
    beam = *request.beam;
    beam.max_new_tokens = std::min(beam.max_new_tokens, context - 1);
    processors.emplace(chain.clone());
    std::cerr << "beam search: " << beam.num_beams << " beams, length penalty "
              << beam.length_penalty << "; processors: " << chain.describe()
              << " (selector unused)\n";
  } else {
    std::cerr << "sampler chain: " << chain.describe() << "\n";
  }
  const int64_t max_new = std::min(request.max_new_tokens, context);
  int64_t generated = 0, stopped = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& source : request.sources) {
    const std::vector<int32_t> ids = generate::encode_source(model, run.tokenizer, source);
    std::vector<generate::Seq2SeqOutput> outputs;
    if (request.beam)
      outputs = generate::seq2seq_beam_search(model, ids, tokens, beam, &*processors);
    else
      outputs.push_back(generate::seq2seq_sample(model, ids, tokens, max_new, chain));
    for (size_t i = 0; i < outputs.size(); ++i) {
      const generate::Seq2SeqOutput& o = outputs[i];
      const std::string text = run.tokenizer.decode(o.tokens);
      if (outputs.size() > 1)
        std::cout << "[" << i + 1 << "] score " << o.score << (o.stopped ? " (eos)" : "") << "\n";
      std::cout << (request.from_file ? one_line(text) : text) << "\n";
    }
    std::cout << std::flush;
    generated += static_cast<int64_t>(outputs.front().tokens.size());
    stopped += outputs.front().stopped ? 1 : 0;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << request.sources.size() << " source(s), " << generated << " tokens generated, "
            << stopped << " stopped at </s>, the rest at max-new-tokens; " << seconds << " s\n";
  return kExitOk;
}

}  // namespace patchbay::cli
