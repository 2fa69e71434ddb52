// GPT-2's reversible byte <-> character mapping (bytes_to_unicode in openai/gpt-2
// src/encoder.py), which published byte-level BPE files (encoder.json, vocab.bpe, Hugging
// Face tokenizer.json) use to write byte strings as printable text.
//
// The 188 printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) map to the code point of the
// same value; the other 68 bytes, in increasing order, map to U+0100, U+0101, ... (so
// space -> U+0120 'Ġ', '\n' -> U+010A 'Ċ'). Every token text in those files is a sequence
// of such characters, one per byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace patchbay_bpe {

// Code point byte `b` is written as.
uint32_t gpt2_byte_to_codepoint(unsigned char b);

// The UTF-8 text of a byte string under the mapping (one character per byte).
std::string gpt2_bytes_to_text(std::string_view bytes);

// Inverse: bytes of a mapped text. False (and `bytes` unspecified) when `text` is not valid
// UTF-8 or holds a character outside the mapping's 256.
bool gpt2_text_to_bytes(std::string_view text, std::string& bytes);

}  // namespace patchbay_bpe
