// Encoder-decoder log-likelihoods and greedy generation (seq2seq_request_scorer.hpp).
#include "eval/seq2seq_request_scorer.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <utility>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/device.hpp"
#include "engine/ops.hpp"
#include "eval/target_scoring.hpp"

namespace patchbay::eval {
namespace {

namespace eng = patchbay::engine;

eng::Tensor host_logits(const eng::Tensor& logits) { return logits.to(eng::cpu()).contiguous(); }

eng::Tensor id_matrix(const std::vector<int32_t>& values, int64_t rows, int64_t width) {
  return eng::Tensor::from_data(values.data(), {rows, width}, eng::DType::kI32);
}

// One distinct (context, continuation) pair and the requests it answers.
struct Seq2SeqRow {
  std::vector<int32_t> source;   // the context, left-truncated to S
  std::vector<int32_t> targets;  // the continuation
  std::vector<size_t> requests;
};

// Rows [begin, end) of `rows`: distinct sources through the encoder once each, their memory
// gathered to the rows, the decoder on [start] + targets[:-1]; scores into `results`.
void score_batch(model::EncoderDecoderModel& model, int32_t start_token,
                 const std::vector<Seq2SeqRow>& rows, size_t begin, size_t end,
                 std::vector<LoglikelihoodResult>& results, ScoringStats& s) {
  const int64_t vocab = model.options().base.vocab_size;
  std::map<std::vector<int32_t>, int64_t> source_index;
  std::vector<const std::vector<int32_t>*> sources;
  std::vector<int64_t> source_of_row;
  size_t source_width = 0, target_width = 0;
  for (size_t r = begin; r < end; ++r) {
    const auto [it, inserted] =
        source_index.try_emplace(rows[r].source, static_cast<int64_t>(sources.size()));
    if (inserted) sources.push_back(&it->first);
    source_of_row.push_back(it->second);
    source_width = std::max(source_width, rows[r].source.size());
    target_width = std::max(target_width, rows[r].targets.size());
  }
  const auto unique = static_cast<int64_t>(sources.size());
  const auto count = static_cast<int64_t>(end - begin);
  std::vector<int32_t> source_ids(static_cast<size_t>(unique) * source_width, 0);
  std::vector<int32_t> source_mask(source_ids.size(), 0);  // right padding, mask 0
  for (size_t u = 0; u < sources.size(); ++u) {
    std::copy(sources[u]->begin(), sources[u]->end(), source_ids.begin() + u * source_width);
    std::fill_n(source_mask.begin() + u * source_width, sources[u]->size(), 1);
    s.tokens += static_cast<int64_t>(sources[u]->size());
  }
  std::vector<int32_t> decoder_ids(static_cast<size_t>(count) * target_width, start_token);
  for (size_t r = begin; r < end; ++r) {
    const std::vector<int32_t>& t = rows[r].targets;  // [start] + t[:-1], right-padded
    std::copy(t.begin(), t.end() - 1, decoder_ids.begin() + (r - begin) * target_width + 1);
    s.tokens += static_cast<int64_t>(t.size());
  }
  const auto width = static_cast<int64_t>(source_width);
  const eng::Tensor mask = id_matrix(source_mask, unique, width);
  eng::Tensor memory = model.encode(id_matrix(source_ids, unique, width), mask, false);
  eng::Tensor row_mask = mask;
  if (unique != count) {  // the rows sharing a source read its one memory
    std::vector<eng::Tensor> memory_rows, mask_rows;
    for (const int64_t u : source_of_row) {
      memory_rows.push_back(eng::narrow(memory, 0, u, 1));
      mask_rows.push_back(eng::narrow(mask, 0, u, 1));
    }
    memory = eng::contiguous(eng::concat(memory_rows, 0));
    row_mask = eng::contiguous(eng::concat(mask_rows, 0));
  }
  // Causal decoder: the right padding after a row's targets changes nothing before it.
  const eng::Tensor logits =
      host_logits(model
                      .decode(memory, row_mask,
                              id_matrix(decoder_ids, count, static_cast<int64_t>(target_width)),
                              eng::Tensor(), false)
                      .logits);  // [count, target_width, V]
  const float* data = logits.data<float>();
  for (size_t r = begin; r < end; ++r) {
    const float* row_logits = data + (r - begin) * target_width * static_cast<size_t>(vocab);
    const LoglikelihoodResult scored =
        score_targets(vocab, rows[r].targets, [&](int64_t k) { return row_logits + k * vocab; });
    for (size_t i : rows[r].requests) {
      const int64_t truncated = results[i].truncated_tokens;
      results[i] = scored;
      results[i].truncated_tokens = truncated;
    }
  }
  s.rows += count;
  s.shared_contexts += static_cast<int64_t>(
      std::count_if(source_index.begin(), source_index.end(), [&](const auto& entry) {
        return std::count(source_of_row.begin(), source_of_row.end(), entry.second) > 1;
      }));
  ++s.batches;
}

}  // namespace

std::vector<LoglikelihoodResult> score_loglikelihood_seq2seq(model::EncoderDecoderModel& model,
                                                             int32_t start_token,
                                                             const std::vector<TokenPair>& requests,
                                                             int64_t batch_size,
                                                             ScoringStats* stats) {
  if (batch_size < 1)
    throw Error(ErrorKind::kInvalidArgument,
                "batch size must be >= 1, found " + std::to_string(batch_size));
  const int64_t source_limit = model.options().source_context_length;
  const int64_t target_limit = model.options().base.context_length;
  std::vector<LoglikelihoodResult> results(requests.size());
  ScoringStats s;
  s.requests = static_cast<int64_t>(requests.size());
  std::map<std::pair<std::vector<int32_t>, std::vector<int32_t>>, size_t> row_of_pair;
  std::vector<Seq2SeqRow> rows;
  for (size_t i = 0; i < requests.size(); ++i) {
    const TokenPair& r = requests[i];
    if (r.context.empty() || r.continuation.empty())
      throw Error(ErrorKind::kInternal, "a seq2seq request with an empty context or continuation");
    if (static_cast<int64_t>(r.continuation.size()) > target_limit)
      throw Error(ErrorKind::kInvalidArgument,
                  "a continuation of " + std::to_string(r.continuation.size()) +
                      " tokens is longer than the decoder's model.context_length = " +
                      std::to_string(target_limit) + "; shorten the task's continuations");
    const int64_t cut = std::max<int64_t>(0, static_cast<int64_t>(r.context.size()) - source_limit);
    results[i].truncated_tokens = cut;
    if (cut > 0) ++s.truncated_requests;
    std::vector<int32_t> source(r.context.begin() + cut, r.context.end());
    const auto [it, inserted] =
        row_of_pair.try_emplace({std::move(source), r.continuation}, rows.size());
    if (inserted) rows.push_back({it->first.first, it->first.second, {}});
    rows[it->second].requests.push_back(i);
  }
  // Longest context first, then by context (the choices of an item side by side, so that one
  // encoder pass serves them), then by continuation.
  std::sort(rows.begin(), rows.end(), [](const Seq2SeqRow& a, const Seq2SeqRow& b) {
    if (a.source.size() != b.source.size()) return a.source.size() > b.source.size();
    if (a.source != b.source) return a.source < b.source;
    return a.targets < b.targets;
  });
  eng::NoGradGuard no_grad;
  for (size_t begin = 0; begin < rows.size(); begin += static_cast<size_t>(batch_size))
    score_batch(model, start_token, rows, begin,
                std::min(rows.size(), begin + static_cast<size_t>(batch_size)), results, s);
  if (stats != nullptr) *stats = s;
  return results;
}

std::vector<GenerationResult> generate_until_seq2seq(model::EncoderDecoderModel& model,
                                                     int32_t start_token, const TextCodec& codec,
                                                     const std::vector<std::string>& prompts,
                                                     const std::vector<std::string>& until,
                                                     int64_t max_gen_toks) {
  const int64_t source_limit = model.options().source_context_length;
  const int64_t max_new = std::min(max_gen_toks, model.options().base.context_length - 1);
  if (max_new < 1)
    throw Error(
        ErrorKind::kInvalidArgument,
        "generation_kwargs.max_gen_toks = " + std::to_string(max_gen_toks) +
            " and model.context_length = " + std::to_string(model.options().base.context_length) +
            " leave no token to generate");
  std::vector<std::vector<int32_t>> encoded(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) encoded[i] = codec.encode(prompts[i]);
  const std::vector<size_t> order = longest_first(encoded);
  std::vector<GenerationResult> results(prompts.size());
  const int64_t vocab = model.options().base.vocab_size;
  eng::NoGradGuard no_grad;
  for (size_t i : order) {
    GenerationResult& r = results[i];
    const std::vector<int32_t> source = generation_prompt(
        encoded[i], codec.prefix_token, source_limit, r.truncated_tokens, "to give the encoder");
    model::Seq2SeqDecodeState state = model.start_decoding(
        id_matrix(source, 1, static_cast<int64_t>(source.size())), eng::Tensor(), 1 + max_new);
    eng::Tensor logits = model.decode_step(state, id_matrix({start_token}, 1, 1));
    const int64_t truncated = r.truncated_tokens;
    r = greedy_until(codec, until, max_new, vocab, logits, [&](int32_t token) {
      return model.decode_step(state, id_matrix({token}, 1, 1));
    });
    r.truncated_tokens = truncated;
  }
  return results;
}

}  // namespace patchbay::eval
