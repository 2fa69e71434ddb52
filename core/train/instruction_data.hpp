// Instruction data for the "sft" objective (objective_sft.cpp): conversations from JSON Lines,
// rendered with a chat template, tokenised with the run's tokenizer, with a flag per token
// saying whether it is the assistant's (and so carries loss), and batches of them.
//
// A line is one conversation, either
//   {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...]}   (any turns)
//   {"prompt": "...", "response": "..."}        (= a user message and an assistant answer)
// Blank lines are skipped. Refused, naming file:line and what was expected: a line that is not
// JSON, one with neither form, a role other than system/user/assistant, content that is not a
// string, a conversation without an assistant message, and a template that cannot render it.
//
// Tokens (tokenize_conversation): the template's rendering is cut into assistant and
// non-assistant segments (eval::assistant_segments: each assistant turn by rendering
// prefixes), each segment encoded on its own with special tokens recognised, the ids
// concatenated. The assistant flags are exactly the ids of the assistant segments, on every
// assistant turn (content and end-of-turn marker). Encoding segment by segment is how the
// text meets the model at inference too (the prompt is encoded, then the answer generated).
//
// Longer than the context (seq_len + 1 ids): `overlong = "truncate"` (default) keeps the first
// seq_len + 1 ids and counts the example and the ids cut; an example left with no assistant
// id is dropped and counted (it would carry no loss). `overlong = "refuse"` stops with the
// file, line and length instead. The counts are logged when the set is read.
//
// Batches (instruction_batch): one example per row, left-aligned: inputs = ids[0, T),
// targets[t] = ids[t + 1] where ids[t + 1] is the assistant's, kIgnoreTarget elsewhere;
// rows shorter than T are padded (pad id as input, kIgnoreTarget as target). Causal
// attention keeps padding at the right from touching the example. (Packing several examples
// into a row needs segment-aware attention; one example per row keeps the layout a packer can
// fill later.)
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "eval/chat_template.hpp"
#include "runtime/component_instance.hpp"
#include "train/batches.hpp"

namespace patchbay::train {

struct Conversation {
  std::vector<eval::ChatMessage> messages;
  std::string where;  // "file:line"
};

struct InstructionExample {
  std::vector<int32_t> ids;
  std::vector<uint8_t> assistant;  // per id: 1 when the id is the assistant's (a loss target)
  std::string where;               // "file:line"
};

enum class Overlong { kTruncate, kRefuse };

struct InstructionSet {
  std::vector<InstructionExample> examples;
  int64_t read = 0;       // conversations in the file
  int64_t truncated = 0;  // examples cut to seq_len + 1 ids
  int64_t ids_cut = 0;    // ids those cuts removed
  int64_t dropped = 0;    // examples with no assistant id left after the cut
};

// The conversations of a JSON Lines file (see above for what is refused).
std::vector<Conversation> read_conversations(const std::filesystem::path& file);

// One conversation as ids and assistant flags. Throws Error(kInvalidArgument) prefixed with
// the conversation's file:line when the template cannot render it.
InstructionExample tokenize_conversation(const Conversation& conversation,
                                         const eval::ChatTemplate& chat,
                                         const runtime::TokenizerHandle& tokenizer);

// Applies the overlong rule to examples of at most seq_len + 1 ids (see above).
InstructionSet fit_to_context(std::vector<InstructionExample> examples, int64_t seq_len,
                              Overlong rule);

// The batch of `rows` (pointers into a set; nullptr = a row of padding only): inputs and
// targets [rows.size(), seq_len] i32.
Batch instruction_batch(const std::vector<const InstructionExample*>& rows, int64_t seq_len,
                        int32_t pad_id);

}  // namespace patchbay::train
