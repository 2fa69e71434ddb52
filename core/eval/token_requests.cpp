// _encode_pair, rolling windows and the length counts of token_requests.hpp.
#include "eval/token_requests.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace patchbay::eval {
namespace {

// Python's str.isspace() over ASCII (\t \n \v \f \r, \x1c-\x1f, space); the non-ASCII
// spaces it also strips (U+0085, U+00A0, U+2000...) are left in place here.
bool is_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
}

}  // namespace

TokenPair encode_pair(const TextCodec& codec, const std::string& context,
                      const std::string& continuation, const std::string& what) {
  TokenPair pair;
  if (context.empty()) {
    std::vector<int32_t> cont = codec.encode(continuation);
    if (cont.empty())
      throw Error(ErrorKind::kInvalidArgument,
                  what + ": the continuation \"" + continuation +
                      "\" tokenises to nothing: there is nothing to score");
    if (!codec.prefix_token)
      throw Error(ErrorKind::kInvalidArgument,
                  what +
                      ": the context is empty and the tokenizer has no special token to "
                      "condition on (lm-eval uses BOS/EOS); give the task a non-empty prompt");
    if (*codec.prefix_token != cont.front()) {
      pair.context = {*codec.prefix_token};
      pair.continuation = std::move(cont);
    } else {
      pair.context = {cont.front()};
      pair.continuation.assign(cont.begin() + 1, cont.end());
      if (pair.continuation.empty())
        throw Error(ErrorKind::kInvalidArgument,
                    what + ": the continuation is only the prefix token: nothing to score");
    }
    return pair;
  }
  size_t keep = context.size();
  while (keep > 0 && is_space(context[keep - 1])) --keep;
  const std::string ctx = context.substr(0, keep);
  const std::string cont = context.substr(keep) + continuation;
  if (ctx.empty())
    throw Error(ErrorKind::kInvalidArgument,
                what +
                    ": the context is only whitespace; after moving it to the continuation "
                    "nothing is left to condition on");
  const std::vector<int32_t> whole = codec.encode(ctx + cont);
  pair.context = codec.encode(ctx);
  if (whole.size() > pair.context.size())
    pair.continuation.assign(whole.begin() + static_cast<std::ptrdiff_t>(pair.context.size()),
                             whole.end());
  if (pair.continuation.empty())
    throw Error(ErrorKind::kInvalidArgument,
                what + ": the continuation \"" + continuation +
                    "\" tokenises to nothing after the context (lm-eval asserts here); check "
                    "doc_to_choice/doc_to_target");
  pair.boundary_mismatch = !std::equal(pair.context.begin(), pair.context.end(), whole.begin());
  return pair;
}

TokenPair encode_pair_separately(const TextCodec& codec, const std::string& context,
                                 const std::string& continuation, const std::string& what) {
  if (context.empty()) return encode_pair(codec, context, continuation, what);  // the prefix
  size_t keep = context.size();
  while (keep > 0 && is_space(context[keep - 1])) --keep;
  if (keep == 0)
    throw Error(ErrorKind::kInvalidArgument,
                what +
                    ": the context is only whitespace; after moving it to the continuation "
                    "nothing is left to condition on");
  TokenPair pair;
  pair.context = codec.encode(context.substr(0, keep));
  pair.continuation = codec.encode(context.substr(keep) + continuation);
  if (pair.context.empty())
    throw Error(ErrorKind::kInvalidArgument,
                what + ": the context tokenises to nothing: there is nothing to condition on");
  if (pair.continuation.empty())
    throw Error(ErrorKind::kInvalidArgument,
                what + ": the continuation \"" + continuation +
                    "\" tokenises to nothing: there is nothing to score");
  return pair;
}

std::vector<TokenPair> rolling_windows(const std::vector<int32_t>& tokens, int32_t prefix_token,
                                       int64_t max_length) {
  std::vector<TokenPair> windows;
  if (tokens.empty()) return windows;
  const int64_t n = static_cast<int64_t>(tokens.size());
  auto slice = [&](int64_t a, int64_t b) {
    return std::vector<int32_t>(tokens.begin() + std::max<int64_t>(a, 0), tokens.begin() + b);
  };
  // First window: [prefix] + t[0 .. first-2] predicting t[0 .. first-1]; disjoint form keeps
  // only the prefix as context.
  const int64_t first = std::min(max_length, n);
  windows.push_back({{prefix_token}, slice(0, first), false});
  int64_t predicted = first;
  while (predicted < n) {
    const int64_t pred_len =
        std::min(n - predicted, max_length);  // max_length - context_len + 1, context_len 1
    const int64_t end = predicted + pred_len;
    // input t[end - L - 1 .. end - 2], made disjoint: context = input minus its last pred_len - 1.
    std::vector<int32_t> input = slice(end - max_length - 1, end - 1);
    input.resize(input.size() - static_cast<size_t>(pred_len - 1));
    windows.push_back({std::move(input), slice(end - pred_len, end), false});
    predicted += pred_len;
  }
  return windows;
}

int64_t count_words(std::string_view text) {
  // re.split(r"\s+", s): pieces between runs of whitespace, empty ends included.
  int64_t pieces = 1;
  size_t i = 0;
  while (i < text.size()) {
    if (is_space(text[i])) {
      ++pieces;
      while (i < text.size() && is_space(text[i])) ++i;
    } else {
      ++i;
    }
  }
  return pieces;
}

int64_t count_code_points(std::string_view text) {
  return static_cast<int64_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

}  // namespace patchbay::eval
