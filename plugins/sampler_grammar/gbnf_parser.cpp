// GBNF parser (see gbnf_parser.hpp): recursive descent over the text, emitting the flat
// element arrays of grammar_rules.hpp, then the checks on the whole grammar (undefined
// rules, start rule, left recursion).
#include "gbnf_parser.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

namespace sampler_grammar {

uint32_t decode_utf8_at(std::string_view text, size_t& pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  size_t length = lead < 0x80           ? 1
                  : (lead >> 5) == 0x6  ? 2
                  : (lead >> 4) == 0xE  ? 3
                  : (lead >> 3) == 0x1E ? 4
                                        : 0;
  if (length == 0 || pos + length > text.size()) throw std::invalid_argument("invalid UTF-8");
  uint32_t cp = length == 1 ? lead : lead & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) throw std::invalid_argument("invalid UTF-8");
    cp = (cp << 6) | (byte(pos + i) & 0x3F);
  }
  pos += length;
  return cp;
}

namespace {

constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

std::string shown(char c) {
  if (c == '\n') return "end of line";
  if (c == '\0') return "end of input";
  return std::string("'") + c + "'";
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view root) : src_(text), root_name_(root) {}

  Grammar run() {
    skip_space(true);
    while (pos_ < src_.size()) {
      parse_rule();
      skip_space(true);
    }
    for (size_t r = 0; r < grammar_.names.size(); ++r) {
      if (defined_at_[r] == kNone) {
        fail_at(first_use_at_[r], "rule '" + grammar_.names[r] + "' is used but never defined");
      }
    }
    const auto root = ids_.find(std::string(root_name_));
    if (root == ids_.end() || defined_at_[root->second] == kNone) {
      fail_at(src_.size(), "no rule named '" + std::string(root_name_) +
                               "' (the start rule): define " + std::string(root_name_) +
                               " ::= ...");
    }
    grammar_.root = root->second;
    check_left_recursion();
    return std::move(grammar_);
  }

 private:
  static constexpr size_t kNone = std::numeric_limits<size_t>::max();

  [[noreturn]] void fail_at(size_t at, const std::string& message) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw GrammarSyntaxError(line, column, message);
  }
  [[noreturn]] void fail(const std::string& message) const { fail_at(pos_, message); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }

  // Skips blanks and comments; newlines too when `newlines` (after ::= and |, in parentheses).
  void skip_space(bool newlines) {
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newlines)) {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  uint32_t symbol(const std::string& name, size_t at) {
    const auto [it, inserted] = ids_.emplace(name, static_cast<uint32_t>(grammar_.names.size()));
    if (inserted) {
      grammar_.names.push_back(name);
      grammar_.rules.emplace_back();
      defined_at_.push_back(kNone);
      first_use_at_.push_back(at);
    }
    return it->second;
  }
  uint32_t generated_symbol(const std::string& base) {
    const uint32_t id = symbol(base + "_" + std::to_string(grammar_.names.size()), pos_);
    defined_at_[id] = pos_;
    return id;
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (is_name_char(peek())) ++pos_;
    if (pos_ == start)
      fail("expected a rule name (letters, digits, '-' or '_'), found " + shown(peek()));
    return std::string(src_.substr(start, pos_ - start));
  }

  void parse_rule() {
    const size_t start = pos_;
    const std::string name = parse_name();
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=")
      fail("expected '::=' after the rule name '" + name + "', found " + shown(peek()));
    pos_ += 3;
    skip_space(true);
    const uint32_t id = symbol(name, start);
    if (defined_at_[id] != kNone) {
      fail_at(start, "rule '" + name +
                         "' is defined twice (once is allowed; join the definitions with |)");
    }
    defined_at_[id] = start;
    grammar_.rules[id] = parse_alternatives(name, false);
    skip_space(false);
    if (pos_ < src_.size() && peek() != '\n' && peek() != '\r') {
      fail("expected the end of the rule (end of line), found " + shown(peek()));
    }
  }

  std::vector<Element> parse_alternatives(const std::string& rule_name, bool nested) {
    std::vector<Element> out;
    parse_sequence(rule_name, out, nested);
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      out.push_back({Op::Alt, 0});
      parse_sequence(rule_name, out, nested);
    }
    out.push_back({Op::End, 0});
    return out;
  }

  // One code point of a literal or class, escapes decoded.
  uint32_t parse_char(const char* where) {
    if (pos_ >= src_.size()) fail(std::string("unexpected end of input inside ") + where);
    if (peek() != '\\') {
      try {
        return decode_utf8_at(src_, pos_);
      } catch (const std::invalid_argument&) {
        fail("invalid UTF-8 inside " + std::string(where));
      }
    }
    const char e = peek(1);
    pos_ += 2;
    switch (e) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/':
      case '\'':
        return static_cast<uint32_t>(e);
      case 'x':
        return parse_hex(2);
      case 'u':
        return parse_hex(4);
      case 'U':
        return parse_hex(8);
      default:
        pos_ -= 1;
        fail("unknown escape \\" + std::string(1, e) + " inside " + where +
             " (known: \\n \\r \\t \\\\ \\\" \\[ \\] \\- \\^ \\xHH \\uHHHH \\UHHHHHHHH)");
    }
  }
  uint32_t parse_hex(int digits) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0)
        fail("expected " + std::to_string(digits) + " hex digits in an escape, found " + shown(c));
      value = value * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (value > 0x10FFFF)
      fail("escape names " + std::to_string(value) + ", beyond the last code point U+10FFFF");
    return value;
  }

  uint32_t parse_count() {
    const size_t start = pos_;
    uint64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      value = value * 10 + static_cast<uint64_t>(peek() - '0');
      if (value > kMaxRepetition)
        fail_at(start, "repetition count above " + std::to_string(kMaxRepetition));
      ++pos_;
    }
    if (pos_ == start) fail("expected a number in {m,n}, found " + shown(peek()));
    return static_cast<uint32_t>(value);
  }

  void parse_sequence(const std::string& rule_name, std::vector<Element>& out, bool nested) {
    size_t last_start = out.size();  // where the last item (the operand of * + ? {}) starts
    bool have_item = false;
    while (pos_ < src_.size()) {
      const char c = peek();
      const size_t here = pos_;
      if (c == '"') {
        ++pos_;
        last_start = out.size();
        while (peek() != '"') {
          if (pos_ >= src_.size() || peek() == '\n')
            fail_at(here, "unterminated string literal (a \" is missing)");
          out.push_back({Op::Char, parse_char("a string literal")});
        }
        ++pos_;
        have_item = true;
      } else if (c == '[') {
        ++pos_;
        last_start = out.size();
        Op first = Op::Char;
        if (peek() == '^') {
          first = Op::CharNot;
          ++pos_;
        }
        bool any = false;
        while (peek() != ']') {
          if (pos_ >= src_.size() || peek() == '\n')
            fail_at(here, "unterminated character class (a ] is missing)");
          const uint32_t lo = parse_char("a character class");
          out.push_back({any ? Op::CharAlt : first, lo});
          any = true;
          if (peek() == '-' && peek(1) != ']' && pos_ + 1 < src_.size()) {
            ++pos_;
            const size_t range_at = pos_;
            const uint32_t hi = parse_char("a character class");
            if (hi < lo)
              fail_at(range_at, "character range goes backwards (its end is below its start)");
            out.push_back({Op::CharRngUpper, hi});
          }
        }
        if (!any) fail_at(here, "empty character class []: it can match nothing");
        ++pos_;
        have_item = true;
      } else if (is_name_char(c)) {
        const std::string name = parse_name();
        last_start = out.size();
        out.push_back({Op::RuleRef, symbol(name, here)});
        have_item = true;
      } else if (c == '(') {
        if (++depth_ >= kMaxNesting)
          fail("groups nest deeper than " + std::to_string(kMaxNesting - 1) + " levels");
        ++pos_;
        skip_space(true);
        const uint32_t sub = generated_symbol(rule_name);
        grammar_.rules[sub] = parse_alternatives(rule_name, true);
        if (peek() != ')')
          fail("expected ')' to close the group opened at " + where(here) + ", found " +
               shown(peek()));
        ++pos_;
        --depth_;
        last_start = out.size();
        out.push_back({Op::RuleRef, sub});
        have_item = true;
      } else if (c == '.') {
        ++pos_;
        last_start = out.size();
        out.push_back({Op::CharAny, 0});
        have_item = true;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_item) fail(std::string("'") + c + "' has nothing before it to repeat");
        uint32_t min = 0, max = kUnbounded;
        ++pos_;
        if (c == '+') min = 1;
        if (c == '?') max = 1;
        if (c == '{') {
          skip_space(nested);
          min = peek() == ',' ? 0 : parse_count();
          skip_space(nested);
          if (peek() == ',') {
            ++pos_;
            skip_space(nested);
            max = peek() == '}' ? kUnbounded : parse_count();
          } else {
            max = min;
          }
          skip_space(nested);
          if (peek() != '}') fail("expected '}' to close {m,n}, found " + shown(peek()));
          ++pos_;
          if (max < min) fail_at(here, "{m,n} with n < m");
        }
        repeat(rule_name, out, last_start, min, max);
        have_item = false;  // x** is refused: repeat a group instead
      } else {
        break;
      }
      skip_space(nested);
    }
  }

  std::string where(size_t at) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at; ++i) {
      if (src_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(column);
  }

  // Rewrites out[last_start, end) (the item) repeated min..max times, as llama.cpp does.
  void repeat(const std::string& rule_name, std::vector<Element>& out, size_t last_start,
              uint32_t min, uint32_t max) {
    const std::vector<Element> item(out.begin() + static_cast<std::ptrdiff_t>(last_start),
                                    out.end());
    out.resize(last_start);
    for (uint32_t i = 0; i < min; ++i) out.insert(out.end(), item.begin(), item.end());
    if (max == kUnbounded) {  // r ::= item r |
      const uint32_t r = generated_symbol(rule_name);
      std::vector<Element> body = item;
      body.push_back({Op::RuleRef, r});
      body.push_back({Op::Alt, 0});
      body.push_back({Op::End, 0});
      grammar_.rules[r] = std::move(body);
      out.push_back({Op::RuleRef, r});
      return;
    }
    // max - min nested optionals: r1 ::= item | ; r2 ::= item r1 | ; ...
    uint32_t previous = kUnbounded;
    for (uint32_t i = min; i < max; ++i) {
      const uint32_t r = generated_symbol(rule_name);
      std::vector<Element> body = item;
      if (previous != kUnbounded) body.push_back({Op::RuleRef, previous});
      body.push_back({Op::Alt, 0});
      body.push_back({Op::End, 0});
      grammar_.rules[r] = std::move(body);
      previous = r;
    }
    if (previous != kUnbounded) out.push_back({Op::RuleRef, previous});
  }

  // Left recursion (direct, indirect, or behind rules that match the empty string) would make
  // the top-down matcher loop; llama.cpp refuses it the same way.
  void check_left_recursion() {
    const size_t n = grammar_.rules.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        bool alt_nullable = true;
        for (const Element& e : grammar_.rules[r]) {
          if (is_end_of_alternative(e.op)) {
            if (alt_nullable) {
              nullable[r] = changed = true;
              break;
            }
            alt_nullable = true;
          } else if (e.op != Op::RuleRef || !nullable[e.value]) {
            alt_nullable = false;
          }
        }
      }
    }
    std::vector<std::vector<uint32_t>> leftmost(n);  // rules reachable before any input
    for (size_t r = 0; r < n; ++r) {
      bool at_left = true;
      for (const Element& e : grammar_.rules[r]) {
        if (is_end_of_alternative(e.op)) {
          at_left = true;
        } else if (at_left && e.op == Op::RuleRef) {
          leftmost[r].push_back(e.value);
          at_left = nullable[e.value];
        } else {
          at_left = false;
        }
      }
    }
    // Depth-first search with an explicit stack (a chain of 100K rules must not overflow the
    // call stack): a leftmost edge back to a rule on the path is left recursion.
    std::vector<int> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<uint32_t, size_t>> path;  // rule, index of its next leftmost edge
    for (uint32_t start = 0; start < n; ++start) {
      if (color[start] != 0) continue;
      color[start] = 1;
      path.push_back({start, 0});
      while (!path.empty()) {
        auto& [r, edge] = path.back();
        if (edge == leftmost[r].size()) {
          color[r] = 2;
          path.pop_back();
          continue;
        }
        const uint32_t next = leftmost[r][edge++];
        if (color[next] == 1) report_left_recursion(path, next);
        if (color[next] == 0) {
          color[next] = 1;
          path.push_back({next, 0});
        }
      }
    }
  }

  [[noreturn]] void report_left_recursion(const std::vector<std::pair<uint32_t, size_t>>& path,
                                          uint32_t next) const {
    std::vector<uint32_t> rules;  // the cycle, from `next` round to the rule before it
    bool on = false;
    for (const auto& step : path) {
      on = on || step.first == next;
      if (on) rules.push_back(step.first);
    }
    std::string cycle;  // a long cycle is shown by its first and last 8 rules
    for (size_t i = 0; i < rules.size(); ++i) {
      if (rules.size() > 16 && i == 8) {
        cycle += "... (" + std::to_string(rules.size() - 16) + " more) -> ";
        i = rules.size() - 8;
      }
      cycle += grammar_.names[rules[i]] + " -> ";
    }
    cycle += grammar_.names[next];
    fail_at(defined_at_[next],
            "left recursion detected (" + cycle +
                "): rewrite it with repetition, e.g. expr ::= term (\"+\" "
                "term)*; a repetition of something that can be empty also loops");
  }

  std::string_view src_;
  std::string_view root_name_;
  size_t pos_ = 0;
  uint32_t depth_ = 0;  // open groups around pos_
  Grammar grammar_;
  std::map<std::string, uint32_t> ids_;
  std::vector<size_t> defined_at_;
  std::vector<size_t> first_use_at_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text, std::string_view root) {
  return Parser(text, root).run();
}

}  // namespace sampler_grammar
