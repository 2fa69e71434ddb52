// Chat templates: a conversation (system / user / assistant messages) as the text a model was
// trained to read, from the model's own Jinja template or a named built-in one, and which
// parts of that text are the assistant's (the tokens instruction tuning takes loss on).
//
// Where a template comes from (find_chat_template):
//   "chatml", "llama3"       built-ins (ChatML: <|im_start|>role\n...<|im_end|>\n; LLaMA-3's
//                            <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>, Meta's
//                            text)
//   a .jinja / .txt file     the template text itself
//   a directory              its chat_template.jinja (written by `patchbay import` of a GGUF
//                            file) or the "chat_template" of its tokenizer_config.json (Hugging
//                            Face); bos/eos strings from imported_model.json or the same file
//   a tokenizer_config.json  its "chat_template", "bos_token", "eos_token"
//
// Assistant spans, by rendering prefixes (assistant_segments): for each assistant message i,
//   before_i = render(messages[0, i), add_generation_prompt = true)
//   upto_i   = render(messages[0, i])
// and the span is upto_i minus its prefix before_i: the assistant's content and what the
// template closes the turn with (<|im_end|>\n), so the model learns to end its turn. Every
// prefix must be a prefix of the next and of the whole conversation's rendering; a template
// that renders earlier turns differently once later ones exist (one that drops earlier
// reasoning, or dates the last turn) is refused for training, naming the turn, rather than
// guessed at. The text between spans (system, user turns, the generation prompt) carries no
// loss. This is how the text is produced at inference too: the prompt is rendered with
// add_generation_prompt and the model writes the rest.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace patchbay::eval {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct ChatTemplate {
  std::string name;       // "chatml", "llama3", or the file it was read from
  std::string source;     // Jinja text
  std::string bos_token;  // the bos_token / eos_token variables templates read ("" if none)
  std::string eos_token;
};

// The roles a conversation may hold.
bool is_chat_role(const std::string& role);

// The built-in template `name`; throws Error(kInvalidArgument) listing the built-ins.
ChatTemplate builtin_chat_template(const std::string& name);

// A built-in name, a template file, a directory or a tokenizer_config.json (see above).
// Throws Error(kNotFound / kInvalidArgument) saying what was looked for.
ChatTemplate find_chat_template(const std::string& spec);

// Whether `dir` holds a template (chat_template.jinja or tokenizer_config.json with one).
bool directory_has_chat_template(const std::filesystem::path& dir);

// The text of `messages`, with the assistant's turn opened at the end when
// add_generation_prompt. Throws Error(kInvalidArgument) "chat template line N: ..." when the
// template cannot render them (or raises an exception of its own).
std::string render_chat(const ChatTemplate& chat, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt);

struct ChatSegment {
  std::string text;
  bool assistant = false;  // an assistant turn's text (content and end-of-turn marker)
};

// The rendering of the whole conversation cut into alternating non-assistant and assistant
// segments (concatenated they are render_chat(messages, false)). Throws
// Error(kInvalidArgument) when the template re-renders an earlier turn differently.
std::vector<ChatSegment> assistant_segments(const ChatTemplate& chat,
                                            const std::vector<ChatMessage>& messages);

// What the template writes after an assistant message's content to end the turn, trimmed
// ("<|im_end|>", "<|eot_id|>"), plus the eos token: generation stops at any of them.
std::vector<std::string> chat_stop_strings(const ChatTemplate& chat);

}  // namespace patchbay::eval
