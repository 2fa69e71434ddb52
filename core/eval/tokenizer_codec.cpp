// TextCodec over a tokenizer handle (tokenizer_codec.hpp).
#include "eval/tokenizer_codec.hpp"

namespace patchbay::eval {

TextCodec text_codec_of(const runtime::TokenizerHandle& tokenizer) {
  TextCodec codec;
  codec.encode = [&tokenizer](std::string_view text) { return tokenizer.encode(text); };
  codec.decode = [&tokenizer](const std::vector<int32_t>& ids) { return tokenizer.decode(ids); };
  for (const runtime::SpecialTokenInfo& s : tokenizer.special_tokens()) {
    if (!codec.prefix_token)
      codec.prefix_token = s.id;  // the first special: the HF export's bos/eos
    codec.stop_tokens.push_back(s.id);
    if (s.text == "<pad>") codec.decoder_start_token = s.id;  // an encoder-decoder's start
  }
  return codec;
}

}  // namespace patchbay::eval
