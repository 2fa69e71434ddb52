// `patchbay generate RUN --source TEXT | --source-file FILE` for an encoder-decoder run
// (commands_generate_seq2seq.cpp): the run's model decoded with the same sampler chain or
// beam search the decoder-only path builds (commands_generate.cpp builds the chain and hands
// it over), one output line per source.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/checkpoint_model.hpp"
#include "generate/beam_search.hpp"
#include "runtime/sampler_handle.hpp"

namespace patchbay::cli {

struct Seq2SeqGenerateRequest {
  std::vector<std::string> sources;  // --source, or the records of --source-file
  bool from_file = false;            // one line per source (newlines in outputs become spaces)
  int64_t max_new_tokens = 200;      // cut to model.context_length (- 1 for beam search)
  bool stop_at_special = true;
  std::optional<generate::BeamSearchOptions> beam;  // else sampling with the chain
};

// Builds the run's encoder-decoder and loads its weights into run.model.
void build_encoder_decoder_checkpoint(CheckpointModel& run);

// Decodes every source: with request.beam, beam search with the chain's processors (its
// selector unused); else the chain's next() per step. Prints outputs on stdout, statistics on
// stderr. The chain must have its vocabulary (give_vocabulary_if_needed) already.
int generate_seq2seq(CheckpointModel& run, const Seq2SeqGenerateRequest& request,
                     runtime::SamplerChain& chain);

}  // namespace patchbay::cli
