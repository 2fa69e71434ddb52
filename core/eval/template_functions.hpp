// The operations behind template expressions (template_expression.hpp): operators, methods,
// filters, tests and functions, each as Jinja (on Python values) computes it. Internal to
// core/eval; the evaluator calls them once it has the operands.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace patchbay::eval {

using KeywordArgs = std::vector<std::pair<std::string, nlohmann::json>>;

// Throws Error(kInvalidArgument): template "<source>": <what>.
[[noreturn]] void template_error(std::string_view source, const std::string& what);

// Python's repr() of a value (strings quoted as Python quotes them).
std::string python_repr(const nlohmann::json& value);

// a == b, a != b, a < b, ... , a in b, a not in b.
nlohmann::json compare_values(const nlohmann::json& a, const std::string& op,
                              const nlohmann::json& b, std::string_view source);

// a + b (numbers, strings, lists), a - b, a * b (also string * int), a / b, a // b ('f'), a % b.
nlohmann::json arithmetic(const nlohmann::json& a, char op, const nlohmann::json& b,
                          std::string_view source);

nlohmann::json call_method(const nlohmann::json& value, const std::string& name,
                           const std::vector<nlohmann::json>& args, std::string_view source);

nlohmann::json apply_filter(const nlohmann::json& value, const std::string& name,
                            const std::vector<nlohmann::json>& args, const KeywordArgs& keywords,
                            std::string_view source);

bool apply_test(const nlohmann::json& value, const std::string& name,
                const std::vector<nlohmann::json>& args, std::string_view source);

// raise_exception(msg) (throws), range(a[, b[, step]]), namespace(k=v, ...).
nlohmann::json call_function(const std::string& name, const std::vector<nlohmann::json>& args,
                             const KeywordArgs& keywords, std::string_view source);

}  // namespace patchbay::eval
