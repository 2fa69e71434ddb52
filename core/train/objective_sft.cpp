// "sft": instruction tuning of a causal LM on conversations, loss on the assistant's tokens
// only (every assistant turn), through the objective seam (objective.hpp). Its data are not
// the reader's token windows but [train.sft] data, a JSON Lines file of conversations
// (instruction_data.hpp), rendered with the model's chat template or a built-in one
// (eval/chat_template.hpp); the windows only give the batch shape [rows, T + 1].
//
// Which examples a micro-batch holds: global row g = (step * accum + micro) * rows + row
// reads example perm_e[g mod n] of epoch e = g / n, perm_e a Fisher-Yates shuffle of the n
// training examples seeded by (seed, e): a pure function of (seed, step, micro), so a resume
// is exact. With [train.sft] pack_examples, each epoch's examples in the order perm_e go
// first-fit into packed rows (instruction_packing.hpp), epoch after epoch, and global row g
// reads packed row g of that stream (still a pure function of the seed and g). Validation
// batch b holds validation examples b * rows .. + rows, one per row (padding rows past the
// end), independent of the seed and of packing.
//
// The template is found and the data read, rendered and tokenised on first use, not when the
// objective is made, so `patchbay generate` and `chat` (which make it to ask makes_samples)
// need neither the data file nor the init_from a merged export no longer names.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>

#include "common/error.hpp"
#include "data/split.hpp"
#include "train/epoch_order.hpp"
#include "train/instruction_data.hpp"
#include "train/instruction_packing.hpp"
#include "train/objective.hpp"
#include "train/sft_options.hpp"

namespace patchbay::train {
namespace {

namespace fs = std::filesystem;

uint64_t mix(std::initializer_list<uint64_t> words) {
  return data::splitmix64_words(0x7366745f70657270ull, words);  // "sft_perp"
}

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  return shuffled_indices(n, mix({seed, static_cast<uint64_t>(epoch)}));
}

class InstructionObjective final : public TrainingObjective {
 public:
  InstructionObjective(SftOptions options, int64_t grad_accum_steps,
                       const runtime::TokenizerHandle& tokenizer)
      : options_(std::move(options)), accum_(grad_accum_steps), tokenizer_(tokenizer) {}

  const std::string& name() const override { return name_; }

  Batch training_batch(const TokenWindows& windows, uint64_t seed, int64_t step,
                       int64_t micro) const override {
    load();
    const int64_t rows = windows.ids.size(0), seq_len = windows.ids.size(1) - 1;
    const int64_t n = static_cast<int64_t>(train_.examples.size());
    std::lock_guard<std::mutex> lock(permutation_mutex_);
    if (options_.pack_examples) {
      std::vector<std::vector<const InstructionExample*>> packed;
      for (int64_t r = 0; r < rows; ++r)
        packed.push_back(packed_row((step * accum_ + micro) * rows + r, seed, seq_len));
      return packed_instruction_batch(packed, seq_len, pad_id_);
    }
    std::vector<const InstructionExample*> chosen;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t g = (step * accum_ + micro) * rows + r;
      const int64_t epoch = g / n;
      if (epoch != permutation_epoch_ || seed != permutation_seed_) {
        permutation_ = epoch_permutation(n, seed, epoch);
        permutation_epoch_ = epoch;
        permutation_seed_ = seed;
      }
      chosen.push_back(
          &train_.examples[static_cast<size_t>(permutation_[static_cast<size_t>(g % n)])]);
    }
    return instruction_batch(chosen, seq_len, pad_id_);
  }

  bool packs_examples() const override { return options_.pack_examples; }

  Batch validation_batch(const TokenWindows& windows, int64_t batch_index) const override {
    load();
    const int64_t rows = windows.ids.size(0), seq_len = windows.ids.size(1) - 1;
    std::vector<const InstructionExample*> chosen;
    for (int64_t r = 0; r < rows; ++r) {
      const size_t i = static_cast<size_t>(batch_index * rows + r);
      chosen.push_back(i < validation_.examples.size() ? &validation_.examples[i] : nullptr);
    }
    return instruction_batch(chosen, seq_len, pad_id_);
  }

  ObjectiveEvaluation evaluate(model::LanguageModel& model, const ValidationWindows& windows,
                               const EvalSettings& settings) const override {
    load();
    EvalSettings capped = settings;
    const int64_t n = static_cast<int64_t>(validation_.examples.size());
    capped.batches =
        std::min(settings.batches, (n + settings.batch_size - 1) / settings.batch_size);
    ObjectiveEvaluation result;
    result.eval = evaluate_batches(
        model, [&](int64_t b) { return validation_batch(windows(b), b); }, capped);
    const int64_t seen = std::min(n, capped.batches * settings.batch_size);
    result.extra = {{"objective", name_}, {"val_conversations", seen}};
    result.summary = "assistant-token loss over " + std::to_string(seen) + " of " +
                     std::to_string(n) + " validation conversations";
    result.target_unit = "assistant token";
    return result;
  }

  bool makes_samples() const override { return true; }

  std::string batch_rule() const override {
    if (options_.pack_examples)
      return "sft: global row g = (step * accum + micro) * rows + row reads packed row g of the "
             "epochs of " +
             options_.data.string() +
             " in turn, each epoch's examples in the order perm(seed, epoch) placed first-fit "
             "into rows of seq_len positions with segment ids";
    return "sft: global row g = (step * accum + micro) * rows + row reads example perm(seed, g / "
           "n)[g mod n] "
           "of " +
           options_.data.string() + ", one example per row, padded";
  }

 private:
  // Packed row g of the stream of epochs' first-fit rows (see the top of this file). Caller
  // holds permutation_mutex_. Epochs are planned in turn as g reaches them; the plan of the
  // newest one is kept with the row counts of all planned so far.
  std::vector<const InstructionExample*> packed_row(int64_t g, uint64_t seed,
                                                    int64_t seq_len) const {
    if (epoch_rows_.empty() || seed != packed_seed_) {
      packed_seed_ = seed;
      epoch_rows_.clear();  // first row index of each planned epoch, then the end
      epoch_rows_.push_back(0);
      packed_epoch_ = -1;
    }
    const int64_t n = static_cast<int64_t>(train_.examples.size());
    auto plan = [&](int64_t epoch) {
      packed_plan_ = first_fit_rows(epoch_permutation(n, seed, epoch), train_.examples, seq_len);
      packed_epoch_ = epoch;
    };
    while (epoch_rows_.back() <= g) {  // plan epochs until one holds row g
      plan(static_cast<int64_t>(epoch_rows_.size()) - 1);
      epoch_rows_.push_back(epoch_rows_.back() + static_cast<int64_t>(packed_plan_.size()));
    }
    const int64_t epoch =
        static_cast<int64_t>(std::upper_bound(epoch_rows_.begin(), epoch_rows_.end(), g) -
                             epoch_rows_.begin()) -
        1;
    if (epoch != packed_epoch_) plan(epoch);
    std::vector<const InstructionExample*> row;
    for (const int64_t index :
         packed_plan_[static_cast<size_t>(g - epoch_rows_[static_cast<size_t>(epoch)])])
      row.push_back(&train_.examples[static_cast<size_t>(index)]);
    return row;
  }

  void load() const {
    std::call_once(loaded_, [this] {
      chat_ = eval::find_chat_template(
          resolve_chat_template_spec(options_.chat_template, options_.init_from));
      pad_id_ = 0;
      for (const runtime::SpecialTokenInfo& s : tokenizer_.special_tokens())
        if (s.text == chat_.eos_token) pad_id_ = s.id;
      std::vector<Conversation> conversations = read_conversations(options_.data);
      std::vector<Conversation> held_out;
      if (!options_.validation_data.empty()) {
        held_out = read_conversations(options_.validation_data);
      } else {
        const size_t count = static_cast<size_t>(std::max(
            1.0,
            std::round(options_.validation_fraction * static_cast<double>(conversations.size()))));
        if (count >= conversations.size())
          throw Error(ErrorKind::kInvalidArgument,
                      options_.data.string() + " holds " + std::to_string(conversations.size()) +
                          " conversations: too few to hold out " + std::to_string(count) +
                          " for validation; give train.sft.validation_data, or more conversations");
        held_out.assign(conversations.end() - static_cast<std::ptrdiff_t>(count),
                        conversations.end());
        conversations.resize(conversations.size() - count);
      }
      train_ = tokenize(conversations, "training");
      validation_ = tokenize(held_out, "validation");
      if (options_.pack_examples && !train_.examples.empty()) {
        std::vector<int64_t> order(train_.examples.size());
        int64_t positions = 0;
        for (size_t i = 0; i < order.size(); ++i) {
          order[i] = static_cast<int64_t>(i);
          positions += packed_length(train_.examples[i]);
        }
        const size_t rows = first_fit_rows(order, train_.examples, options_.seq_len).size();
        spdlog::info(
            "sft packing: an epoch's {} conversations fit {} rows of {} positions ({:.1f}% "
            "filled; {:.2f} conversations per row)",
            order.size(), rows, options_.seq_len,
            100.0 * static_cast<double>(positions) /
                static_cast<double>(rows * static_cast<size_t>(options_.seq_len)),
            static_cast<double>(order.size()) / static_cast<double>(rows));
      }
      if (train_.examples.empty() || validation_.examples.empty())
        throw Error(ErrorKind::kInvalidArgument,
                    "train.sft: no " +
                        std::string(train_.examples.empty() ? "training" : "validation") +
                        " conversation has an assistant token within train.seq_len + 1 = " +
                        std::to_string(options_.seq_len + 1) + " tokens; raise train.seq_len");
    });
  }

  InstructionSet tokenize(const std::vector<Conversation>& conversations, const char* split) const {
    std::vector<InstructionExample> examples;
    int64_t tokens = 0, assistant = 0;
    for (const Conversation& c : conversations) {
      examples.push_back(tokenize_conversation(c, chat_, tokenizer_));
      tokens += static_cast<int64_t>(examples.back().ids.size());
      for (uint8_t a : examples.back().assistant) assistant += a;
    }
    InstructionSet set = fit_to_context(std::move(examples), options_.seq_len, options_.overlong);
    spdlog::info(
        "sft {}: {} conversations, {} tokens ({} the assistant's), template {}; {} truncated to "
        "train.seq_len + 1 = {} tokens ({} tokens cut), {} dropped (no assistant token left)",
        split, set.read, tokens, assistant, chat_.name, set.truncated, options_.seq_len + 1,
        set.ids_cut, set.dropped);
    return set;
  }

  SftOptions options_;
  int64_t accum_;
  const runtime::TokenizerHandle& tokenizer_;
  std::string name_ = "sft";
  mutable std::once_flag loaded_;
  mutable eval::ChatTemplate chat_;
  mutable int32_t pad_id_ = 0;
  mutable InstructionSet train_, validation_;
  mutable std::mutex permutation_mutex_;
  mutable std::vector<int64_t> permutation_;
  mutable int64_t permutation_epoch_ = -1;
  mutable uint64_t permutation_seed_ = 0;
  // pack_examples (packed_row): the plan of epoch packed_epoch_ and the epochs' row starts.
  mutable std::vector<std::vector<int64_t>> packed_plan_;
  mutable int64_t packed_epoch_ = -1;
  mutable std::vector<int64_t> epoch_rows_;
  mutable uint64_t packed_seed_ = 0;
};

}  // namespace

ObjectiveEntry instruction_objective_entry() {
  ObjectiveEntry entry;
  entry.name = "sft";
  entry.summary =
      "instruction tuning of a causal LM on conversations ([train.sft] data, JSON Lines), loss on "
      "the "
      "assistant's tokens only";
  entry.declare_options = declare_sft_section;
  entry.add_defaults = add_sft_defaults;
  entry.check = check_sft;
  entry.make = [](const ObjectiveContext& context) -> std::unique_ptr<TrainingObjective> {
    return std::make_unique<InstructionObjective>(
        sft_options_from_config(context.config, context.options), context.options.grad_accum_steps,
        context.tokenizer);
  };
  return entry;
}

}  // namespace patchbay::train
