// The subset of Jinja that lm-evaluation-harness task files use in doc_to_text,
// doc_to_target, doc_to_choice and description, evaluated over one document (a JSON object).
//
//   text {{ expr }} text ...        literal text and interpolations (no {% %} blocks)
//   expr: the expressions of template_expression.hpp (the evaluator chat templates share):
//           x.field, x['key'], x[i], x[i:j], a ~ b, a + b, methods, filters, comparisons, ...
//   A name not in the document is an error naming it (lm-eval renders with StrictUndefined).
//   {% %} statements are refused here (chat templates have them: jinja_template.hpp).
//
// Interpolated values print as Jinja prints Python values: strings as they are, integers in
// decimal, booleans True/False, None, lists as Python reprs ("['a', 'b']"), so a
// doc_to_choice template that prints a list can be read back as one (parse_python_literal).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "eval/template_expression.hpp"

namespace patchbay::eval {

// Renders `source` against `doc`. Throws Error(kInvalidArgument) naming the template and what
// is wrong (unknown field, unsupported construct, a type error such as indexing a number).
std::string render_template(std::string_view source, const nlohmann::json& doc);

// When `source` is exactly one interpolation ("{{ expr }}" with nothing around it), the
// expression's value (a list stays a list); otherwise the rendered string.
nlohmann::json evaluate_template(std::string_view source, const nlohmann::json& doc);

// A Python literal as ast.literal_eval reads the ones task files produce: strings, numbers,
// True/False/None and (nested) lists. Throws Error(kInvalidArgument) otherwise.
nlohmann::json parse_python_literal(std::string_view text);

}  // namespace patchbay::eval
