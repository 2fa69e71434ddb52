// A tokenizer component as evaluation sees it (TextCodec, token_requests.hpp): encode and decode
// through the handle, the first special token as lm-eval's prefix token (the Hugging Face
// export names it BOS and EOS), every special token a stop token for generation, "<pad>" (when
// there is one) an encoder-decoder's decoder start token. The handle must outlive the codec
// (the functions hold a reference to it).
#pragma once

#include "eval/token_requests.hpp"
#include "runtime/component_instance.hpp"

namespace patchbay::eval {

TextCodec text_codec_of(const runtime::TokenizerHandle& tokenizer);

}  // namespace patchbay::eval
