// A split's token files as one stream; see token_sequence.hpp.
#include "data/token_sequence.hpp"

#include <algorithm>
#include <cstdio>

#include "common/error.hpp"
#include "data/shard_writer.hpp"

namespace patchbay::data {
namespace fs = std::filesystem;

namespace {

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

void TokenSequence::add(TokenCache cache) {
  begins_.push_back(begins_.back() + cache.size());
  files_.push_back(std::move(cache));
}

TokenSequence TokenSequence::of(TokenCache cache) {
  TokenSequence s;
  s.add(std::move(cache));
  return s;
}

TokenSequence TokenSequence::open(const std::vector<fs::path>& files,
                                  uint64_t expected_tokenizer_hash, bool with_documents) {
  TokenSequence s;
  for (const fs::path& file : files) {
    TokenCache cache = TokenCache::open(file);
    if (expected_tokenizer_hash != 0 && cache.info().tokenizer_hash != expected_tokenizer_hash)
      throw Error(
          ErrorKind::kInvalidArgument,
          "'" + file.string() + "' was encoded with tokenizer " + hex(cache.info().tokenizer_hash) +
              ", but this run's tokenizer is " + hex(expected_tokenizer_hash) +
              ": ids of two tokenizers never mix. Prepare the data again with this tokenizer "
              "(patchbay data prepare --tokenizer ...), or train with the one it was prepared "
              "with");
    if (with_documents) {
      const uint64_t base = s.begins_.back();
      const std::vector<uint64_t> offsets = read_document_index(ShardWriter::index_file(file));
      if (offsets.back() != cache.size())
        throw Error(ErrorKind::kInvalidArgument,
                    "the document index of '" + file.string() + "' ends at " +
                        std::to_string(offsets.back()) + ", but the shard holds " +
                        std::to_string(cache.size()) + " ids; prepare the data again");
      for (size_t d = 0; d + 1 < offsets.size(); ++d)
        s.document_starts_.push_back(base + offsets[d]);
    }
    s.add(std::move(cache));
  }
  return s;
}

void TokenSequence::copy(size_t begin, std::span<int32_t> out) const {
  if (begin > size() || out.size() > size() - begin)
    throw Error(ErrorKind::kInvalidArgument, "token window [" + std::to_string(begin) + ", " +
                                                 std::to_string(begin + out.size()) +
                                                 ") outside the split's " + std::to_string(size()) +
                                                 " ids");
  // The file holding `begin`: the last whose first offset is <= begin.
  size_t file = static_cast<size_t>(std::upper_bound(begins_.begin(), begins_.end(), begin) -
                                    begins_.begin()) -
                1;
  size_t done = 0;
  while (done < out.size()) {
    while (begins_[file + 1] <= begin + done) ++file;  // skips empty files too
    const size_t local = begin + done - begins_[file];
    const size_t take =
        std::min(out.size() - done, static_cast<size_t>(begins_[file + 1] - begin - done));
    files_[file].copy(local, out.subspan(done, take));
    done += take;
  }
}

std::vector<int32_t> TokenSequence::to_vector() const {
  std::vector<int32_t> ids(size());
  copy(0, ids);
  return ids;
}

}  // namespace patchbay::data
