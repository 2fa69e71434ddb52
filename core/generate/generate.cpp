// generate() (see generate.hpp): prefill, sampling loop, sliding window, streaming.
#include "generate/generate.hpp"

#include <algorithm>
#include <chrono>
#include <span>
#include <unordered_set>

#include "common/error.hpp"
#include "engine/ops.hpp"

namespace patchbay::generate {
namespace {

namespace eng = engine;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Length of the longest prefix of `text` that does not end inside a UTF-8 sequence.
size_t complete_utf8_prefix(std::string_view text) {
  size_t n = text.size();
  // Look back over at most 3 continuation bytes for a lead byte whose sequence is cut short.
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto byte = static_cast<unsigned char>(text[n - back]);
    if ((byte & 0xC0) == 0x80) continue;  // continuation byte
    const size_t need = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

// Streams the generated text: decodes all generated ids and emits what became final.
class TextStream {
 public:
  TextStream(const runtime::TokenizerHandle& tokenizer,
             const std::function<void(std::string_view)>& sink,
             const std::vector<std::string>& stops)
      : tokenizer_(tokenizer), sink_(sink), stops_(stops) {}

  // Returns true when the text now contains a stop string (the text is cut before it and
  // emitted up to there).
  bool update(const std::vector<int32_t>& generated, bool final) {
    text_ = tokenizer_.decode(generated);
    size_t stop_at = std::string::npos;
    for (const std::string& stop : stops_)
      if (!stop.empty()) stop_at = std::min(stop_at, text_.find(stop));
    if (stop_at != std::string::npos) {
      text_.resize(stop_at);
      final = true;
    }
    size_t ready = final ? text_.size()
                         : std::min(complete_utf8_prefix(text_), text_.size() - stop_prefix_tail());
    // Hold back an incomplete UTF-8 character and a tail that may still become a stop string.
    if (ready > emitted_) {
      if (sink_) sink_(std::string_view(text_).substr(emitted_, ready - emitted_));
      emitted_ = ready;
    }
    return stop_at != std::string::npos;
  }
  const std::string& text() const { return text_; }

 private:
  // Length of the longest tail of the text that is a proper prefix of a stop string.
  size_t stop_prefix_tail() const {
    size_t tail = 0;
    for (const std::string& stop : stops_)
      for (size_t n = std::min(stop.size() - (stop.empty() ? 0 : 1), text_.size()); n > tail; --n)
        if (text_.compare(text_.size() - n, n, stop, 0, n) == 0) {
          tail = n;
          break;
        }
    return tail;
  }

  const runtime::TokenizerHandle& tokenizer_;
  const std::function<void(std::string_view)>& sink_;
  const std::vector<std::string>& stops_;
  std::string text_;
  size_t emitted_ = 0;
};

eng::Tensor token_tensor(std::span<const int32_t> ids) {
  return eng::Tensor::from_data(ids.data(), {1, static_cast<int64_t>(ids.size())},
                                eng::DType::kI32);
}

// The last position's logits of [1, T, V] as host floats.
std::vector<float> last_logits(const eng::Tensor& logits) {
  const int64_t t = logits.size(1);
  return eng::narrow(logits, 1, t - 1, 1).to_vector();
}

}  // namespace

GenerateResult generate(model::LanguageModel& model, const runtime::TokenizerHandle& tokenizer,
                        std::string_view prompt, const GenerateOptions& options,
                        runtime::SamplerChain& chain) {
  if (options.max_new_tokens < 0) {
    throw Error(ErrorKind::kInvalidArgument, "generate: max_new_tokens must be >= 0");
  }
  std::vector<int32_t> history = tokenizer.encode(prompt, /*allow_special=*/true);
  if (history.empty()) {
    throw Error(
        ErrorKind::kInvalidArgument,
        "generate: the prompt is empty; give at least one character to condition the model on");
  }
  const int64_t context = model.options().context_length;
  GenerateResult result;
  result.prompt_tokens = static_cast<int64_t>(history.size());
  if (static_cast<int64_t>(history.size()) > context - 1) {
    const int64_t keep = std::max<int64_t>(context - 1, 1);
    result.prompt_tokens_dropped = static_cast<int64_t>(history.size()) - keep;
    history.erase(history.begin(), history.end() - keep);
  }
  size_t prompt_len =
      history.size();  // the prompt part of `history` (shrinks when the window slides)

  std::unordered_set<int32_t> specials;
  if (options.stop_at_special) {
    for (const runtime::SpecialTokenInfo& s : tokenizer.special_tokens()) specials.insert(s.id);
  }

  chain.reset();
  TextStream stream(tokenizer, options.on_text, options.stop_strings);
  const auto start = std::chrono::steady_clock::now();
  model::DecodeState state = model.start_decoding(1, context);
  std::vector<float> logits = last_logits(model.decode_step(state, token_tensor(history), 1));
  result.prefill_seconds = seconds_since(start);

  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    const int32_t token = chain.next(logits, history, prompt_len);
    if (specials.count(token) != 0) {
      result.stop_reason = StopReason::kSpecialToken;
      break;
    }
    result.tokens.push_back(token);
    history.push_back(token);
    if (stream.update(result.tokens, /*final=*/false)) {
      result.stop_reason = StopReason::kStopString;
      break;
    }
    if (step + 1 == options.max_new_tokens) break;  // no logits needed after the last token
    if (state.length() + 1 > state.capacity()) {
      // Slide: keep the last ceil(context / 2) tokens and prefill them into a fresh state.
      const size_t keep = static_cast<size_t>((context + 1) / 2);
      const size_t dropped = history.size() - keep;
      history.erase(history.begin(), history.begin() + static_cast<std::ptrdiff_t>(dropped));
      prompt_len = prompt_len > dropped ? prompt_len - dropped : 0;
      state = model.start_decoding(1, context);
      logits = last_logits(model.decode_step(state, token_tensor(history), 1));
      ++result.context_slides;
      continue;
    }
    logits =
        last_logits(model.decode_step(state, token_tensor(std::span<const int32_t>(&token, 1))));
  }
  if (result.stop_reason != StopReason::kStopString) stream.update(result.tokens, /*final=*/true);
  result.text = stream.text();
  result.decode_seconds = seconds_since(start) - result.prefill_seconds;
  return result;
}

}  // namespace patchbay::generate
