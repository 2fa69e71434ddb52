// Jinja statements around the shared expression evaluator; see jinja_template.hpp.
// Three stages: the source is cut into tags (text, {{ }}, {% %}) with whitespace control
// applied (trim_blocks, lstrip_blocks, '-' markers); the tags are parsed into a tree of
// nodes (if / for / set / generation blocks); the tree is run over a stack of scopes.
#include "eval/jinja_template.hpp"

#include <memory>

#include "common/error.hpp"
#include "eval/template_expression.hpp"

namespace patchbay::eval {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail_at(int line, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument,
              "chat template line " + std::to_string(line) + ": " + what);
}

enum class TagKind { kText, kOutput, kStatement };

struct Tag {
  TagKind kind;
  std::string text;  // literal text, an expression, or a statement (trimmed)
  int line;
};

std::string trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a])) != 0) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1])) != 0) --b;
  return std::string(s.substr(a, b - a));
}

int line_of(std::string_view source, size_t offset) {
  int line = 1;
  for (size_t i = 0; i < offset && i < source.size(); ++i) line += source[i] == '\n';
  return line;
}

// Position of `close` after `from`, skipping quoted strings; npos when absent.
size_t find_close(std::string_view source, size_t from, std::string_view close) {
  char quote = 0;
  for (size_t i = from; i + 1 < source.size() + 1; ++i) {
    const char c = source[i];
    if (quote != 0) {
      if (c == '\\')
        ++i;
      else if (c == quote)
        quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (source.substr(i, close.size()) == close) {
      return i;
    }
  }
  return std::string_view::npos;
}

// Cuts the source into tags, applying Jinja's whitespace rules as it goes.
std::vector<Tag> cut_tags(std::string_view source) {
  std::vector<Tag> tags;
  std::string text;  // literal text since the last tag
  size_t pos = 0;
  auto flush = [&](int line) {
    if (!text.empty()) tags.push_back({TagKind::kText, text, line});
    text.clear();
  };
  while (pos < source.size()) {
    size_t open = std::string_view::npos;
    for (const char* opener : {"{{", "{%", "{#"}) open = std::min(open, source.find(opener, pos));
    if (open == std::string_view::npos) {
      text += source.substr(pos);
      break;
    }
    text += source.substr(pos, open - pos);
    const char kind = source[open + 1];
    const char marker = open + 2 < source.size() ? source[open + 2] : 0;
    const bool block_like = kind == '%' || kind == '#';
    if (marker == '-') {
      while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())) != 0)
        text.pop_back();
    } else if (block_like && marker != '+') {
      // lstrip_blocks: spaces and tabs from the start of the source line up to the tag (they
      // are the end of `text`: the line holds nothing else before the tag).
      size_t start = open;
      while (start > 0 && (source[start - 1] == ' ' || source[start - 1] == '\t')) --start;
      const size_t spaces = open - start;
      if ((start == 0 || source[start - 1] == '\n') && spaces <= text.size())
        text.resize(text.size() - spaces);
    }
    const int line = line_of(source, open);
    const std::string_view closer = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    const size_t close =
        kind == '#' ? source.find(closer, open + 2) : find_close(source, open + 2, closer);
    if (close == std::string_view::npos)
      fail_at(line,
              "'{" + std::string(1, kind) + "' is not closed by '" + std::string(closer) + "'");
    const size_t body_begin = open + 2 + (marker == '-' || marker == '+' ? 1 : 0);
    const bool trim_after = close > body_begin && source[close - 1] == '-';
    const std::string body =
        trim(source.substr(body_begin, close - body_begin - (trim_after ? 1 : 0)));
    pos = close + 2;
    if (trim_after) {
      while (pos < source.size() && std::isspace(static_cast<unsigned char>(source[pos])) != 0)
        ++pos;
    } else if (block_like && pos < source.size() && source[pos] == '\n') {
      ++pos;  // trim_blocks: the newline right after a block tag
    }
    if (kind == '#') continue;
    flush(line);
    tags.push_back({kind == '{' ? TagKind::kOutput : TagKind::kStatement, body, line});
  }
  flush(line_of(source, source.size()));
  return tags;
}

enum class NodeKind { kText, kOutput, kIf, kFor, kSet, kBreak, kContinue, kGeneration };

struct Node {
  NodeKind kind;
  int line = 0;
  std::string text;    // literal text; the output, set or for-iterable expression
  std::string target;  // set: "x", "ns.attr" or "a, b"; for: "x" or "k, v"
  std::string filter;  // for ... if filter
  std::vector<std::pair<std::string, std::vector<Node>>> branches;  // if/elif (condition, body)
  std::vector<Node> body, else_body;  // for body / else; if's else; generation's body
};

std::string first_word(const std::string& statement) {
  size_t end = 0;
  while (end < statement.size() &&
         (std::isalnum(static_cast<unsigned char>(statement[end])) != 0 || statement[end] == '_'))
    ++end;
  return statement.substr(0, end);
}

// Offset of the word `word` at bracket depth 0 and outside quotes in `s`, or npos.
size_t find_word(const std::string& s, const std::string& word, size_t from = 0) {
  int depth = 0;
  char quote = 0;
  for (size_t i = from; i < s.size(); ++i) {
    const char c = s[i];
    if (quote != 0) {
      if (c == '\\')
        ++i;
      else if (c == quote)
        quote = 0;
      continue;
    }
    if (c == '\'' || c == '"')
      quote = c;
    else if (c == '(' || c == '[' || c == '{')
      ++depth;
    else if (c == ')' || c == ']' || c == '}')
      --depth;
    else if (depth == 0 && s.compare(i, word.size(), word) == 0 &&
             (i == 0 ||
              (std::isalnum(static_cast<unsigned char>(s[i - 1])) == 0 && s[i - 1] != '_')) &&
             (i + word.size() >= s.size() ||
              (std::isalnum(static_cast<unsigned char>(s[i + word.size()])) == 0 &&
               s[i + word.size()] != '_')))
      return i;
  }
  return std::string::npos;
}

class Parser {
 public:
  explicit Parser(std::vector<Tag> tags) : tags_(std::move(tags)) {}

  std::vector<Node> parse_all() {
    std::vector<Node> nodes = parse_until({});
    if (pos_ < tags_.size()) fail_at(tags_[pos_].line, "unexpected {% " + tags_[pos_].text + " %}");
    return nodes;
  }

 private:
  // Nodes up to a statement whose first word is in `ends` (left unconsumed) or the end.
  std::vector<Node> parse_until(const std::vector<std::string>& ends) {
    std::vector<Node> nodes;
    while (pos_ < tags_.size()) {
      const Tag& tag = tags_[pos_];
      if (tag.kind == TagKind::kText || tag.kind == TagKind::kOutput) {
        nodes.push_back(
            {tag.kind == TagKind::kText ? NodeKind::kText : NodeKind::kOutput, tag.line, tag.text});
        ++pos_;
        continue;
      }
      const std::string word = first_word(tag.text);
      for (const std::string& end : ends)
        if (word == end) return nodes;
      nodes.push_back(parse_statement(tag, word));
    }
    if (!ends.empty())
      fail_at(tags_.empty() ? 1 : tags_.back().line,
              "the template ends before {% " + ends.back() + " %}");
    return nodes;
  }

  std::string rest(const Tag& tag, const std::string& word) const {
    return trim(std::string_view(tag.text).substr(word.size()));
  }

  Node parse_statement(const Tag& tag, const std::string& word) {
    ++pos_;
    Node node{NodeKind::kText, tag.line};
    if (word == "if") {
      node.kind = NodeKind::kIf;
      std::string condition = rest(tag, word);
      while (true) {
        std::vector<Node> body = parse_until({"elif", "else", "endif"});
        node.branches.emplace_back(condition, std::move(body));
        const Tag& end = tags_[pos_++];
        const std::string end_word = first_word(end.text);
        if (end_word == "elif") {
          condition = rest(end, end_word);
        } else if (end_word == "else") {
          node.else_body = parse_until({"endif"});
          ++pos_;
          break;
        } else {
          break;
        }
      }
    } else if (word == "for") {
      node.kind = NodeKind::kFor;
      const std::string spec = rest(tag, word);
      const size_t in = find_word(spec, "in");
      if (in == std::string::npos)
        fail_at(tag.line, "expected 'for NAME in EXPR', found '" + tag.text + "'");
      node.target = trim(spec.substr(0, in));
      std::string iterable = spec.substr(in + 2);
      if (find_word(iterable, "recursive") != std::string::npos)
        fail_at(tag.line, "recursive loops are not supported");
      if (const size_t cond = find_word(iterable, "if"); cond != std::string::npos) {
        node.filter = trim(iterable.substr(cond + 2));
        iterable = iterable.substr(0, cond);
      }
      node.text = trim(iterable);
      node.body = parse_until({"else", "endfor"});
      if (first_word(tags_[pos_++].text) == "else") {
        node.else_body = parse_until({"endfor"});
        ++pos_;
      }
    } else if (word == "set") {
      node.kind = NodeKind::kSet;
      const std::string spec = rest(tag, word);
      const size_t eq = spec.find('=');
      if (eq == std::string::npos || (eq + 1 < spec.size() && spec[eq + 1] == '='))
        fail_at(
            tag.line,
            "{% set NAME %} ... {% endset %} blocks are not supported; use {% set NAME = EXPR %}");
      node.target = trim(spec.substr(0, eq));
      node.text = trim(spec.substr(eq + 1));
    } else if (word == "break" || word == "continue") {
      node.kind = word == "break" ? NodeKind::kBreak : NodeKind::kContinue;
    } else if (word == "generation") {
      node.kind = NodeKind::kGeneration;
      node.body = parse_until({"endgeneration"});
      ++pos_;
    } else {
      fail_at(tag.line, "{% " + word +
                            " %} is not supported (supported: if/elif/else, for, set, break, "
                            "continue, generation)");
    }
    return node;
  }

  std::vector<Tag> tags_;
  size_t pos_ = 0;
};

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> names;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    names.push_back(
        trim(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return names;
}

class Renderer {
 public:
  explicit Renderer(const json& variables) {
    scopes_.push_back(variables.is_object() ? variables : json::object());
    names_.strict = false;
    names_.find = [this](const std::string& name) -> const json* {
      for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
        if (const auto found = it->find(name); found != it->end()) return &*found;
      return nullptr;
    };
  }

  enum class Flow { kNormal, kBreak, kContinue };

  Flow run(const std::vector<Node>& nodes) {
    for (const Node& node : nodes) {
      const Flow flow = run_node(node);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  JinjaRender result() { return std::move(out_); }

 private:
  json eval(const std::string& expr, int line) {
    try {
      return evaluate_expression(expr, names_, expr);
    } catch (const Error& e) {
      if (std::string(e.what()).rfind("chat template line", 0) == 0) throw;
      fail_at(line, e.what());
    }
  }

  void assign(const std::string& target, const json& value, int line) {
    const std::vector<std::string> targets = split_names(target);
    if (targets.size() > 1) {
      if (!value.is_array() || value.size() != targets.size())
        fail_at(line, "cannot unpack " + std::string(value.type_name()) + " into " +
                          std::to_string(targets.size()) + " names");
      for (size_t i = 0; i < targets.size(); ++i) scopes_.back()[targets[i]] = value[i];
      return;
    }
    const size_t dot = target.find('.');
    if (dot == std::string::npos) {
      scopes_.back()[target] = value;
      return;
    }
    const std::string object = target.substr(0, dot), attribute = target.substr(dot + 1);
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (const auto found = it->find(object); found != it->end() && found->is_object()) {
        (*found)[attribute] = value;
        return;
      }
    fail_at(line, "'" + object + "' is not a namespace (make it with {% set " + object +
                      " = namespace() %})");
  }

  Flow run_node(const Node& node) {
    switch (node.kind) {
      case NodeKind::kText:
        out_.text += node.text;
        return Flow::kNormal;
      case NodeKind::kOutput:
        out_.text += python_str(eval(node.text, node.line));
        return Flow::kNormal;
      case NodeKind::kSet:
        assign(node.target, eval(node.text, node.line), node.line);
        return Flow::kNormal;
      case NodeKind::kBreak:
        return Flow::kBreak;
      case NodeKind::kContinue:
        return Flow::kContinue;
      case NodeKind::kIf:
        for (const auto& [condition, body] : node.branches)
          if (truthy(eval(condition, node.line))) return run(body);
        return run(node.else_body);
      case NodeKind::kGeneration: {
        const size_t begin = out_.text.size();
        const Flow flow = run(node.body);
        out_.marked.emplace_back(begin, out_.text.size());
        return flow;
      }
      case NodeKind::kFor:
        return run_for(node);
    }
    return Flow::kNormal;
  }

  Flow run_for(const Node& node) {
    const json iterable = eval(node.text, node.line);
    json items = json::array();
    if (iterable.is_array()) {
      items = iterable;
    } else if (iterable.is_object()) {
      for (const auto& [k, unused] : iterable.items()) items.push_back(k);
    } else if (iterable.is_string()) {
      for (char c : iterable.get_ref<const std::string&>()) items.push_back(std::string(1, c));
    } else if (!is_undefined(iterable) && !iterable.is_null()) {
      fail_at(node.line,
              "cannot loop over a " + std::string(iterable.type_name()) + " ('" + node.text + "')");
    }
    if (!node.filter.empty()) {
      json kept = json::array();
      for (const json& item : items) {
        scopes_.push_back(json::object());
        assign(node.target, item, node.line);
        if (truthy(eval(node.filter, node.line))) kept.push_back(item);
        scopes_.pop_back();
      }
      items = std::move(kept);
    }
    if (items.empty()) return run(node.else_body);
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      json loop = {
          {"index", i + 1},  {"index0", i},        {"revindex", n - i}, {"revindex0", n - i - 1},
          {"first", i == 0}, {"last", i == n - 1}, {"length", n}};
      loop["previtem"] = i > 0 ? items[static_cast<size_t>(i - 1)] : undefined_value();
      loop["nextitem"] = i + 1 < n ? items[static_cast<size_t>(i + 1)] : undefined_value();
      scopes_.push_back(json{{"loop", loop}});
      assign(node.target, items[static_cast<size_t>(i)], node.line);
      const Flow flow = run(node.body);
      scopes_.pop_back();
      if (flow == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  std::vector<json> scopes_;  // innermost last; scopes_[0] holds the caller's variables
  ExpressionNames names_;
  JinjaRender out_;
};

}  // namespace

JinjaRender render_jinja(std::string_view source, const json& variables) {
  // jinja2's lexer: newlines normalised to \n, one trailing newline dropped.
  std::string text;
  text.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i)
    if (!(source[i] == '\r' && i + 1 < source.size() && source[i + 1] == '\n')) text += source[i];
  if (!text.empty() && text.back() == '\n') text.pop_back();
  const std::vector<Node> nodes = Parser(cut_tags(text)).parse_all();
  Renderer renderer(variables);
  renderer.run(nodes);
  return renderer.result();
}

}  // namespace patchbay::eval
