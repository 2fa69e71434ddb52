// lm-eval task templates: literal text and {{ expressions }}, the expressions evaluated by the
// shared evaluator (template_expression.hpp) over one document with strict names.
#include "eval/template.hpp"

#include <algorithm>
#include <vector>

#include "common/error.hpp"
#include "eval/template_expression.hpp"
#include "eval/template_functions.hpp"

namespace patchbay::eval {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(std::string_view source, const std::string& what) {
  template_error(source, what);
}

json evaluate_over_doc(std::string_view expr, const json& doc, std::string_view source) {
  ExpressionNames names;
  names.find = [&doc](const std::string& name) -> const json* {
    if (!doc.is_object()) return nullptr;
    const auto it = doc.find(name);
    return it == doc.end() ? nullptr : &*it;
  };
  names.describe = [&doc] {
    std::string list;
    if (doc.is_object())
      for (const auto& [k, unused] : doc.items()) list += (list.empty() ? "" : ", ") + k;
    return list;
  };
  return eval::evaluate_expression(expr, names, source);
}

struct Piece {
  bool is_expression;
  std::string_view text;
};

std::vector<Piece> split_template(std::string_view source) {
  std::vector<Piece> pieces;
  size_t i = 0;
  while (i < source.size()) {
    const size_t open = source.find("{{", i);
    const size_t block = source.find("{%", i);
    if (block != std::string_view::npos && (open == std::string_view::npos || block < open))
      fail(source,
           "{% ... %} blocks are not supported (only {{ expressions }}); found '" +
               std::string(source.substr(block, std::min<size_t>(20, source.size() - block))) +
               "'");
    if (source.find("{#", i) != std::string_view::npos)
      fail(source, "{# comments #} are not supported");
    if (open == std::string_view::npos) {
      pieces.push_back({false, source.substr(i)});
      break;
    }
    if (open > i) pieces.push_back({false, source.substr(i, open - i)});
    const size_t close = source.find("}}", open + 2);
    if (close == std::string_view::npos) fail(source, "'{{' without a closing '}}'");
    pieces.push_back({true, source.substr(open + 2, close - open - 2)});
    i = close + 2;
  }
  return pieces;
}

}  // namespace

std::string render_template(std::string_view source, const json& doc) {
  std::string out;
  for (const Piece& p : split_template(source))
    out +=
        p.is_expression ? python_str(evaluate_over_doc(p.text, doc, source)) : std::string(p.text);
  return out;
}

json evaluate_template(std::string_view source, const json& doc) {
  const std::vector<Piece> pieces = split_template(source);
  if (pieces.size() == 1 && pieces[0].is_expression)
    return evaluate_over_doc(pieces[0].text, doc, source);
  return render_template(source, doc);
}

json parse_python_literal(std::string_view text) {
  const json empty = json::object();
  json v = evaluate_over_doc(text, empty, text);  // names are refused: only literals evaluate
  return v;
}

}  // namespace patchbay::eval
