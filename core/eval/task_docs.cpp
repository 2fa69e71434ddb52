// Documents -> prompts and requests (see task_docs.hpp for the lm-eval rules mirrored here).
#include "eval/task_docs.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>

#include "common/error.hpp"
#include "common/parse_number.hpp"
#include "eval/python_random.hpp"
#include "eval/template.hpp"

namespace patchbay::eval {
namespace {

using json = nlohmann::json;

struct DocView {
  const TaskSpec& spec;
  const std::set<std::string>&
      features;  // the evaluated split's field names (lm-eval: dataset features)

  [[noreturn]] void fail(int64_t doc_id, const std::string& field, const std::string& what) const {
    throw Error(ErrorKind::kInvalidArgument, "task " + spec.name + " (" + spec.file.string() +
                                                 "), doc " + std::to_string(doc_id) + ", " + field +
                                                 ": " + what);
  }

  static bool is_digits(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c)) != 0;
    });
  }

  json field_or_template(const FieldSpec& f, const json& doc) const {
    if (const auto* s = std::get_if<std::string>(&f)) {
      if (features.count(*s) != 0) {
        if (!doc.is_object() || !doc.contains(*s))
          throw Error(ErrorKind::kInvalidArgument,
                      "this document has no field '" + *s +
                          "', which other documents of the split have; give every line the field");
        return doc[*s];
      }
      return render_template(*s, doc);
    }
    if (const auto* i = std::get_if<int64_t>(&f)) return *i;
    if (const auto* list = std::get_if<std::vector<std::string>>(&f)) {
      json out = json::array();
      for (const std::string& t : *list) out.push_back(render_template(t, doc));
      return out;
    }
    return nullptr;
  }

  std::string text(const json& doc, int64_t doc_id) const {
    json v;
    try {
      v = field_or_template(spec.doc_to_text, doc);
    } catch (const Error& e) {
      fail(doc_id, "doc_to_text", e.what());
    }
    const bool choices = !std::holds_alternative<std::monostate>(spec.doc_to_choice);
    if (v.is_number_integer() || (v.is_string() && choices && is_digits(v.get<std::string>())))
      fail(doc_id, "doc_to_text",
           "gives an integer: multiple-input tasks (one context per choice) are not supported");
    if (v.is_null()) return "";
    return v.is_string() ? v.get<std::string>() : python_str(v);
  }

  // lm-eval doc_to_target: an int, a string, or a list (multiple targets).
  json target(const json& doc, int64_t doc_id) const {
    json v;
    try {
      v = field_or_template(spec.doc_to_target, doc);
      const bool from_template = std::holds_alternative<std::string>(spec.doc_to_target) &&
                                 features.count(std::get<std::string>(spec.doc_to_target)) == 0;
      if (from_template && v.is_string()) {
        const std::string s = v.get<std::string>();
        if (is_digits(s) && !std::holds_alternative<std::monostate>(spec.doc_to_choice)) {
          const std::optional<int64_t> index = parse_int64(s);
          if (!index)
            throw Error(ErrorKind::kInvalidArgument, "answer index '" + s + "' is out of range");
          return *index;
        }
        if (s.size() >= 2 && s.front() == '[' && s.back() == ']') {
          try {
            return parse_python_literal(s);
          } catch (const Error&) {
            return s;  // lm-eval: not a literal, keep the text
          }
        }
      }
    } catch (const Error& e) {
      fail(doc_id, "doc_to_target", e.what());
    }
    return v;
  }

  std::vector<std::string> choices(const json& doc, int64_t doc_id) const {
    json v;
    try {
      if (const auto* s = std::get_if<std::string>(&spec.doc_to_choice);
          s != nullptr && features.count(*s) == 0) {
        v = evaluate_template(*s, doc);
        if (v.is_string()) v = parse_python_literal(v.get<std::string>());
      } else {
        v = field_or_template(spec.doc_to_choice, doc);
      }
    } catch (const Error& e) {
      fail(doc_id, "doc_to_choice", e.what());
    }
    if (!v.is_array())
      fail(doc_id, "doc_to_choice", "expected a list of choices, found " + python_str(v));
    if (v.empty())
      fail(doc_id, "doc_to_choice", "the choice list is empty: nothing to choose from");
    std::vector<std::string> out;
    for (const json& c : v) out.push_back(c.is_string() ? c.get<std::string>() : python_str(c));
    return out;
  }

  // The answer text of a few-shot example (build_qa_turn): c[a] for an int, a[0] for a list.
  std::optional<std::string> answer_text(const json& doc, int64_t doc_id) const {
    const json a = target(doc, doc_id);
    if (a.is_null() || (a.is_string() && a.get<std::string>().empty())) return std::nullopt;
    if (a.is_number_integer() && !std::holds_alternative<std::monostate>(spec.doc_to_choice)) {
      const std::vector<std::string> c = choices(doc, doc_id);
      const int64_t i = a.get<int64_t>();
      if (i < 0 || i >= static_cast<int64_t>(c.size()))
        fail(doc_id, "doc_to_target",
             "answer index " + std::to_string(i) + " is out of range for " +
                 std::to_string(c.size()) + " choices");
      return c[static_cast<size_t>(i)];
    }
    if (a.is_array())
      return a.empty() ? std::nullopt : std::optional<std::string>(python_str(a[0]));
    return python_str(a);
  }
};

std::vector<int64_t> gold_indices(const json& target, const std::vector<std::string>& choices,
                                  const DocView& view, int64_t doc_id) {
  std::vector<int64_t> gold;
  auto one = [&](const json& t) {
    int64_t index = -1;
    if (t.is_number_integer())
      index = t.get<int64_t>();
    else if (t.is_string()) {
      const auto it = std::find(choices.begin(), choices.end(), t.get<std::string>());
      if (it == choices.end())
        view.fail(doc_id, "doc_to_target",
                  "'" + t.get<std::string>() + "' is not one of the choices");
      index = it - choices.begin();
    } else {
      view.fail(doc_id, "doc_to_target", "expected an index or a choice, found " + python_str(t));
    }
    if (index < 0 || index >= static_cast<int64_t>(choices.size()))
      view.fail(doc_id, "doc_to_target",
                "answer index " + std::to_string(index) + " is out of range for " +
                    std::to_string(choices.size()) +
                    " choices (lm-eval would score this doc wrong with a warning)");
    gold.push_back(index);
  };
  if (target.is_array())
    for (const json& t : target) one(t);
  else
    one(target);
  return gold;
}

std::vector<json> split_docs(const TaskSpec& spec, const std::string& split) {
  return read_json_lines(spec.data_files.at(split));
}

}  // namespace

std::vector<json> read_json_lines(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw Error(ErrorKind::kNotFound, "data file " + file.string() + " cannot be read");
  std::vector<json> docs;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      docs.push_back(json::parse(line));
    } catch (const json::exception& e) {
      throw Error(ErrorKind::kInvalidArgument,
                  file.string() + ":" + std::to_string(n) + ": not a JSON object: " + e.what());
    }
    if (!docs.back().is_object())
      throw Error(ErrorKind::kInvalidArgument,
                  file.string() + ":" + std::to_string(n) + ": expected a JSON object per line");
  }
  return docs;
}

TaskRequests build_task_requests(const TaskSpec& spec, std::optional<int64_t> num_fewshot,
                                 std::optional<int64_t> limit, uint64_t fewshot_seed) {
  TaskRequests out;
  out.spec = spec;
  out.num_fewshot = num_fewshot.value_or(spec.num_fewshot);
  out.fewshot_seed = fewshot_seed;
  out.eval_split = spec.test_split ? *spec.test_split : *spec.validation_split;
  const std::vector<json> docs = split_docs(spec, out.eval_split);
  if (docs.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "task " + spec.name + ": split " + out.eval_split + " has no docs");
  std::set<std::string> features;
  for (const auto& [k, unused] : docs.front().items()) features.insert(k);
  const DocView view{spec, features};

  std::vector<json> fewshot_pool;
  if (out.num_fewshot > 0 && spec.output_type != OutputType::kLoglikelihoodRolling) {
    const std::optional<std::string> source = spec.fewshot_split      ? spec.fewshot_split
                                              : spec.training_split   ? spec.training_split
                                              : spec.validation_split ? spec.validation_split
                                                                      : spec.test_split;
    fewshot_pool = split_docs(spec, *source);
  }
  const bool exclude_eval_doc = spec.fewshot_split == spec.test_split;
  PythonRandom rng(fewshot_seed);

  const int64_t count = std::min<int64_t>(limit.value_or(static_cast<int64_t>(docs.size())),
                                          static_cast<int64_t>(docs.size()));
  for (int64_t id = 0; id < count; ++id) {
    TaskItem item;
    item.doc_id = id;
    item.doc = docs[static_cast<size_t>(id)];
    if (spec.output_type == OutputType::kLoglikelihoodRolling) {
      const json t = view.target(item.doc, id);
      item.gold_text.push_back(t.is_string() ? t.get<std::string>() : python_str(t));
      item.continuations.push_back(item.gold_text.back());
      out.items.push_back(std::move(item));
      continue;
    }
    std::string prompt =
        spec.description.empty() ? "" : render_template(spec.description, item.doc);
    if (out.num_fewshot > 0) {
      std::vector<json> shots;
      if (spec.fewshot_first_n) {
        for (const json& d : fewshot_pool)
          if (!(exclude_eval_doc && d == item.doc) &&
              static_cast<int64_t>(shots.size()) < out.num_fewshot)
            shots.push_back(d);
      } else {
        const int64_t draw = out.num_fewshot + (exclude_eval_doc ? 1 : 0);
        if (draw > static_cast<int64_t>(fewshot_pool.size()))
          view.fail(id, "num_fewshot",
                    std::to_string(draw) + " few-shot docs needed but the pool has " +
                        std::to_string(fewshot_pool.size()));
        for (int64_t j : rng.sample_indices(static_cast<int64_t>(fewshot_pool.size()), draw)) {
          const json& d = fewshot_pool[static_cast<size_t>(j)];
          if (!(exclude_eval_doc && d == item.doc)) shots.push_back(d);
        }
        shots.resize(std::min<size_t>(shots.size(), static_cast<size_t>(out.num_fewshot)));
      }
      if (static_cast<int64_t>(shots.size()) != out.num_fewshot)
        view.fail(id, "num_fewshot",
                  "only " + std::to_string(shots.size()) + " few-shot docs available");
      for (const json& shot : shots) {
        const std::optional<std::string> answer = view.answer_text(shot, -1);
        prompt += view.text(shot, -1) +
                  (answer ? spec.target_delimiter + *answer + spec.fewshot_delimiter : "");
      }
    }
    prompt += view.text(item.doc, id);
    item.prompt = prompt;
    const json target = spec.output_type == OutputType::kGenerateUntil &&
                                std::holds_alternative<std::monostate>(spec.doc_to_target)
                            ? json(nullptr)
                            : view.target(item.doc, id);
    switch (spec.output_type) {
      case OutputType::kMultipleChoice:
        item.choices = view.choices(item.doc, id);
        item.gold = gold_indices(target, item.choices, view, id);
        for (const std::string& c : item.choices)
          item.continuations.push_back(spec.target_delimiter + c);
        break;
      case OutputType::kLoglikelihood:
        item.gold_text.push_back(python_str(target));
        item.continuations.push_back(item.gold_text.back());
        break;
      case OutputType::kGenerateUntil: {
        json gold = target;
        if (!std::holds_alternative<std::monostate>(spec.doc_to_choice) &&
            gold.is_number_integer()) {
          const std::vector<std::string> c = view.choices(item.doc, id);
          item.gold = gold_indices(gold, c, view, id);
          gold = c[static_cast<size_t>(item.gold[0])];
        }
        if (gold.is_array())
          for (const json& g : gold) item.gold_text.push_back(python_str(g));
        else if (!gold.is_null())
          item.gold_text.push_back(python_str(gold));
        break;
      }
      case OutputType::kLoglikelihoodRolling:
        break;
    }
    out.items.push_back(std::move(item));
  }
  return out;
}

}  // namespace patchbay::eval
