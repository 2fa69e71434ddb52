// Chat templates: the Jinja statement subset against outputs of Python's jinja2 (rendered with
// transformers' settings: trim_blocks, lstrip_blocks, loopcontrols; the expected strings below
// were printed by jinja2 3.1.6 from the same fixture files), SmolLM2's own template (copied
// from its GGUF file), the built-ins, assistant spans and stop strings, and refusals.
#include "eval/chat_template.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "eval/jinja_template.hpp"
#include "patchbay/testing/temp_dir.hpp"

using nlohmann::json;
namespace ev = patchbay::eval;

namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(EVAL_FIXTURES_DIR) + "/" + name, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

json messages(std::initializer_list<std::pair<const char*, const char*>> list) {
  json out = json::array();
  for (const auto& [role, content] : list) out.push_back({{"role", role}, {"content", content}});
  return out;
}

std::vector<ev::ChatMessage> chat(std::initializer_list<std::pair<const char*, const char*>> list) {
  std::vector<ev::ChatMessage> out;
  for (const auto& [role, content] : list) out.push_back({role, content});
  return out;
}

}  // namespace

TEST_CASE("statements, whitespace control, namespaces, loops and filters render as jinja2 does") {
  const std::string source = fixture("jinja_features.jinja");
  const json four = messages(
      {{"system", "  Be brief. "}, {"user", "Hi"}, {"assistant", "Hello  there"}, {"user", "Bye"}});
  json variables = {{"messages", four},
                    {"add_generation_prompt", true},
                    {"bos_token", "<s>"},
                    {"eos_token", "</s>"}};
  CHECK(ev::render_jinja(source, variables).text ==
        "<s>\n[SYS BE BRIEF.]\n<u1/3>Hi\n<a>Hello there</s><u3/3>Bye (last)\nturns=3 "
        "first=user\n<a>long 3 2 xxx "
        "True False |[1, 2] y");
  variables["messages"] = messages({{"user", "Hi"}});
  variables["add_generation_prompt"] = false;
  CHECK(ev::render_jinja(source, variables).text ==
        "<s>\n<u1/1>Hi (last)\nturns=1 first=user\nshort 3 2 xxx True False |[1, 2] y");
  variables["messages"] = messages({{"robot", "x"}});
  CHECK_THROWS_WITH_AS(ev::render_jinja(source, variables),
                       doctest::Contains("Unknown role: robot"), patchbay::Error);
}

TEST_CASE("smaller cases: break, for-else, tuple unpacking, short-circuit, generation marks") {
  const json none = json::object();
  CHECK(ev::render_jinja("{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 "
                         "%}{% continue %}"
                         "{% endif %}{{ i }}{% endfor %}",
                         none)
            .text == "02");
  CHECK(ev::render_jinja("{% for x in [] %}x{% else %}empty{% endfor %}", none).text == "empty");
  CHECK(ev::render_jinja("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
                         json{{"d", {{"a", 1}, {"b", 2}}}})
            .text == "a=1;b=2;");
  CHECK(ev::render_jinja("{% set a, b = [1, 'z'] %}{{ a }}{{ b }}", none).text == "1z");
  // The right operand of `and` is not evaluated when the left is false (it would fail).
  CHECK(ev::render_jinja("{{ x is defined and x.y }}|{{ not x }}", none).text == "False|True");
  const ev::JinjaRender marked = ev::render_jinja("a{% generation %}bc{% endgeneration %}d", none);
  CHECK(marked.text == "abcd");
  REQUIRE(marked.marked.size() == 1);
  CHECK(marked.marked[0] == std::pair<size_t, size_t>{1, 3});
  // A set inside a loop does not leak out of it (jinja2 scoping); a namespace carries state.
  CHECK(ev::render_jinja(
            "{% set n = 0 %}{% for i in [1, 2] %}{% set n = n + i %}{% endfor %}{{ n }}", none)
            .text == "0");
}

TEST_CASE("SmolLM2's own template (from its GGUF file) renders the conversation jinja2 renders") {
  const ev::ChatTemplate smol{"smollm2", fixture("smollm2_chat_template.jinja"), "<|im_start|>",
                              "<|im_end|>"};
  const auto conversation =
      chat({{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "2+2?"}, {"assistant", "4"}});
  const std::string system =
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
      "Face<|im_end|>\n";
  CHECK(ev::render_chat(smol, conversation, false) ==
        system +
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>"
            "user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n4<|im_end|>\n");
  const std::vector<ev::ChatMessage> three(conversation.begin(), conversation.begin() + 3);
  CHECK(ev::render_chat(smol, three, true) ==
        system +
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>"
            "user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");

  // Assistant spans: every assistant turn's content and its end-of-turn marker, nothing else.
  const std::vector<ev::ChatSegment> segments = ev::assistant_segments(smol, conversation);
  REQUIRE(segments.size() == 4);
  CHECK(segments[0].text == system + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  CHECK_FALSE(segments[0].assistant);
  CHECK(segments[1].text == "Hello!<|im_end|>\n");
  CHECK(segments[1].assistant);
  CHECK(segments[2].text == "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
  CHECK(segments[3].text == "4<|im_end|>\n");
  CHECK(segments[3].assistant);
  CHECK(ev::chat_stop_strings(smol) == std::vector<std::string>{"<|im_end|>"});
}

TEST_CASE("built-in ChatML and LLaMA-3 templates, and templates that re-render earlier turns") {
  const auto conversation = chat({{"system", "S"}, {"user", "U"}, {"assistant", " A "}});
  CHECK(ev::render_chat(ev::builtin_chat_template("chatml"), conversation, false) ==
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n A "
        "<|im_end|>\n");
  const ev::ChatTemplate llama3 = ev::builtin_chat_template("llama3");
  CHECK(ev::render_chat(llama3, conversation, false) ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_"
        "id|>user"
        "<|end_header_id|>\n\nU<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nA<|eot_"
        "id|>");
  CHECK(ev::chat_stop_strings(llama3) == std::vector<std::string>{"<|eot_id|>"});
  CHECK(ev::assistant_segments(llama3, conversation).back().text == "A<|eot_id|>");
  CHECK_THROWS_WITH_AS(ev::builtin_chat_template("alpaca"),
                       doctest::Contains("built-ins: chatml, llama3"), patchbay::Error);

  // A template that renders earlier assistant turns differently (as ones that drop earlier
  // reasoning do) cannot give spans.
  const ev::ChatTemplate last_only{
      "last-only",
      "{% for m in messages %}{{ m.role }}:{% if m.role == 'assistant' and not loop.last %}"
      "(earlier){% else %}{{ m.content }}{% endif %}\n{% endfor %}"
      "{% if add_generation_prompt %}assistant:{% endif %}",
      "", ""};
  CHECK_THROWS_WITH_AS(
      ev::assistant_segments(
          last_only, chat({{"user", "a"}, {"assistant", "b"}, {"user", "c"}, {"assistant", "d"}})),
      doctest::Contains("renders the earlier turns differently"), patchbay::Error);
}

TEST_CASE("templates that cannot render say the line and the reason") {
  const json none = json::object();
  CHECK_THROWS_WITH_AS(ev::render_jinja("ok\n{% macro f() %}{% endmacro %}", none),
                       doctest::Contains("chat template line 2: {% macro %} is not supported"),
                       patchbay::Error);
  CHECK_THROWS_WITH_AS(ev::render_jinja("a\n\n{% if x %}never closed", none),
                       doctest::Contains("ends before {% endif %}"), patchbay::Error);
  CHECK_THROWS_WITH_AS(ev::render_jinja("{{ messages[0].content }}", none),
                       doctest::Contains("line 1"), patchbay::Error);
  CHECK_THROWS_WITH_AS(ev::render_jinja("x\n{{ 1 + }}", none),
                       doctest::Contains("chat template line 2"), patchbay::Error);
  // A template from a model file cannot ask for unbounded memory (jinja2's sandbox limit).
  CHECK_THROWS_WITH_AS(ev::render_jinja("{% for i in range(1000000000000) %}{% endfor %}", none),
                       doctest::Contains("at most 100000"), patchbay::Error);
  CHECK_THROWS_WITH_AS(
      ev::render_jinja("{{ range(-9223372036854775807, 9223372036854775807, 2) | length }}", none),
      doctest::Contains("at most 100000"), patchbay::Error);
  CHECK(ev::render_jinja("{{ range(5, -5, -3) | join(',') }}", none).text == "5,2,-1,-4");
  CHECK(ev::render_jinja("{{ range(3) | join(',') }}|{{ range(2, 2) | length }}", none).text ==
        "0,1,2|0");
}

TEST_CASE(
    "a model's own template: chat_template.jinja beside imported_model.json, "
    "tokenizer_config.json") {
  patchbay::testing::TempDir dir("chat_template_files");
  const std::filesystem::path imported = dir.path() / "imported", hf = dir.path() / "hf";
  std::filesystem::create_directories(imported);
  std::filesystem::create_directories(hf);
  std::ofstream(imported / "chat_template.jinja")
      << "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}\n";
  std::ofstream(imported / "imported_model.json")
      << R"({"bos_token": {"id": 1, "text": "<|im_start|>"}, "eos_token": {"id": 2, "text": "<|im_end|>"}})";
  const ev::ChatTemplate own = ev::find_chat_template(imported.string());
  CHECK(own.bos_token == "<|im_start|>");
  CHECK(own.eos_token == "<|im_end|>");
  CHECK(ev::render_chat(own, chat({{"user", "a"}}), false) ==
        "<|im_start|>a");  // trailing newline dropped
  CHECK(ev::directory_has_chat_template(imported));

  std::ofstream(hf / "tokenizer_config.json")
      << R"({"bos_token": {"content": "<s>"}, "eos_token": "</s>", "chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": "{{ eos_token }}"}]})";
  const ev::ChatTemplate from_hf = ev::find_chat_template(hf.string());
  CHECK(from_hf.bos_token == "<s>");
  CHECK(ev::render_chat(from_hf, chat({{"user", "a"}}), false) == "</s>");
  CHECK_FALSE(ev::directory_has_chat_template(dir.path()));
  CHECK_THROWS_WITH_AS(ev::find_chat_template(dir.path().string()),
                       doctest::Contains("holds no chat template"), patchbay::Error);
}
