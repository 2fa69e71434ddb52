// The expression evaluator of Patchbay's Jinja subset, shared by lm-eval task files
// (template.hpp: {{ expr }} over one document) and chat templates (jinja_template.hpp:
// statements around the same expressions).
//
//   ternary   a if cond else b        (else optional: an undefined value)
//   logic     a or b, a and b, not a  (short-circuit; `and`/`or` give an operand, as Python)
//   compare   == != < > <= >=, in, not in
//   math      a + b, a - b, a ~ b (string concatenation), a * b, a / b, a // b, a % b, -a
//   postfix   x.field, x['key'], x[i], x[i:j], x.method(args), x|filter(args),
//             x is [not] test(args)  (defined, undefined, none, string, number, integer,
//             mapping, iterable, sequence, boolean, true, false, even, odd)
//   primary   names, 'str', "str", 42, 1.5, true/false/none (and Python's capitals),
//             [list], (expr), calls: raise_exception(msg), range(a[, b]), namespace(k=v, ...)
//   methods   strip lstrip rstrip lower upper title capitalize split replace index
//             startswith endswith get items keys values
//   filters   trim lower upper title capitalize string int float length count first last
//             join replace tojson default (d) items list reverse abs
//
// Values are JSON values. Jinja's Undefined is a JSON "discarded" value (undefined_value()):
// it prints as "", is false, and reading a field of it is an error. With `strict` names (the
// lm-eval rule, StrictUndefined) an unknown name or field is an error naming it instead.
// Anything else (macros, `**`, dict literals) is refused naming what was found.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace patchbay::eval {

// The names an expression reads.
struct ExpressionNames {
  // The value of a name, or nullptr when it is not defined.
  std::function<const nlohmann::json*(const std::string& name)> find;
  // true: an unknown name or a missing field is an error; false: Jinja's Undefined.
  bool strict = true;
  // For messages about unknown names: the names on offer ("question, choices").
  std::function<std::string()> describe;
};

// Evaluates `expr`; `source` is the whole template, quoted in errors. Throws
// Error(kInvalidArgument) naming what is wrong; raise_exception(msg) throws one quoting msg.
nlohmann::json evaluate_expression(std::string_view expr, const ExpressionNames& names,
                                   std::string_view source);

// Jinja's Undefined as a value, and the test for it.
nlohmann::json undefined_value();
bool is_undefined(const nlohmann::json& value);

// Python truthiness: false, None, Undefined, 0, "", [] and {} are false.
bool truthy(const nlohmann::json& value);

// Python's str() of a value (what Jinja prints; Undefined prints as "").
std::string python_str(const nlohmann::json& value);

}  // namespace patchbay::eval
