// `patchbay eval RUN --test FILE` for encoder-decoders (eval_seq2seq.hpp): test loss over the
// target tokens (special-token targets left out, as the validation loss does), then BLEU and
// chrF of the model's decodes and of copying the source, against the targets.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>

#include "cli/command.hpp"
#include "cli/eval_seq2seq.hpp"
#include "common/error.hpp"
#include "engine/ops.hpp"
#include "engine/ops_indexing.hpp"
#include "eval/mt_metrics.hpp"
#include "eval/seq2seq_pairs.hpp"
#include "generate/seq2seq_generate.hpp"
#include "model/encoder_decoder.hpp"
#include "train/evaluator.hpp"
#include "train/seq2seq_batch.hpp"

namespace patchbay::cli {
namespace {

namespace eng = engine;

struct TestPair {
  std::string source, target;
  train::Seq2SeqExample ids;  // target ids end in </s>
};

std::vector<TestPair> read_test_pairs(const model::EncoderDecoderModel& model,
                                      const runtime::TokenizerHandle& tokenizer,
                                      const Seq2SeqTestArgs& args, int32_t eos_id) {
  std::vector<TestPair> pairs;
  for (eval::Seq2SeqRecord& r : eval::read_seq2seq_records(args.test_file, true)) {
    if (args.limit >= 0 && static_cast<int64_t>(pairs.size()) >= args.limit) break;
    const std::string at = args.test_file + ":" + std::to_string(r.line) + ": ";
    TestPair p{std::move(r.source), std::move(*r.target), {}};
    try {
      p.ids.source = generate::encode_source(model, tokenizer, p.source);
    } catch (const Error& e) {
      throw Error(e.kind(), at + e.what());
    }
    p.ids.target = tokenizer.encode(p.target);
    p.ids.target.push_back(eos_id);
    if (static_cast<int64_t>(p.ids.target.size()) > model.options().base.context_length)
      throw Error(ErrorKind::kInvalidArgument,
                  at + "the target is " + std::to_string(p.ids.target.size()) +
                      " tokens with its </s>, more than model.context_length = " +
                      std::to_string(model.options().base.context_length) +
                      "; long pairs are refused, not truncated");
    pairs.push_back(std::move(p));
  }
  return pairs;
}

// Σ cross-entropy over target tokens that are not special tokens, and their count.
std::pair<double, int64_t> test_loss(model::LanguageModel& model,
                                     const std::vector<TestPair>& pairs,
                                     const train::TokenBytes& bytes, int32_t pad_id,
                                     int64_t batch_size) {
  eng::NoGradGuard no_grad;
  double total = 0;
  int64_t count = 0;
  for (size_t start = 0; start < pairs.size(); start += static_cast<size_t>(batch_size)) {
    std::vector<train::Seq2SeqExample> examples;
    for (size_t i = start; i < std::min(pairs.size(), start + static_cast<size_t>(batch_size)); ++i)
      examples.push_back(pairs[i].ids);
    train::Batch batch = train::seq2seq_batch(examples, pad_id);
    const eng::Tensor host =
        batch.targets.to(eng::DType::kI32).contiguous();  // [rows, T] on the CPU
    std::vector<int32_t> targets(host.data<int32_t>(), host.data<int32_t>() + host.numel());
    for (int32_t& t : targets)
      if (t >= 0 && bytes.special[static_cast<size_t>(t)] != 0) t = -100;
    for (const int32_t t : targets) count += t >= 0 ? 1 : 0;
    const eng::Tensor masked =
        eng::Tensor::from_data(targets.data(), batch.targets.shape(), eng::DType::kI32);
    const model::ForwardResult out = train::forward_batch(model, batch, false);
    eng::CrossEntropyOptions options;
    options.reduction = eng::LossReduction::kSum;
    total += eng::cross_entropy(out.logits, masked.to(out.logits.device()), options).item();
  }
  return {total, count};
}

// The text of generated ids without their special tokens (HF's skip_special_tokens = True, what
// BLEU is usually computed on); the </s> that ends a decode is never among them.
std::string text_without_specials(const runtime::TokenizerHandle& tokenizer,
                                  const std::vector<int32_t>& ids, const train::TokenBytes& bytes) {
  std::vector<int32_t> kept;
  for (const int32_t t : ids)
    if (bytes.special[static_cast<size_t>(t)] == 0) kept.push_back(t);
  return tokenizer.decode(kept);
}

std::vector<std::string> greedy_outputs(model::EncoderDecoderModel& model,
                                        const runtime::TokenizerHandle& tokenizer,
                                        const std::vector<TestPair>& pairs,
                                        const generate::Seq2SeqTokens& tokens, int32_t eos_id,
                                        const train::TokenBytes& bytes, int64_t max_new,
                                        int64_t batch_size) {
  std::vector<std::string> outputs;
  for (size_t start = 0; start < pairs.size(); start += static_cast<size_t>(batch_size)) {
    const size_t end = std::min(pairs.size(), start + static_cast<size_t>(batch_size));
    size_t longest = 0;
    for (size_t i = start; i < end; ++i) longest = std::max(longest, pairs[i].ids.source.size());
    const int64_t rows = static_cast<int64_t>(end - start), width = static_cast<int64_t>(longest);
    std::vector<int32_t> ids(static_cast<size_t>(rows * width), tokens.start_id);
    std::vector<int32_t> mask(ids.size(), 0);
    for (size_t i = start; i < end; ++i)
      for (size_t k = 0; k < pairs[i].ids.source.size(); ++k) {
        ids[(i - start) * longest + k] = pairs[i].ids.source[k];
        mask[(i - start) * longest + k] = 1;
      }
    const std::vector<std::vector<int32_t>> decoded =
        model.greedy_decode(eng::Tensor::from_data(ids.data(), {rows, width}, eng::DType::kI32),
                            eng::Tensor::from_data(mask.data(), {rows, width}, eng::DType::kI32),
                            tokens.start_id, eos_id, max_new);
    for (const std::vector<int32_t>& d : decoded)
      outputs.push_back(text_without_specials(tokenizer, d, bytes));
  }
  return outputs;
}

int32_t special_id(const runtime::TokenizerHandle& tokenizer, const std::string& text) {
  for (const runtime::SpecialTokenInfo& s : tokenizer.special_tokens())
    if (s.text == text) return s.id;
  throw Error(ErrorKind::kInvalidArgument,
              "eval --test: the run's tokenizer has no \"" + text +
                  "\" special token (train.objective = \"seq2seq\" adds <pad> and </s>)");
}

}  // namespace

int run_eval_seq2seq_test(model::LanguageModel& language_model,
                          const runtime::TokenizerHandle& tokenizer, const Seq2SeqTestArgs& args) {
  model::EncoderDecoderModel* model = language_model.encoder_decoder();
  if (model == nullptr)
    throw Error(ErrorKind::kInvalidArgument,
                "eval --test: the run holds a single-stack model; a test set of {source, "
                "target} pairs scores an encoder-decoder (model.architecture = "
                "\"encoder_decoder\")");
  if (args.num_beams < 1 || args.batch_size < 1)
    throw Error(ErrorKind::kInvalidArgument,
                "eval --test: --num-beams and --batch-size must be >= 1");
  const int32_t pad_id = special_id(tokenizer, "<pad>"), eos_id = special_id(tokenizer, "</s>");
  const generate::Seq2SeqTokens tokens = generate::seq2seq_tokens(tokenizer, true);
  const train::TokenBytes bytes = train::token_bytes(tokenizer);
  const std::vector<TestPair> pairs = read_test_pairs(*model, tokenizer, args, eos_id);
  const int64_t context = model->options().base.context_length;
  const int64_t max_new = std::min(args.max_new_tokens > 0 ? args.max_new_tokens : context,
                                   context - (args.num_beams > 1 ? 1 : 0));

  const auto [loss_sum, loss_tokens] =
      test_loss(language_model, pairs, bytes, pad_id, args.batch_size);
  std::cout << "test: " << args.test_file << ", " << pairs.size() << " pairs\n"
            << "loss: " << loss_sum / static_cast<double>(std::max<int64_t>(loss_tokens, 1))
            << " nats per target token (" << loss_tokens
            << " tokens; special-token targets such as </s> left out)\n"
            << std::flush;

  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> outputs;
  if (args.num_beams == 1) {
    outputs =
        greedy_outputs(*model, tokenizer, pairs, tokens, eos_id, bytes, max_new, args.batch_size);
  } else {
    generate::BeamSearchOptions beam;
    beam.num_beams = args.num_beams;
    beam.length_penalty = args.length_penalty;
    beam.max_new_tokens = max_new;
    for (const TestPair& p : pairs)
      outputs.push_back(text_without_specials(
          tokenizer,
          generate::seq2seq_beam_search(*model, p.ids.source, tokens, beam, nullptr).front().tokens,
          bytes));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<std::string> sources, references;
  for (const TestPair& p : pairs) {
    sources.push_back(p.source);
    references.push_back(p.target);
  }
  const std::string decoding = args.num_beams == 1
                                   ? std::string("greedy")
                                   : "beam search, " + std::to_string(args.num_beams) + " beams";
  std::cout << "model (" << decoding << ", " << seconds
            << " s): " << eval::format_bleu(eval::corpus_bleu(outputs, references)) << "; "
            << eval::format_chrf(eval::corpus_chrf(outputs, references)) << "\n"
            << "copy-the-source baseline: "
            << eval::format_bleu(eval::corpus_bleu(sources, references)) << "; "
            << eval::format_chrf(eval::corpus_chrf(sources, references)) << "\n";
  for (int64_t i = 0; i < std::min<int64_t>(args.samples, static_cast<int64_t>(pairs.size()));
       ++i) {
    const size_t k = static_cast<size_t>(i) * pairs.size() /
                     static_cast<size_t>(std::max<int64_t>(args.samples, 1));
    std::cout << "--- sample " << i + 1 << " (line " << k + 1 << ")\n"
              << "source:    " << sources[k] << "\nreference: " << references[k]
              << "\noutput:    " << outputs[k] << "\n";
  }
  if (!args.outputs.empty()) {
    std::ofstream out(args.outputs);
    for (std::string o : outputs) {
      std::replace(o.begin(), o.end(), '\n', ' ');
      out << o << "\n";
    }
    if (!out)
      throw Error(ErrorKind::kInvalidArgument, "eval --outputs " + args.outputs + ": cannot write");
    std::cout << "decodes written to " << args.outputs << " (one per line)\n";
  }
  return kExitOk;
}

}  // namespace patchbay::cli
