// The expression evaluator of template_expression.hpp: a lexer over the expression text, then
// recursive descent that computes values as it parses (no AST: an expression is evaluated
// once per use, and templates are small). Jinja's precedence, loosest first:
//   ternary := or ['if' or ['else' ternary]]
//   or := and ('or' and)*          and := not ('and' not)*      not := 'not' not | compare
//   compare := math1 (op math1)*   math1 := concat (('+'|'-') concat)*
//   concat := math2 ('~' math2)*   math2 := unary (('*'|'/'|'//'|'%') unary)*
//   unary := '-' unary | postfix   postfix := primary ('.' | '[' | '|' | 'is')*
// Short-circuit: the operand that is not taken is parsed with `skip_` raised, so it reads no
// names and raises nothing (its value is Undefined).
#include "eval/template_expression.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/error.hpp"
#include "common/parse_number.hpp"
#include "eval/template_functions.hpp"

namespace patchbay::eval {
namespace {

using json = nlohmann::json;

enum class TokenKind { kName, kString, kInteger, kFloat, kPunct, kEnd };

struct Token {
  TokenKind kind;
  std::string text;
};

std::vector<Token> lex(std::string_view expr, std::string_view source) {
  static const char* const kTwoChar[] = {"==", "!=", "<=", ">=", "//"};
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < expr.size()) {
    const char c = expr[i];
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_') {
      size_t j = i;
      while (j < expr.size() &&
             (std::isalnum(static_cast<unsigned char>(expr[j])) != 0 || expr[j] == '_'))
        ++j;
      tokens.push_back({TokenKind::kName, std::string(expr.substr(i, j - i))});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c)) != 0) {
      size_t j = i;
      bool is_float = false;
      while (j < expr.size() &&
             (std::isdigit(static_cast<unsigned char>(expr[j])) != 0 || expr[j] == '.')) {
        if (expr[j] == '.') is_float = true;
        ++j;
      }
      tokens.push_back(
          {is_float ? TokenKind::kFloat : TokenKind::kInteger, std::string(expr.substr(i, j - i))});
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string text;
      size_t j = i + 1;
      for (; j < expr.size() && expr[j] != c; ++j) {
        if (expr[j] == '\\' && j + 1 < expr.size()) {
          const char e = expr[++j];
          text += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
        } else {
          text += expr[j];
        }
      }
      if (j >= expr.size()) template_error(source, "a string literal is not closed");
      tokens.push_back({TokenKind::kString, text});
      i = j + 1;
    } else {
      const std::string_view two = expr.substr(i, 2);
      bool matched = false;
      for (const char* op : kTwoChar)
        if (two == op) {
          tokens.push_back({TokenKind::kPunct, std::string(two)});
          i += 2;
          matched = true;
          break;
        }
      if (matched) continue;
      if (std::string_view("()[].,|+~-:*/%<>=").find(c) == std::string_view::npos)
        template_error(source, std::string("unsupported character '") + c +
                                   "' in an expression (supported: names, literals, [], slices, "
                                   "methods, filters, tests, arithmetic, comparisons, and/or/not)");
      tokens.push_back({TokenKind::kPunct, std::string(1, c)});
      ++i;
    }
  }
  tokens.push_back({TokenKind::kEnd, ""});
  return tokens;
}

class Evaluator {
 public:
  Evaluator(std::vector<Token> tokens, const ExpressionNames& names, std::string_view source)
      : tokens_(std::move(tokens)), names_(names), source_(source) {}

  json parse_all() {
    json v = ternary();
    if (peek().kind != TokenKind::kEnd)
      template_error(source_, "unexpected '" + peek().text + "' (not supported here)");
    return v;
  }

 private:
  const Token& peek() const { return tokens_[pos_]; }
  bool accept(std::string_view punct) {
    if (peek().kind == TokenKind::kPunct && peek().text == punct) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool accept_name(std::string_view word) {
    if (peek().kind == TokenKind::kName && peek().text == word) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(std::string_view punct) {
    if (!accept(punct))
      template_error(source_, "expected '" + std::string(punct) + "', found '" + peek().text + "'");
  }
  [[noreturn]] void fail(const std::string& what) const { template_error(source_, what); }

  // Parses with evaluation off (a branch not taken); its value is Undefined.
  template <typename Parse>
  json skipped(Parse parse) {
    ++skip_;
    parse();
    --skip_;
    return undefined_value();
  }

  // Python evaluates the condition first: with an `if` ahead at this level, the value is
  // parsed skipped, then (the condition true) parsed again with evaluation on.
  json ternary() {
    const size_t start = pos_;
    if (skip_ > 0 || !conditional_ahead()) {
      json v = or_expr();
      if (!accept_name("if")) return v;
      or_expr();
      if (accept_name("else")) ternary();
      return undefined_value();
    }
    skipped([&] { or_expr(); });
    if (!accept_name("if")) fail("expected 'if' in a conditional expression");
    if (truthy(or_expr())) {
      const size_t after = pos_;
      pos_ = start;
      json v = or_expr();
      pos_ = after;
      if (accept_name("else")) skipped([&] { ternary(); });
      return v;
    }
    return accept_name("else") ? ternary() : undefined_value();
  }

  // Whether a name `if` follows at this bracket depth before the expression ends.
  bool conditional_ahead() const {
    int depth = 0;
    for (size_t i = pos_; i < tokens_.size(); ++i) {
      const Token& t = tokens_[i];
      if (t.kind == TokenKind::kEnd) return false;
      if (t.kind == TokenKind::kPunct) {
        if (t.text == "(" || t.text == "[") ++depth;
        if (t.text == ")" || t.text == "]" || (t.text == "," && depth == 0)) {
          if (depth == 0) return false;
          --depth;
        }
      } else if (t.kind == TokenKind::kName && t.text == "if" && depth == 0) {
        return true;
      }
    }
    return false;
  }

  json or_expr() {
    json v = and_expr();
    while (accept_name("or")) {
      if (skip_ == 0 && truthy(v))
        skipped([&] { and_expr(); });
      else
        v = and_expr();
    }
    return v;
  }

  json and_expr() {
    json v = not_expr();
    while (accept_name("and")) {
      if (skip_ == 0 && !truthy(v))
        skipped([&] { not_expr(); });
      else
        v = not_expr();
    }
    return v;
  }

  json not_expr() {
    if (accept_name("not")) return !truthy(not_expr());
    return compare();
  }

  json compare() {
    json v = math1();
    while (true) {
      std::string op;
      if (peek().kind == TokenKind::kPunct &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" || peek().text == ">" ||
           peek().text == "<=" || peek().text == ">=")) {
        op = tokens_[pos_++].text;
      } else if (accept_name("in")) {
        op = "in";
      } else if (peek().kind == TokenKind::kName && peek().text == "not" &&
                 tokens_[pos_ + 1].kind == TokenKind::kName && tokens_[pos_ + 1].text == "in") {
        pos_ += 2;
        op = "not in";
      } else {
        return v;
      }
      const json r = math1();
      if (skip_ == 0) v = compare_values(v, op, r, source_);
    }
  }

  json math1() {
    json v = concat();
    while (true) {
      if (accept("+")) {
        const json r = concat();
        if (skip_ == 0) v = arithmetic(v, '+', r, source_);
      } else if (accept("-")) {
        const json r = concat();
        if (skip_ == 0) v = arithmetic(v, '-', r, source_);
      } else {
        return v;
      }
    }
  }

  json concat() {
    json v = math2();
    while (accept("~")) {
      const json r = math2();
      if (skip_ == 0) v = python_str(v) + python_str(r);
    }
    return v;
  }

  json math2() {
    json v = unary();
    while (true) {
      char op = 0;
      if (accept("*"))
        op = '*';
      else if (accept("//"))
        op = 'f';
      else if (accept("/"))
        op = '/';
      else if (accept("%"))
        op = '%';
      else
        return v;
      const json r = unary();
      if (skip_ == 0) v = arithmetic(v, op, r, source_);
    }
  }

  json unary() {
    if (accept("-")) {
      const json v = unary();
      if (skip_ > 0) return v;
      if (v.is_number_integer()) return -v.get<int64_t>();
      if (v.is_number()) return -v.get<double>();
      fail("'-' before a " + std::string(v.type_name()));
    }
    return postfix();
  }

  std::vector<json> call_args(std::vector<std::pair<std::string, json>>* keywords = nullptr) {
    std::vector<json> args;
    if (accept(")")) return args;
    do {
      if (keywords != nullptr && peek().kind == TokenKind::kName &&
          tokens_[pos_ + 1].kind == TokenKind::kPunct && tokens_[pos_ + 1].text == "=") {
        const std::string key = tokens_[pos_].text;
        pos_ += 2;
        keywords->emplace_back(key, ternary());
      } else {
        args.push_back(ternary());
      }
    } while (accept(","));
    expect(")");
    return args;
  }

  json postfix() {
    json v = primary();
    while (true) {
      if (accept(".")) {
        if (peek().kind != TokenKind::kName) fail("expected a name after '.'");
        const std::string name = tokens_[pos_++].text;
        if (accept("(")) {
          const std::vector<json> args = call_args();
          if (skip_ == 0) v = call_method(v, name, args, source_);
        } else if (skip_ == 0) {
          v = member(v, name);
        }
      } else if (accept("[")) {
        v = subscript(v);
      } else if (accept("|")) {
        if (peek().kind != TokenKind::kName) fail("expected a filter name after '|'");
        const std::string name = tokens_[pos_++].text;
        std::vector<std::pair<std::string, json>> keywords;
        const std::vector<json> args = accept("(") ? call_args(&keywords) : std::vector<json>{};
        if (skip_ == 0) v = apply_filter(v, name, args, keywords, source_);
      } else if (accept_name("is")) {
        const bool negate = accept_name("not");
        if (peek().kind != TokenKind::kName) fail("expected a test name after 'is'");
        const std::string name = tokens_[pos_++].text;
        const std::vector<json> args = accept("(") ? call_args() : std::vector<json>{};
        if (skip_ == 0) v = apply_test(v, name, args, source_) != negate;
      } else {
        return v;
      }
    }
  }

  json primary() {
    const Token t = tokens_[pos_++];
    switch (t.kind) {
      case TokenKind::kString:
        return t.text;
      case TokenKind::kInteger:
        if (const std::optional<int64_t> number = parse_int64(t.text)) return *number;
        fail("the integer " + t.text + " does not fit 64 bits");
      case TokenKind::kFloat:
        if (const std::optional<double> number = parse_double(t.text)) return *number;
        fail("'" + t.text + "' is not a number");
      case TokenKind::kName:
        if (t.text == "true" || t.text == "True") return true;
        if (t.text == "false" || t.text == "False") return false;
        if (t.text == "none" || t.text == "None") return nullptr;
        if (accept("(")) {
          std::vector<std::pair<std::string, json>> keywords;
          const std::vector<json> args = call_args(&keywords);
          return skip_ > 0 ? undefined_value() : call_function(t.text, args, keywords, source_);
        }
        return name_value(t.text);
      case TokenKind::kPunct:
        if (t.text == "(") {
          json v = ternary();
          expect(")");
          return v;
        }
        if (t.text == "[") {
          json list = json::array();
          if (accept("]")) return list;
          do list.push_back(ternary());
          while (accept(","));
          expect("]");
          return list;
        }
        break;
      case TokenKind::kEnd:
        fail("the expression ends too early");
    }
    fail("unexpected '" + t.text + "'");
  }

  json name_value(const std::string& name) const {
    if (skip_ > 0) return undefined_value();
    if (const json* found = names_.find ? names_.find(name) : nullptr) return *found;
    if (!names_.strict) return undefined_value();
    fail("'" + name + "' is not a field of the document (fields: " +
         (names_.describe ? names_.describe() : std::string()) + ")");
  }

  json member(const json& v, const std::string& name) const {
    if (v.is_object() && v.contains(name)) return v.at(name);
    if (is_undefined(v)) fail("reading '" + name + "' of an undefined value");
    if (!names_.strict) return undefined_value();
    fail("no field '" + name + "' in " + python_repr(v).substr(0, 80));
  }

  static int64_t normalise_index(int64_t i, int64_t size) { return i < 0 ? i + size : i; }

  json subscript(const json& v) {
    std::optional<json> start, stop;
    bool slice = false;
    if (!(peek().kind == TokenKind::kPunct && peek().text == ":")) start = ternary();
    if (accept(":")) {
      slice = true;
      if (!(peek().kind == TokenKind::kPunct && peek().text == "]")) stop = ternary();
    }
    expect("]");
    if (skip_ > 0) return undefined_value();
    if (is_undefined(v)) fail("indexing an undefined value");
    if (!slice && start && start->is_string()) return member(v, start->get<std::string>());
    if (!v.is_array() && !v.is_string()) fail("indexing a " + std::string(v.type_name()));
    const int64_t size = v.is_array()
                             ? static_cast<int64_t>(v.size())
                             : static_cast<int64_t>(v.get_ref<const std::string&>().size());
    auto as_int = [&](const std::optional<json>& j, int64_t fallback) {
      if (!j || j->is_null()) return fallback;
      if (!j->is_number_integer()) fail("an index must be an integer, found " + python_repr(*j));
      return j->get<int64_t>();
    };
    if (!slice) {
      const int64_t i = normalise_index(as_int(start, 0), size);
      if (i < 0 || i >= size) {
        if (!names_.strict) return undefined_value();
        fail("index " + std::to_string(as_int(start, 0)) + " out of range (size " +
             std::to_string(size) + ")");
      }
      if (v.is_array()) return v[static_cast<size_t>(i)];
      return std::string(1, v.get_ref<const std::string&>()[static_cast<size_t>(i)]);
    }
    const int64_t a = std::clamp<int64_t>(normalise_index(as_int(start, 0), size), 0, size);
    const int64_t b = std::clamp<int64_t>(normalise_index(as_int(stop, size), size), 0, size);
    if (v.is_string())
      return b > a ? v.get_ref<const std::string&>().substr(static_cast<size_t>(a),
                                                            static_cast<size_t>(b - a))
                   : std::string();
    json out = json::array();
    for (int64_t i = a; i < b; ++i) out.push_back(v[static_cast<size_t>(i)]);
    return out;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int skip_ = 0;
  const ExpressionNames& names_;
  std::string_view source_;
};

}  // namespace

json undefined_value() { return json(json::value_t::discarded); }

bool is_undefined(const json& value) { return value.is_discarded(); }

bool truthy(const json& value) {
  switch (value.type()) {
    case json::value_t::boolean:
      return value.get<bool>();
    case json::value_t::null:
    case json::value_t::discarded:
      return false;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return value.get<int64_t>() != 0;
    case json::value_t::number_float:
      return value.get<double>() != 0;
    case json::value_t::string:  // json::empty() is false for every string
      return !value.get_ref<const std::string&>().empty();
    case json::value_t::array:
    case json::value_t::object:
      return !value.empty();
    default:
      return true;
  }
}

json evaluate_expression(std::string_view expr, const ExpressionNames& names,
                         std::string_view source) {
  return Evaluator(lex(expr, source), names, source).parse_all();
}

}  // namespace patchbay::eval
