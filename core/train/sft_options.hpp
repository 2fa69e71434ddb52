// [train.sft]: the options of the "sft" objective (objective_sft.cpp), and where its chat
// template comes from. Declared in the training schema whichever objective is chosen (a
// config may keep the table); read only by "sft" and by `patchbay chat` / `generate --chat`,
// which use the template a run was tuned with.
#pragma once

#include <filesystem>
#include <string>

#include "config/config_document.hpp"
#include "config/schema_registry.hpp"
#include "train/instruction_data.hpp"
#include "train/train_config.hpp"

namespace patchbay::train {

struct SftOptions {
  std::filesystem::path data;             // JSON Lines of conversations
  std::filesystem::path validation_data;  // "" = hold out validation_fraction of `data` (its end)
  double validation_fraction = 0.1;
  std::string chat_template;        // train.sft.template as given ("auto" resolved on first use)
  std::filesystem::path init_from;  // train.init_from, where "auto" looks
  Overlong overlong = Overlong::kTruncate;
  int64_t seq_len = 0;  // train.seq_len
  // Several conversations per training row with segment ids (instruction_packing.hpp).
  bool pack_examples = false;
};

void declare_sft_section(config::SchemaRegistry& schema);
void add_sft_defaults(config::ResolvedConfig& config);
// After validation: a causal model and a data file named.
void check_sft(const config::ResolvedConfig& config);

SftOptions sft_options_from_config(const config::ResolvedConfig& config,
                                   const TrainOptions& options);

// train.sft.template resolved: "auto" is the template beside train.init_from (a run or model
// directory holding chat_template.jinja or tokenizer_config.json, or the run a checkpoint file
// is in); anything else is returned as given. Throws Error(kInvalidArgument) when "auto" finds
// none, naming what to set.
std::string resolve_chat_template_spec(const std::string& spec,
                                       const std::filesystem::path& init_from);

// The template spec a run's stored config implies for chatting: train.sft.template resolved
// when the run was trained with "sft" (or keeps a [train.sft] table), else "" (none recorded).
std::string chat_template_spec_of(const config::ResolvedConfig& config);

}  // namespace patchbay::train
