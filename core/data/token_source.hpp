// Read access to a sequence of token ids, whatever holds them: one token cache
// (token_cache.hpp) or a split's shards read as one stream (token_sequence.hpp). Batches and
// evaluation (core/train) cut their windows through this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace patchbay::data {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Number of ids.
  virtual size_t size() const = 0;
  // Copies ids [begin, begin + out.size()) into out; throws Error(kInvalidArgument) past the end.
  virtual void copy(size_t begin, std::span<int32_t> out) const = 0;
};

}  // namespace patchbay::data
