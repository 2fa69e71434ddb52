// A small evaluator for the Jinja subset in template.hpp: a lexer over the expression text,
// then recursive descent that computes values as it parses (there is no AST: each template
// is evaluated once per document, and documents are small).
//   additive := postfix (('+' | '~') postfix)*
//   postfix  := primary ( '.' name ['(' args ')'] | '[' index-or-slice ']' | '|' filter ['(' args
//   ')'] )* primary  := name | string | number | '[' list ']' | '(' additive ')' | '-' number
#include "eval/template.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/error.hpp"
#include "common/parse_number.hpp"

namespace patchbay::eval {
namespace {

using json = nlohmann::json;

enum class TokenKind { kName, kString, kInteger, kFloat, kPunct, kEnd };

struct Token {
  TokenKind kind;
  std::string text;
};

[[noreturn]] void fail(std::string_view source, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, "template \"" + std::string(source) + "\": " + what);
}

std::vector<Token> lex(std::string_view expr, std::string_view source) {
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
          text += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        } else {
          text += expr[j];
        }
      }
      if (j >= expr.size()) fail(source, "a string literal is not closed");
      tokens.push_back({TokenKind::kString, text});
      i = j + 1;
    } else if (std::string_view("()[].,|+~-:").find(c) != std::string_view::npos) {
      tokens.push_back({TokenKind::kPunct, std::string(1, c)});
      ++i;
    } else {
      fail(source, std::string("unsupported character '") + c +
                       "' in an expression (supported: fields, literals, [], slices, methods, "
                       "filters, + and ~)");
    }
  }
  tokens.push_back({TokenKind::kEnd, ""});
  return tokens;
}

std::string python_repr(const json& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    const bool single = s.find('\'') == std::string::npos || s.find('"') != std::string::npos;
    const char q = single ? '\'' : '"';
    std::string out(1, q);
    for (char c : s) {
      if (c == '\\')
        out += "\\\\";
      else if (c == q)
        out += std::string("\\") + c;
      else if (c == '\n')
        out += "\\n";
      else if (c == '\t')
        out += "\\t";
      else
        out += c;
    }
    return out + q;
  }
  return python_str(v);
}

class Evaluator {
 public:
  Evaluator(std::vector<Token> tokens, const json& doc, std::string_view source)
      : tokens_(std::move(tokens)), doc_(doc), source_(source) {}

  json parse_all() {
    json v = additive();
    if (peek().kind != TokenKind::kEnd)
      fail(source_, "unexpected '" + peek().text + "' (not supported here)");
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
  void expect(std::string_view punct) {
    if (!accept(punct))
      fail(source_, "expected '" + std::string(punct) + "', found '" + peek().text + "'");
  }

  json additive() {
    json v = postfix();
    while (true) {
      if (accept("~")) {
        v = python_str(v) + python_str(postfix());
      } else if (accept("+")) {
        const json r = postfix();
        if (v.is_string() && r.is_string())
          v = v.get<std::string>() + r.get<std::string>();
        else if (v.is_number_integer() && r.is_number_integer())
          v = v.get<int64_t>() + r.get<int64_t>();
        else if (v.is_number() && r.is_number())
          v = v.get<double>() + r.get<double>();
        else if (v.is_array() && r.is_array())
          v.insert(v.end(), r.begin(), r.end());
        else
          fail(source_, "'+' between " + std::string(v.type_name()) + " and " + r.type_name());
      } else {
        return v;
      }
    }
  }

  std::vector<json> call_args() {
    std::vector<json> args;
    if (accept(")")) return args;
    do args.push_back(additive());
    while (accept(","));
    expect(")");
    return args;
  }

  json postfix() {
    json v = primary();
    while (true) {
      if (accept(".")) {
        if (peek().kind != TokenKind::kName) fail(source_, "expected a name after '.'");
        const std::string name = tokens_[pos_++].text;
        if (accept("("))
          v = method(v, name, call_args());
        else
          v = member(v, name);
      } else if (accept("[")) {
        v = subscript(v);
      } else if (accept("|")) {
        if (peek().kind != TokenKind::kName) fail(source_, "expected a filter name after '|'");
        const std::string name = tokens_[pos_++].text;
        v = filter(v, name, accept("(") ? call_args() : std::vector<json>{});
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
        fail(source_, "the integer " + t.text + " does not fit 64 bits");
      case TokenKind::kFloat:
        if (const std::optional<double> number = parse_double(t.text)) return *number;
        fail(source_, "'" + t.text + "' is not a number");
      case TokenKind::kName:
        if (t.text == "true" || t.text == "True") return true;
        if (t.text == "false" || t.text == "False") return false;
        if (t.text == "none" || t.text == "None") return nullptr;
        if (!doc_.is_object() || !doc_.contains(t.text))
          fail(source_,
               "'" + t.text + "' is not a field of the document (fields: " + field_names() + ")");
        return doc_.at(t.text);
      case TokenKind::kPunct:
        if (t.text == "(") {
          json v = additive();
          expect(")");
          return v;
        }
        if (t.text == "[") {
          json list = json::array();
          if (accept("]")) return list;
          do list.push_back(additive());
          while (accept(","));
          expect("]");
          return list;
        }
        if (t.text == "-") {
          const json v = primary();
          if (v.is_number_integer()) return -v.get<int64_t>();
          if (v.is_number()) return -v.get<double>();
          fail(source_, "'-' before a " + std::string(v.type_name()));
        }
        break;
      case TokenKind::kEnd:
        fail(source_, "the expression ends too early");
    }
    fail(source_, "unexpected '" + t.text + "'");
  }

  std::string field_names() const {
    std::string names;
    if (doc_.is_object())
      for (const auto& [k, unused] : doc_.items()) names += (names.empty() ? "" : ", ") + k;
    return names;
  }

  json member(const json& v, const std::string& name) {
    if (v.is_object() && v.contains(name)) return v.at(name);
    fail(source_, "no field '" + name + "' in " + python_repr(v).substr(0, 80));
  }

  static int64_t normalise_index(int64_t i, int64_t size) { return i < 0 ? i + size : i; }

  json subscript(const json& v) {
    std::optional<json> start, stop;
    bool slice = false;
    if (!(peek().kind == TokenKind::kPunct && peek().text == ":")) start = additive();
    if (accept(":")) {
      slice = true;
      if (!(peek().kind == TokenKind::kPunct && peek().text == "]")) stop = additive();
    }
    expect("]");
    if (!slice && start && start->is_string()) return member(v, start->get<std::string>());
    if (!v.is_array() && !v.is_string()) fail(source_, "indexing a " + std::string(v.type_name()));
    const int64_t size = v.is_array()
                             ? static_cast<int64_t>(v.size())
                             : static_cast<int64_t>(v.get_ref<const std::string&>().size());
    auto as_int = [&](const std::optional<json>& j, int64_t fallback) {
      if (!j) return fallback;
      if (!j->is_number_integer())
        fail(source_, "an index must be an integer, found " + python_repr(*j));
      return j->get<int64_t>();
    };
    if (!slice) {
      const int64_t i = normalise_index(as_int(start, 0), size);
      if (i < 0 || i >= size)
        fail(source_, "index " + std::to_string(as_int(start, 0)) + " out of range (size " +
                          std::to_string(size) + ")");
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

  const std::string& need_string(const json& v, const std::string& op) {
    if (!v.is_string()) fail(source_, op + " needs a string, found " + v.type_name());
    return v.get_ref<const std::string&>();
  }

  static std::string strip(const std::string& s) {
    size_t a = 0, b = s.size();
    while (a < b && std::isspace(static_cast<unsigned char>(s[a])) != 0) ++a;
    while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1])) != 0) --b;
    return s.substr(a, b - a);
  }
  static std::string map_case(std::string s, bool upper) {
    for (char& c : s)
      c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c))
                                  : std::tolower(static_cast<unsigned char>(c)));
    return s;
  }
  static std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    if (from.empty()) return s;
    for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
      s.replace(p, from.size(), to);
    return s;
  }
  // Python's str.split(): with no separator, runs of whitespace; with one, every occurrence.
  static json split(const std::string& s, const std::optional<std::string>& sep) {
    json out = json::array();
    if (!sep) {
      size_t i = 0;
      while (true) {
        while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])) != 0) ++i;
        if (i >= s.size()) break;
        size_t j = i;
        while (j < s.size() && std::isspace(static_cast<unsigned char>(s[j])) == 0) ++j;
        out.push_back(s.substr(i, j - i));
        i = j;
      }
      return out;
    }
    size_t start = 0;
    for (size_t p = s.find(*sep); p != std::string::npos; p = s.find(*sep, start)) {
      out.push_back(s.substr(start, p - start));
      start = p + sep->size();
    }
    out.push_back(s.substr(start));
    return out;
  }

  json method(const json& v, const std::string& name, const std::vector<json>& args) {
    if (name == "strip" && args.empty()) return strip(need_string(v, "strip()"));
    if (name == "lower" && args.empty()) return map_case(need_string(v, "lower()"), false);
    if (name == "upper" && args.empty()) return map_case(need_string(v, "upper()"), true);
    if (name == "split" && args.size() <= 1) {
      if (!args.empty() && (!args[0].is_string() || args[0].get<std::string>().empty()))
        fail(source_, "split() needs a non-empty string separator");
      return split(
          need_string(v, "split()"),
          args.empty() ? std::nullopt : std::optional<std::string>(args[0].get<std::string>()));
    }
    if (name == "replace" && args.size() == 2 && args[0].is_string() && args[1].is_string())
      return replace_all(need_string(v, "replace()"), args[0].get<std::string>(),
                         args[1].get<std::string>());
    if (name == "index" && args.size() == 1) {
      if (v.is_array()) {
        for (size_t i = 0; i < v.size(); ++i)
          if (v[i] == args[0]) return static_cast<int64_t>(i);
        fail(source_, python_repr(args[0]) + " is not in the list " + python_repr(v));
      }
      const size_t p = need_string(v, "index()").find(need_string(args[0], "index()"));
      if (p == std::string::npos) fail(source_, "substring not found by index()");
      return static_cast<int64_t>(p);
    }
    fail(source_, "unsupported method ." + name + "() with " + std::to_string(args.size()) +
                      " arguments (supported: strip, lower, upper, split, replace, index)");
  }

  json filter(const json& v, const std::string& name, const std::vector<json>& args) {
    if (name == "trim") return strip(need_string(v, "|trim"));
    if (name == "lower") return map_case(python_str(v), false);
    if (name == "upper") return map_case(python_str(v), true);
    if (name == "string") return python_str(v);
    if (name == "int") {
      if (v.is_number()) return static_cast<int64_t>(v.get<double>());
      try {
        return std::stoll(strip(python_str(v)));
      } catch (const std::exception&) {
        return int64_t{0};  // Jinja's int filter: 0 when the text is not a number
      }
    }
    if (name == "length")
      return static_cast<int64_t>(v.is_string() ? v.get_ref<const std::string&>().size()
                                                : v.size());
    if ((name == "first" || name == "last") && v.is_array() && !v.empty())
      return name == "first" ? v.front() : v.back();
    if (name == "join") {
      if (!v.is_array()) fail(source_, "|join needs a list, found " + std::string(v.type_name()));
      const std::string sep = args.empty() ? "" : python_str(args[0]);
      std::string out;
      for (size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : sep) + python_str(v[i]);
      return out;
    }
    if (name == "replace" && args.size() == 2)
      return replace_all(python_str(v), python_str(args[0]), python_str(args[1]));
    fail(source_,
         "unsupported filter |" + name +
             " (supported: trim, lower, upper, string, int, length, first, last, join, replace)");
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  const json& doc_;
  std::string_view source_;
};

json evaluate_expression(std::string_view expr, const json& doc, std::string_view source) {
  return Evaluator(lex(expr, source), doc, source).parse_all();
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

std::string python_str(const json& value) {
  switch (value.type()) {
    case json::value_t::string:
      return value.get<std::string>();
    case json::value_t::boolean:
      return value.get<bool>() ? "True" : "False";
    case json::value_t::null:
      return "None";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return value.dump();
    case json::value_t::number_float: {
      const double d = value.get<double>();
      char buffer[64];
      const auto r = std::to_chars(buffer, buffer + sizeof(buffer), d);
      std::string s(buffer, r.ptr);
      if (s.find_first_of(".eni") == std::string::npos) s += ".0";  // Python prints 1.0, not 1
      return s;
    }
    case json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < value.size(); ++i) out += (i == 0 ? "" : ", ") + python_repr(value[i]);
      return out + "]";
    }
    case json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : value.items()) {
        out += (first ? "" : ", ") + python_repr(json(k)) + ": " + python_repr(v);
        first = false;
      }
      return out + "}";
    }
    default:
      return value.dump();
  }
}

std::string render_template(std::string_view source, const json& doc) {
  std::string out;
  for (const Piece& p : split_template(source))
    out += p.is_expression ? python_str(evaluate_expression(p.text, doc, source))
                           : std::string(p.text);
  return out;
}

json evaluate_template(std::string_view source, const json& doc) {
  const std::vector<Piece> pieces = split_template(source);
  if (pieces.size() == 1 && pieces[0].is_expression)
    return evaluate_expression(pieces[0].text, doc, source);
  return render_template(source, doc);
}

json parse_python_literal(std::string_view text) {
  const json empty = json::object();
  json v = evaluate_expression(text, empty, text);  // names are refused: only literals evaluate
  return v;
}

}  // namespace patchbay::eval
