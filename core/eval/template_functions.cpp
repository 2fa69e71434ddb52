// Operators, methods, filters, tests and functions of template expressions; see
// template_functions.hpp. Each follows Jinja's (Python's) result for the values chat templates
// and task files pass: strings, numbers, booleans, None, lists and dicts.
#include "eval/template_functions.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>

#include "common/error.hpp"
#include "eval/template_expression.hpp"

namespace patchbay::eval {
namespace {

using json = nlohmann::json;

const std::string& need_string(const json& v, const std::string& op, std::string_view source) {
  if (!v.is_string()) template_error(source, op + " needs a string, found " + v.type_name());
  return v.get_ref<const std::string&>();
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string strip(const std::string& s, bool left, bool right, const std::string* chars) {
  auto drop = [&](char c) {
    return chars != nullptr ? chars->find(c) != std::string::npos : is_space(c);
  };
  size_t a = 0, b = s.size();
  while (left && a < b && drop(s[a])) ++a;
  while (right && b > a && drop(s[b - 1])) --b;
  return s.substr(a, b - a);
}

std::string map_case(std::string s, bool upper) {
  for (char& c : s)
    c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c))
                                : std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Python's str.title(): upper case after a non-letter, lower case elsewhere (ASCII).
std::string title_case(std::string s) {
  bool after_letter = false;
  for (char& c : s) {
    const bool letter = std::isalpha(static_cast<unsigned char>(c)) != 0;
    c = static_cast<char>(after_letter ? std::tolower(static_cast<unsigned char>(c))
                                       : std::toupper(static_cast<unsigned char>(c)));
    after_letter = letter;
  }
  return s;
}

std::string capitalize(std::string s) {
  s = map_case(s, false);
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

// Python's str.split(): with no separator, runs of whitespace; with one, every occurrence.
json split(const std::string& s, const std::optional<std::string>& sep) {
  json out = json::array();
  if (!sep) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_space(s[i])) ++i;
      if (i >= s.size()) break;
      size_t j = i;
      while (j < s.size() && !is_space(s[j])) ++j;
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

// dict.items() as a list of [key, value] pairs (what `for k, v in d.items()` unpacks).
json items(const json& v, std::string_view source) {
  if (!v.is_object())
    template_error(source, "items() needs a mapping, found " + std::string(v.type_name()));
  json out = json::array();
  for (const auto& [k, value] : v.items()) out.push_back(json::array({k, value}));
  return out;
}

// json.dumps(v, ensure_ascii=False) as transformers' tojson filter calls it: ", " and ": "
// separators, optional indent.
// A newline and `spaces` spaces (nothing without an indent).
std::string newline_and(int indent, int spaces) {
  std::string text;
  if (indent <= 0) return text;
  text.push_back('\n');
  text.append(static_cast<size_t>(spaces), ' ');
  return text;
}

std::string python_json(const json& v, int indent, int depth) {
  const std::string pad = newline_and(indent, indent * (depth + 1));
  const std::string close = newline_and(indent, indent * depth);
  const std::string sep = indent > 0 ? "," : ", ";
  if (v.is_array()) {
    if (v.empty()) return "[]";
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i)
      out += (i == 0 ? "" : sep) + pad + python_json(v[i], indent, depth + 1);
    return out + close + "]";
  }
  if (v.is_object()) {
    if (v.empty()) return "{}";
    std::string out = "{";
    bool first = true;
    for (const auto& [k, value] : v.items()) {
      out +=
          (first ? "" : sep) + pad + json(k).dump() + ": " + python_json(value, indent, depth + 1);
      first = false;
    }
    return out + close + "}";
  }
  if (is_undefined(v)) return "null";
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

double as_double(const json& v) { return v.get<double>(); }

}  // namespace

void template_error(std::string_view source, const std::string& what) {
  const std::string shown =
      source.size() > 200 ? std::string(source.substr(0, 200)) + "..." : std::string(source);
  throw Error(ErrorKind::kInvalidArgument, "template \"" + shown + "\": " + what);
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

std::string python_str(const json& value) {
  switch (value.type()) {
    case json::value_t::string:
      return value.get<std::string>();
    case json::value_t::boolean:
      return value.get<bool>() ? "True" : "False";
    case json::value_t::null:
      return "None";
    case json::value_t::discarded:
      return "";  // Jinja's Undefined prints as nothing
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

json compare_values(const json& a, const std::string& op, const json& b, std::string_view source) {
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      found = b.get_ref<const std::string&>().find(need_string(a, "'in' a string", source)) !=
              std::string::npos;
    } else if (b.is_array()) {
      found = std::find(b.begin(), b.end(), a) != b.end();
    } else if (b.is_object()) {
      found = a.is_string() && b.contains(a.get<std::string>());
    } else if (!is_undefined(b)) {
      template_error(source, "'in' needs a string, list or mapping on its right, found " +
                                 std::string(b.type_name()));
    }
    return op == "in" ? found : !found;
  }
  if (op == "==" || op == "!=") {
    const bool equal = !is_undefined(a) && !is_undefined(b) && a == b;
    return op == "==" ? equal : !equal;
  }
  const bool numbers = a.is_number() && b.is_number();
  if (!numbers && !(a.is_string() && b.is_string()))
    template_error(source, "'" + op + "' between " + a.type_name() + " and " + b.type_name());
  const int order = numbers
                        ? (as_double(a) < as_double(b)   ? -1
                           : as_double(a) > as_double(b) ? 1
                                                         : 0)
                        : a.get_ref<const std::string&>().compare(b.get_ref<const std::string&>());
  if (op == "<") return order < 0;
  if (op == ">") return order > 0;
  if (op == "<=") return order <= 0;
  return order >= 0;
}

json arithmetic(const json& a, char op, const json& b, std::string_view source) {
  if (op == '+' && a.is_string() && b.is_string())
    return a.get<std::string>() + b.get<std::string>();
  if (op == '+' && a.is_array() && b.is_array()) {
    json out = a;
    out.insert(out.end(), b.begin(), b.end());
    return out;
  }
  if (op == '*' && a.is_string() && b.is_number_integer()) {
    std::string out;
    for (int64_t i = 0; i < b.get<int64_t>(); ++i) out += a.get_ref<const std::string&>();
    return out;
  }
  if (!a.is_number() || !b.is_number())
    template_error(source, std::string("'") + (op == 'f' ? std::string("//") : std::string(1, op)) +
                               "' between " + a.type_name() + " and " + b.type_name());
  const bool integers = a.is_number_integer() && b.is_number_integer();
  if (op == '/' || ((op == 'f' || op == '%') && as_double(b) == 0)) {
    if (as_double(b) == 0) template_error(source, "division by zero");
    return as_double(a) / as_double(b);
  }
  if (integers) {
    const int64_t x = a.get<int64_t>(), y = b.get<int64_t>();
    if (op == '+') return x + y;
    if (op == '-') return x - y;
    if (op == '*') return x * y;
    const int64_t floor_div = x / y - ((x % y != 0 && ((x < 0) != (y < 0))) ? 1 : 0);
    return op == 'f' ? floor_div : x - floor_div * y;  // Python's floor division and modulo
  }
  const double x = as_double(a), y = as_double(b);
  if (op == '+') return x + y;
  if (op == '-') return x - y;
  if (op == '*') return x * y;
  if (op == 'f') return std::floor(x / y);
  return x - std::floor(x / y) * y;
}

json call_method(const json& v, const std::string& name, const std::vector<json>& args,
                 std::string_view source) {
  const std::string* chars =
      !args.empty() && args[0].is_string() ? &args[0].get_ref<const std::string&>() : nullptr;
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return strip(need_string(v, name + "()", source), name != "rstrip", name != "lstrip", chars);
  if (name == "lower" && args.empty()) return map_case(need_string(v, "lower()", source), false);
  if (name == "upper" && args.empty()) return map_case(need_string(v, "upper()", source), true);
  if (name == "title" && args.empty()) return title_case(need_string(v, "title()", source));
  if (name == "capitalize" && args.empty())
    return capitalize(need_string(v, "capitalize()", source));
  if ((name == "startswith" || name == "endswith") && args.size() == 1) {
    const std::string& s = need_string(v, name + "()", source);
    const std::string& p = need_string(args[0], name + "()", source);
    if (p.size() > s.size()) return false;
    return name == "startswith" ? s.compare(0, p.size(), p) == 0
                                : s.compare(s.size() - p.size(), p.size(), p) == 0;
  }
  if (name == "split" && args.size() <= 1) {
    if (!args.empty() && (!args[0].is_string() || args[0].get<std::string>().empty()))
      template_error(source, "split() needs a non-empty string separator");
    return split(
        need_string(v, "split()", source),
        args.empty() ? std::nullopt : std::optional<std::string>(args[0].get<std::string>()));
  }
  if (name == "replace" && args.size() == 2 && args[0].is_string() && args[1].is_string())
    return replace_all(need_string(v, "replace()", source), args[0].get<std::string>(),
                       args[1].get<std::string>());
  if (name == "index" && args.size() == 1) {
    if (v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i)
        if (v[i] == args[0]) return static_cast<int64_t>(i);
      template_error(source, python_repr(args[0]) + " is not in the list " + python_repr(v));
    }
    const size_t p =
        need_string(v, "index()", source).find(need_string(args[0], "index()", source));
    if (p == std::string::npos) template_error(source, "substring not found by index()");
    return static_cast<int64_t>(p);
  }
  if (name == "get" && (args.size() == 1 || args.size() == 2) && v.is_object()) {
    if (args[0].is_string() && v.contains(args[0].get<std::string>()))
      return v.at(args[0].get<std::string>());
    return args.size() == 2 ? args[1] : json(nullptr);
  }
  if (name == "items" && args.empty()) return items(v, source);
  if ((name == "keys" || name == "values") && args.empty() && v.is_object()) {
    json out = json::array();
    for (const auto& [k, value] : v.items()) out.push_back(name == "keys" ? json(k) : value);
    return out;
  }
  template_error(source,
                 "unsupported method ." + name + "() with " + std::to_string(args.size()) +
                     " arguments on a " + v.type_name() +
                     " (supported: strip, lstrip, rstrip, lower, upper, title, capitalize, "
                     "startswith, endswith, split, replace, index, get, items, keys, values)");
}

json apply_filter(const json& v, const std::string& name, const std::vector<json>& args,
                  const KeywordArgs& keywords, std::string_view source) {
  if (name == "trim") return strip(need_string(v, "|trim", source), true, true, nullptr);
  if (name == "lower") return map_case(python_str(v), false);
  if (name == "upper") return map_case(python_str(v), true);
  if (name == "title") return title_case(python_str(v));
  if (name == "capitalize") return capitalize(python_str(v));
  if (name == "string") return python_str(v);
  if (name == "int" || name == "float") {
    double value = 0;
    if (v.is_number()) {
      value = v.get<double>();
    } else {
      try {
        value = std::stod(strip(python_str(v), true, true, nullptr));
      } catch (const std::exception&) {
        value = 0;  // Jinja's int and float filters: 0 when the text is not a number
      }
    }
    if (name == "float") return json(value);
    // Beyond int64 (or not finite) the cast would be undefined: 0, as for text that is no number.
    const bool fits = std::isfinite(value) && std::fabs(value) < 9.2e18;
    return json(fits ? static_cast<int64_t>(value) : int64_t{0});
  }
  if (name == "length" || name == "count") {
    if (is_undefined(v)) return int64_t{0};
    return static_cast<int64_t>(v.is_string() ? v.get_ref<const std::string&>().size() : v.size());
  }
  if ((name == "first" || name == "last") && (v.is_array() || v.is_string())) {
    if (v.empty() || (v.is_string() && v.get_ref<const std::string&>().empty()))
      return undefined_value();
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      return std::string(1, name == "first" ? s.front() : s.back());
    }
    return name == "first" ? v.front() : v.back();
  }
  if (name == "join") {
    if (!v.is_array())
      template_error(source, "|join needs a list, found " + std::string(v.type_name()));
    const std::string sep = args.empty() ? "" : python_str(args[0]);
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : sep) + python_str(v[i]);
    return out;
  }
  if (name == "replace" && args.size() == 2)
    return replace_all(python_str(v), python_str(args[0]), python_str(args[1]));
  if (name == "default" || name == "d") {
    const bool boolean = args.size() > 1 && truthy(args[1]);
    const bool use_default = is_undefined(v) || (boolean && !truthy(v));
    return use_default ? (args.empty() ? json("") : args[0]) : v;
  }
  if (name == "tojson") {
    int indent = 0;
    for (const auto& [key, value] : keywords)
      if (key == "indent" && value.is_number_integer()) indent = value.get<int>();
    if (!args.empty() && args[0].is_number_integer()) indent = args[0].get<int>();
    return python_json(v, indent, 0);
  }
  if (name == "items") return items(v, source);
  if (name == "list") {
    if (v.is_array()) return v;
    json out = json::array();
    if (v.is_string())
      for (char c : v.get_ref<const std::string&>()) out.push_back(std::string(1, c));
    else if (v.is_object())
      for (const auto& [k, unused] : v.items()) out.push_back(k);
    return out;
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::string s = v.get<std::string>();
      std::reverse(s.begin(), s.end());
      return s;
    }
    if (v.is_array()) {
      json out = v;
      std::reverse(out.begin(), out.end());
      return out;
    }
  }
  if (name == "abs" && v.is_number())
    return v.is_number_integer() ? json(std::llabs(v.get<int64_t>()))
                                 : json(std::fabs(v.get<double>()));
  template_error(source, "unsupported filter |" + name + " on a " + v.type_name() +
                             " (supported: trim, lower, upper, title, capitalize, string, int, "
                             "float, length, count, first, last, join, replace, default, tojson, "
                             "items, list, reverse, abs)");
}

bool apply_test(const json& v, const std::string& name, const std::vector<json>& args,
                std::string_view source) {
  if (name == "defined") return !is_undefined(v);
  if (name == "undefined") return is_undefined(v);
  if (name == "none") return v.is_null();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_number_integer();
  if (name == "float") return v.is_number_float();
  if (name == "mapping") return v.is_object();
  if (name == "iterable") return v.is_array() || v.is_object() || v.is_string();
  if (name == "sequence") return v.is_array() || v.is_string() || v.is_object();
  if (name == "boolean") return v.is_boolean();
  if (name == "true") return v.is_boolean() && v.get<bool>();
  if (name == "false") return v.is_boolean() && !v.get<bool>();
  if ((name == "even" || name == "odd") && v.is_number_integer())
    return (v.get<int64_t>() % 2 == 0) == (name == "even");
  if ((name == "eq" || name == "equalto" || name == "sameas") && args.size() == 1)
    return !is_undefined(v) && v == args[0];
  template_error(source, "unsupported test 'is " + name +
                             "' (supported: defined, undefined, none, string, number, integer, "
                             "float, mapping, iterable, sequence, boolean, true, false, even, odd, "
                             "eq)");
}

json call_function(const std::string& name, const std::vector<json>& args,
                   const KeywordArgs& keywords, std::string_view source) {
  if (name == "raise_exception")
    throw Error(ErrorKind::kInvalidArgument,
                "the template raised an exception: " +
                    (args.empty() ? std::string() : python_str(args[0])));
  if (name == "range" && !args.empty() && args.size() <= 3) {
    for (const json& a : args)
      if (!a.is_number_integer()) template_error(source, "range() needs integers");
    const int64_t start = args.size() == 1 ? 0 : args[0].get<int64_t>();
    const int64_t stop = args.size() == 1 ? args[0].get<int64_t>() : args[1].get<int64_t>();
    const int64_t step = args.size() == 3 ? args[2].get<int64_t>() : 1;
    if (step == 0) template_error(source, "range() step must not be zero");
    // jinja2's sandbox limit (MAX_RANGE): a template read from a model file must not be able
    // to ask for unbounded memory. Counted in uint64 (start, stop, step are any int64: their
    // differences fit 64 unsigned bits, and start + n * step wraps back into range).
    constexpr uint64_t kMaxRange = 100000;
    const bool empty = step > 0 ? stop <= start : stop >= start;
    const uint64_t span = step > 0 ? static_cast<uint64_t>(stop) - static_cast<uint64_t>(start)
                                   : static_cast<uint64_t>(start) - static_cast<uint64_t>(stop);
    const uint64_t magnitude =
        step > 0 ? static_cast<uint64_t>(step) : static_cast<uint64_t>(-(step + 1)) + 1;
    const uint64_t count = empty ? 0 : (span - 1) / magnitude + 1;
    if (count > kMaxRange)
      template_error(source, "range() of " + std::to_string(count) +
                                 " items; at most 100000 (jinja2's sandbox limit)");
    json out = json::array();
    for (uint64_t n = 0; n < count; ++n)
      out.push_back(
          static_cast<int64_t>(static_cast<uint64_t>(start) + n * static_cast<uint64_t>(step)));
    return out;
  }
  if (name == "namespace" && args.empty()) {
    json ns = json::object();
    for (const auto& [key, value] : keywords) ns[key] = value;
    return ns;
  }
  template_error(
      source, "unsupported function " + name + "() (supported: raise_exception, range, namespace)");
}

}  // namespace patchbay::eval
