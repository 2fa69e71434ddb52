// The Jinja subset of lm-eval task files over a document.
#include "eval/template.hpp"

#include <doctest/doctest.h>

#include "common/error.hpp"

using nlohmann::json;
namespace ev = patchbay::eval;

namespace {
const json doc =
    json::parse(R"({"question": "  Who?  ", "choices": {"text": ["a", "b"], "label": ["A", "B"]},
                                 "answerKey": "B", "label": 1, "text": "the end of days", "n": 2.5, "flag": true})");
}

TEST_CASE("fields, members, filters, methods, slices and concatenation render as Jinja does") {
  CHECK(ev::render_template("Q: {{question|trim}}\nA:", doc) == "Q: Who?\nA:");
  CHECK(ev::render_template("{{ question.strip() }}", doc) == "Who?");
  CHECK(ev::render_template("{{choices.text}}", doc) == "['a', 'b']");
  CHECK(ev::render_template("{{choices['label'][1]}}", doc) == "B");
  CHECK(ev::render_template("{{['A', 'B', 'C'].index(answerKey)}}", doc) == "1");
  CHECK(ev::render_template("{{text.split(' ')[:-1]|join(' ')}}", doc) ==
        "the end of");  // lambada_openai
  CHECK(ev::render_template("{{' '+text.split(' ')[-1]}}", doc) == " days");
  CHECK(ev::render_template("{{label}}|{{n}}|{{flag}}|{{question|trim|upper}}", doc) ==
        "1|2.5|True|WHO?");
  CHECK(ev::render_template("{{text.split()|length}} {{'x' ~ label}}", doc) == "4 x1");
  CHECK(ev::evaluate_template("{{choices.text}}", doc) == json::array({"a", "b"}));
  CHECK(ev::evaluate_template("{{label}}", doc) == 1);
  CHECK(ev::parse_python_literal("['x y', \"b\", 3]") == json::array({"x y", "b", 3}));
}

TEST_CASE("unknown fields and unsupported constructs are refused by name") {
  CHECK_THROWS_WITH_AS(ev::render_template("{{answer}}", doc),
                       doctest::Contains("'answer' is not a field"), patchbay::Error);
  CHECK_THROWS_WITH_AS(ev::render_template("{% if flag %}x{% endif %}", doc),
                       doctest::Contains("{% ... %} blocks"), patchbay::Error);
  CHECK_THROWS_WITH_AS(ev::render_template("{{question|wordcount}}", doc),
                       doctest::Contains("unsupported filter |wordcount"), patchbay::Error);
  CHECK_THROWS_WITH_AS(ev::render_template("{{label @ 1}}", doc),
                       doctest::Contains("unsupported character '@'"), patchbay::Error);
  // Comparisons and conditionals come from the evaluator chat templates share.
  CHECK(ev::render_template("{{'yes' if label == 1 else 'no'}}", doc) == "yes");
  CHECK_THROWS_AS(ev::render_template("{{question", doc), patchbay::Error);
}
