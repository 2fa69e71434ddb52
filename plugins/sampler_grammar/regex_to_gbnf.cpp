// Regex -> GBNF (see regex_to_gbnf.hpp): recursive descent over the regex emitting GBNF
// text. Every character is written as a \U escape, so no regex character can change the
// meaning of the GBNF around it.
#include "regex_to_gbnf.hpp"

#include <cstdio>
#include <stdexcept>

#include "gbnf_parser.hpp"

namespace sampler_grammar {
namespace {

std::string escaped(uint32_t cp) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "\\U%08X", static_cast<unsigned>(cp));
  return buffer;
}

// A one-character GBNF string literal (appends: GCC 12 misreports "lit" + string as -Wrestrict).
std::string quoted(uint32_t cp) {
  std::string out(1, '"');
  out += escaped(cp);
  out += '"';
  return out;
}

class RegexTranslator {
 public:
  explicit RegexTranslator(std::string_view regex) : src_(regex) {}

  std::string run() {
    if (peek() == '^') ++pos_;
    std::string body = alternation();
    if (peek() == '$' && pos_ + 1 == src_.size()) ++pos_;
    if (pos_ < src_.size()) {
      if (peek() == ')') fail("')' without a matching '('");
      fail(std::string("unexpected '") + peek() + "'" +
           (peek() == '$' || peek() == '^' ? " (anchors are only allowed at the very start and end)"
                                           : ""));
    }
    return "root ::= " + body + "\n";
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw GrammarSyntaxError(1, pos_ + 1, "regex: " + message);
  }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }
  bool at_end() const { return pos_ >= src_.size(); }

  std::string alternation() {
    std::string out = "(";
    out += concatenation();
    while (peek() == '|') {
      ++pos_;
      out += " | " + concatenation();
    }
    return out + ")";
  }

  std::string concatenation() {
    std::string out;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$' && pos_ + 1 == src_.size()) break;
      std::string item = atom();
      item += quantifier();
      out += item + " ";
    }
    return out;
  }

  std::string quantifier() {
    const char c = peek();
    std::string q;
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++pos_;
    } else if (c == '{' && (peek(1) == ',' || (peek(1) >= '0' && peek(1) <= '9'))) {
      const size_t start = pos_;
      while (!at_end() && peek() != '}') ++pos_;
      if (at_end()) {
        pos_ = start;
        fail("'{' of a repetition is not closed by '}'");
      }
      ++pos_;
      q = std::string(src_.substr(start, pos_ - start));
      check_counts(q, start);
    } else {
      return q;
    }
    if (peek() == '?') ++pos_;  // lazy: the same strings match
    if (peek() == '*' || peek() == '+' || (peek() == '{' && peek(1) >= '0' && peek(1) <= '9')) {
      fail(
          "a quantifier follows another one (possessive and stacked quantifiers are not "
          "supported)");
    }
    return q;
  }

  // {m}, {m,}, {,n}, {m,n} with m <= n <= kMaxRepetition, checked here so the message
  // points into the regex rather than into the generated GBNF.
  void check_counts(const std::string& q, size_t start) {
    long long m = -1, n = -1;
    size_t i = 1;
    const auto number = [&]() {
      long long v = -1;
      while (i < q.size() && q[i] >= '0' && q[i] <= '9') {
        v = (v < 0 ? 0 : v) * 10 + (q[i] - '0');
        if (v > kMaxRepetition) {
          pos_ = start;
          fail("repetition count above " + std::to_string(kMaxRepetition));
        }
        ++i;
      }
      return v;
    };
    m = number();
    const bool comma = i < q.size() && q[i] == ',';
    if (comma) {
      ++i;
      n = number();
    }
    if (i + 1 != q.size() || (m < 0 && !comma)) {
      pos_ = start;
      fail("malformed repetition " + q + " (expected {m}, {m,}, {,n} or {m,n})");
    }
    if (comma && n >= 0 && m > n) {
      pos_ = start;
      fail("repetition " + q + " has n < m");
    }
  }

  uint32_t code_point() {
    try {
      return decode_utf8_at(src_, pos_);
    } catch (const std::invalid_argument&) {
      fail("invalid UTF-8");
    }
  }

  uint32_t hex(int digits) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) fail("expected " + std::to_string(digits) + " hex digits after \\x or \\u");
      value = value * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return value;
  }

  // Class body (ranges, GBNF syntax without brackets) of \d \w \s, or "" for other letters.
  static std::string shorthand_class(char c) {
    switch (c) {
      case 'd':
      case 'D':
        return "0-9";
      case 'w':
      case 'W':
        return "a-zA-Z0-9_";
      case 's':
      case 'S':
        return " \\t\\n\\r\\x0B\\x0C";
      default:
        return "";
    }
  }

  // An escape after '\' (pos_ at the letter): either a class body (is_class) or a code point.
  std::string escape(bool in_class, bool& is_class, bool& negated, uint32_t& cp) {
    const char c = peek();
    if (at_end()) fail("a trailing '\\' escapes nothing");
    ++pos_;
    is_class = false;
    negated = false;
    const std::string shorthand = shorthand_class(c);
    if (!shorthand.empty()) {
      is_class = true;
      negated = c == 'D' || c == 'W' || c == 'S';
      if (negated && in_class) {
        --pos_;
        fail(std::string("\\") + c +
             " inside [...] is not supported; write the negated class outside");
      }
      return shorthand;
    }
    switch (c) {
      case 'n':
        cp = '\n';
        return "";
      case 'r':
        cp = '\r';
        return "";
      case 't':
        cp = '\t';
        return "";
      case 'f':
        cp = '\f';
        return "";
      case 'v':
        cp = '\v';
        return "";
      case 'x':
        cp = hex(2);
        return "";
      case 'u':
        cp = hex(4);
        return "";
      default:
        break;
    }
    if ((c >= '1' && c <= '9') || c == 'k') {
      --pos_;
      fail("backreferences are not supported (they are not regular)");
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
      --pos_;
      fail(std::string("unknown escape \\") + c +
           (c == 'b' || c == 'B' ? " (word boundaries are not supported)" : ""));
    }
    --pos_;
    cp = code_point();  // escaped punctuation or any other character stands for itself
    return "";
  }

  std::string atom() {
    const size_t start = pos_;
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (peek() == '?') {
        if (peek(1) != ':')
          fail("only (?:...) groups are supported (no lookaround or named groups)");
        pos_ += 2;
      }
      // Each group is a level of recursion here, in the GBNF parser and in the matcher: a
      // bound keeps a hostile regex ("((((...") an error, not a stack overflow.
      if (++depth_ >= kMaxNesting - 1) {  // the translation adds one level around the regex
        pos_ = start;
        fail("groups nest deeper than " + std::to_string(kMaxNesting - 2) + " levels");
      }
      std::string inner = alternation();
      --depth_;
      if (peek() != ')') {
        pos_ = start;
        fail("'(' is not closed by ')'");
      }
      ++pos_;
      return inner;
    }
    if (c == '[') return bracket();
    if (c == '.') {
      ++pos_;
      return "[^\\n]";
    }
    if (c == '*' || c == '+' || c == '?' ||
        (c == '{' && (peek(1) == ',' || (peek(1) >= '0' && peek(1) <= '9')))) {
      fail(std::string("'") + c + "' has nothing before it to repeat");
    }
    if (c == '^' || c == '$')
      fail("anchors are only allowed at the very start and end of the regex");
    if (c == '\\') {
      ++pos_;
      bool is_class = false, negated = false;
      uint32_t cp = 0;
      const std::string body = escape(false, is_class, negated, cp);
      if (is_class) return std::string("[") + (negated ? "^" : "") + body + "]";
      return quoted(cp);
    }
    return quoted(code_point());
  }

  std::string bracket() {
    const size_t start = pos_;
    ++pos_;
    std::string out = "[";
    if (peek() == '^') {
      out += "^";
      ++pos_;
    }
    bool first = true;
    bool any = false;
    while (!(peek() == ']' && !first)) {
      if (at_end()) {
        pos_ = start;
        fail("'[' is not closed by ']'");
      }
      first = false;
      uint32_t lo = 0;
      if (peek() == '\\') {
        ++pos_;
        bool is_class = false, negated = false;
        const std::string body = escape(true, is_class, negated, lo);
        if (is_class) {
          out += body;
          any = true;
          continue;
        }
      } else {
        lo = code_point();
      }
      out += escaped(lo);
      any = true;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < src_.size()) {
        ++pos_;
        uint32_t hi = 0;
        if (peek() == '\\') {
          ++pos_;
          bool is_class = false, negated = false;
          escape(true, is_class, negated, hi);
          if (is_class) fail("a class shorthand cannot end a range");
        } else {
          hi = code_point();
        }
        if (hi < lo) fail("character range goes backwards");
        out += '-';
        out += escaped(hi);
      }
    }
    ++pos_;
    if (!any) fail("empty character class");
    return out + "]";
  }

  std::string_view src_;
  size_t pos_ = 0;
  uint32_t depth_ = 0;  // open groups around pos_
};

}  // namespace

std::string regex_to_gbnf(std::string_view regex) { return RegexTranslator(regex).run(); }

Grammar compile_regex(std::string_view regex) { return parse_gbnf(regex_to_gbnf(regex), "root"); }

}  // namespace sampler_grammar
