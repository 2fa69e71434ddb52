// identity-byte tokenizer (see the header). The saved state is the special token's text:
// "identity-byte 1\n" followed by the eos text.
#include "identity_byte_tokenizer.hpp"

#include <patchbay/files.hpp>

namespace hello {

namespace {
constexpr std::string_view kFileHeader = "identity-byte 1\n";
}

IdentityByteTokenizer::IdentityByteTokenizer(const patchbay::Host& /*host*/,
                                             const patchbay::ConfigView& config)
    : eos_token_(config.get_string("eos_token")) {
  if (eos_token_.empty()) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "eos_token is empty; give the special token a text");
  }
}

std::vector<int32_t> IdentityByteTokenizer::encode(std::string_view text,
                                                   bool allow_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (allow_special && text.substr(i, eos_token_.size()) == eos_token_) {
      ids.push_back(kEosId);
      i += eos_token_.size();
    } else {
      ids.push_back(static_cast<unsigned char>(text[i]));
      ++i;
    }
  }
  return ids;
}

std::string IdentityByteTokenizer::decode(std::span<const int32_t> ids) const {
  std::string bytes;
  bytes.reserve(ids.size());
  for (const int32_t id : ids) {
    if (id == kEosId) {
      bytes += eos_token_;
    } else if (id >= 0 && id < 256) {
      bytes.push_back(static_cast<char>(static_cast<unsigned char>(id)));
    } else {
      throw patchbay::PluginError(PB_STATUS_OUT_OF_RANGE,
                                  "token id " + std::to_string(id) + " is outside [0, 257)");
    }
  }
  return bytes;
}

std::vector<patchbay::SpecialToken> IdentityByteTokenizer::special_tokens() const {
  return {{eos_token_, kEosId}};
}

void IdentityByteTokenizer::save(const std::string& path) const {
  patchbay::write_file_atomically(path, std::string(kFileHeader) + eos_token_);
}

void IdentityByteTokenizer::load(const std::string& path) {
  const std::string bytes = patchbay::read_file(path);
  if (bytes.compare(0, kFileHeader.size(), kFileHeader) != 0 ||
      bytes.size() == kFileHeader.size()) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "'" + path + "' is not an identity-byte tokenizer file");
  }
  eos_token_ = bytes.substr(kFileHeader.size());
}

}  // namespace hello
