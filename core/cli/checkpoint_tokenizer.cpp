// See checkpoint_tokenizer.hpp.
#include "cli/checkpoint_tokenizer.hpp"

#include "common/error.hpp"

namespace patchbay::cli {

namespace fs = std::filesystem;

fs::path tokenizer_file_of(const train::Checkpoint& checkpoint) {
  const fs::path stored = checkpoint.meta(train::kMetaTokenizerFile);
  if (fs::exists(stored)) return stored;
  const fs::path beside_run = checkpoint.path().parent_path().parent_path() / stored.filename();
  if (fs::exists(beside_run)) return beside_run;
  throw Error(ErrorKind::kNotFound, "the checkpoint's tokenizer file " + stored.string() +
                                        " is missing (also looked for " + beside_run.string() +
                                        ")");
}

}  // namespace patchbay::cli
