// Chat templates (core/eval/jinja_template.cpp, template_expression.cpp): the Jinja text a
// GGUF file's tokenizer.chat_template or a tokenizer_config.json brings in, rendered over a
// fixed two-turn conversation as `patchbay chat` and the sft objective render it. A template
// is input from a downloaded model file: it must not crash, hang or exhaust memory.
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "eval/jinja_template.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::json variables = {
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}},
        {{"role", "user"}, {"content", "What does lamp mean?"}},
        {{"role", "assistant"}, {"content", "A source of light."}}}},
      {"add_generation_prompt", true},
      {"bos_token", "<s>"},
      {"eos_token", "</s>"}};
  try {
    (void)patchbay::eval::render_jinja(patchbay_fuzz::text(data, size), variables);
  } catch (const patchbay::Error&) {
  }
  return 0;
}
