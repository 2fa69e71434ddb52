// Jinja templates with statements, the subset chat templates use (Hugging Face's
// tokenizer_config.json "chat_template", GGUF's tokenizer.chat_template), rendered the way
// transformers' apply_chat_template renders them: jinja2 with trim_blocks and lstrip_blocks,
// the loopcontrols extension, one trailing newline of the source dropped.
//
//   {{ expr }}                         expressions of template_expression.hpp (Undefined names)
//   {% if c %} .. {% elif c %} .. {% else %} .. {% endif %}
//   {% for x in xs [if c] %} .. [{% else %} ..] {% endfor %}   also `for k, v in d.items()`;
//                                      loop.index, index0, revindex, revindex0, first, last,
//                                      length, previtem, nextitem; {% break %}, {% continue %}
//   {% set x = expr %}, {% set ns.attr = expr %} (namespace()), {% set a, b = pair %}
//   {% generation %} .. {% endgeneration %}   (transformers' assistant-token marker: rendered
//                                      as its body, the span recorded in JinjaRender::marked)
//   {# comments #}; whitespace control {%- -%} {{- -}} {#- -#}; {%+ keeps lstrip off
// Scoping as Jinja: a for loop's body is a new scope per iteration (set inside it is not seen
// after the loop: templates carry state out with namespace()); if does not open one.
// Anything else (macro, call, include, extends, block, filter, raw, with) is refused naming the
// statement and its line.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace patchbay::eval {

struct JinjaRender {
  std::string text;
  // [begin, end) byte offsets of text rendered inside {% generation %} blocks, in order.
  std::vector<std::pair<size_t, size_t>> marked;
};

// Renders `source` with `variables` (a JSON object: messages, add_generation_prompt,
// bos_token, ...). Throws Error(kInvalidArgument) "chat template line N: <reason>" for a
// statement it cannot parse or evaluate, and for raise_exception() (quoting its message).
JinjaRender render_jinja(std::string_view source, const nlohmann::json& variables);

}  // namespace patchbay::eval
