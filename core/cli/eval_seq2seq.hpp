// `patchbay eval RUN --test FILE` for an encoder-decoder run (commands_eval_seq2seq.cpp): on a
// test set of JSON Lines {"source", "target"}, the loss of the targets, and BLEU and chrF
// (sacreBLEU's definitions, eval/mt_metrics.hpp) of the model's decodes (greedy, or beam
// search with --num-beams) and of the copy-the-source baseline.
#pragma once

#include <cstdint>
#include <string>

#include "model/language_model.hpp"
#include "runtime/component_instance.hpp"

namespace patchbay::cli {

struct Seq2SeqTestArgs {
  std::string test_file;
  int64_t num_beams = 1;  // 1 = greedy (batched); > 1 = beam search per source
  double length_penalty = 1.0;
  int64_t max_new_tokens = 0;  // 0 = model.context_length (- 1 for beam search)
  int64_t limit = -1;          // the first N pairs (-1 = all)
  int64_t batch_size = 16;     // pairs per loss batch and per greedy batch
  std::string outputs;         // write the decodes here, one per line ("" = do not)
  int64_t samples = 3;         // source / reference / output triples printed
};

// Prints the report on stdout. Throws Error(kInvalidArgument) for a model that is not an
// encoder-decoder, a bad test file (file:line), or a source longer than the encoder reads.
int run_eval_seq2seq_test(model::LanguageModel& model, const runtime::TokenizerHandle& tokenizer,
                          const Seq2SeqTestArgs& args);

}  // namespace patchbay::cli
