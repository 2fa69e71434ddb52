// Task YAML through yaml-cpp: each top-level key goes to one reader; a key without one is
// refused by name (a silent ignore would make a ported task score differently without notice).
#include "eval/task_spec.hpp"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "common/error.hpp"

namespace patchbay::eval {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void refuse(const std::string& origin, const std::string& field,
                         const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, origin + ": field '" + field + "': " + what);
}

std::string scalar(const YAML::Node& node, const std::string& origin, const std::string& field) {
  if (!node.IsScalar()) refuse(origin, field, "expected a string or number");
  if (node.Tag() == "!function")
    refuse(origin, field, "!function (Python code) is not supported; write a template");
  return node.as<std::string>();
}

int64_t integer(const YAML::Node& node, const std::string& origin, const std::string& field) {
  try {
    return node.as<int64_t>();
  } catch (const YAML::Exception&) {
    refuse(origin, field,
           "expected an integer, found '" +
               (node.IsScalar() ? node.as<std::string>() : "a non-scalar") + "'");
  }
}

bool boolean(const YAML::Node& node, const std::string& origin, const std::string& field) {
  try {
    return node.as<bool>();
  } catch (const YAML::Exception&) {
    refuse(origin, field, "expected true or false");
  }
}

// A YAML scalar that reads as an integer (and was not quoted) becomes int64.
FieldSpec field_spec(const YAML::Node& node, const std::string& origin, const std::string& field) {
  if (node.Tag() == "!function")
    refuse(origin, field, "!function (Python code) is not supported; write a template");
  if (node.IsSequence()) {
    std::vector<std::string> items;
    for (const YAML::Node& item : node) items.push_back(scalar(item, origin, field));
    return items;
  }
  if (node.IsMap()) refuse(origin, field, "a mapping is not supported (give a list or a template)");
  if (node.IsNull()) return std::monostate{};
  if (node.Tag() != "!") {  // plain scalar: an integer stays one
    int64_t value = 0;
    if (YAML::convert<int64_t>::decode(node, value)) return value;
  }
  return node.as<std::string>();
}

void check_keys(const YAML::Node& map, const std::set<std::string>& allowed,
                const std::string& origin, const std::string& where) {
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    if (allowed.count(key) == 0) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
      refuse(origin, where + key, "not supported here (supported: " + list + ")");
    }
  }
}

void read_data_files(const YAML::Node& kwargs, TaskSpec& spec, const std::string& origin,
                     const fs::path& base) {
  if (!kwargs.IsMap()) refuse(origin, "dataset_kwargs", "expected a mapping with data_files");
  check_keys(kwargs, {"data_files"}, origin, "dataset_kwargs.");
  const YAML::Node files = kwargs["data_files"];
  if (!files)
    refuse(origin, "dataset_kwargs.data_files", "missing: name the JSON Lines file of each split");
  auto resolve = [&](const std::string& p) {
    return fs::path(p).is_absolute() ? fs::path(p) : base / p;
  };
  if (files.IsScalar()) {
    spec.data_files["train"] =
        resolve(files.as<std::string>());  // HF datasets: one file is split "train"
  } else if (files.IsMap()) {
    for (const auto& kv : files) {
      if (!kv.second.IsScalar())
        refuse(origin, "dataset_kwargs.data_files." + kv.first.as<std::string>(),
               "expected one file name");
      spec.data_files[kv.first.as<std::string>()] = resolve(kv.second.as<std::string>());
    }
  } else {
    refuse(origin, "dataset_kwargs.data_files", "expected a file name or a mapping split -> file");
  }
}

void read_metrics(const YAML::Node& list, TaskSpec& spec, const std::string& origin) {
  static const std::set<std::string> known = {
      "acc",        "acc_norm",        "acc_bytes",       "exact_match",
      "perplexity", "word_perplexity", "byte_perplexity", "bits_per_byte"};
  if (!list.IsSequence()) refuse(origin, "metric_list", "expected a list of {metric: ...}");
  for (const YAML::Node& m : list) {
    if (!m.IsMap()) refuse(origin, "metric_list", "each entry is a mapping with 'metric'");
    check_keys(m,
               {"metric", "aggregation", "higher_is_better", "ignore_case", "ignore_punctuation",
                "regexes_to_ignore"},
               origin, "metric_list[].");
    MetricSpec metric;
    metric.metric = scalar(m["metric"], origin, "metric_list[].metric");
    if (known.count(metric.metric) == 0)
      refuse(origin, "metric_list[].metric",
             "'" + metric.metric +
                 "' is not supported (supported: acc, acc_norm, "
                 "acc_bytes, exact_match, perplexity, word_perplexity, byte_perplexity, "
                 "bits_per_byte)");
    if (m["aggregation"]) {
      const std::string agg = scalar(m["aggregation"], origin, "metric_list[].aggregation");
      const bool ok = agg == "mean" || (agg == "perplexity" && metric.metric == "perplexity") ||
                      (agg == "weighted_perplexity" && (metric.metric == "word_perplexity" ||
                                                        metric.metric == "byte_perplexity")) ||
                      (agg == "bits_per_byte" && metric.metric == "bits_per_byte");
      if (!ok)
        refuse(origin, "metric_list[].aggregation",
               "'" + agg + "' for " + metric.metric + " is not supported");
    }
    if (m["ignore_case"])
      metric.ignore_case = boolean(m["ignore_case"], origin, "metric_list[].ignore_case");
    if (m["ignore_punctuation"])
      metric.ignore_punctuation =
          boolean(m["ignore_punctuation"], origin, "metric_list[].ignore_punctuation");
    if (const YAML::Node r = m["regexes_to_ignore"]) {
      if (!r.IsSequence())
        refuse(origin, "metric_list[].regexes_to_ignore", "expected a list of patterns");
      for (const YAML::Node& p : r)
        metric.regexes_to_ignore.push_back(scalar(p, origin, "metric_list[].regexes_to_ignore"));
    }
    spec.metrics.push_back(metric);
  }
}

void read_generation_kwargs(const YAML::Node& g, TaskSpec& spec, const std::string& origin) {
  if (!g.IsMap()) refuse(origin, "generation_kwargs", "expected a mapping");
  check_keys(g, {"until", "max_gen_toks", "do_sample", "temperature"}, origin,
             "generation_kwargs.");
  if (const YAML::Node u = g["until"]) {
    if (u.IsScalar())
      spec.until.push_back(u.as<std::string>());
    else if (u.IsSequence())
      for (const YAML::Node& s : u)
        spec.until.push_back(scalar(s, origin, "generation_kwargs.until"));
    else
      refuse(origin, "generation_kwargs.until", "expected a string or a list of strings");
  }
  if (g["max_gen_toks"])
    spec.max_gen_toks = integer(g["max_gen_toks"], origin, "generation_kwargs.max_gen_toks");
  if (spec.max_gen_toks < 1) refuse(origin, "generation_kwargs.max_gen_toks", "must be at least 1");
  if (g["do_sample"] && boolean(g["do_sample"], origin, "generation_kwargs.do_sample"))
    refuse(origin, "generation_kwargs.do_sample",
           "sampling is not supported: evaluation decodes greedily");
  if (g["temperature"] && g["temperature"].as<double>() != 0.0)
    refuse(origin, "generation_kwargs.temperature", "only 0 (greedy) is supported");
}

void read_filters(const YAML::Node& list, TaskSpec& spec, const std::string& origin) {
  if (!list.IsSequence()) refuse(origin, "filter_list", "expected a list of {name, filter: [...]}");
  for (const YAML::Node& f : list) {
    check_keys(f, {"name", "filter"}, origin, "filter_list[].");
    FilterSpec filter;
    filter.name = f["name"] ? scalar(f["name"], origin, "filter_list[].name") : "none";
    for (const YAML::Node& step : f["filter"]) {
      check_keys(step, {"function", "regex_pattern", "group_select", "fallback"}, origin,
                 "filter_list[].filter[].");
      const std::string fn = scalar(step["function"], origin, "filter_list[].filter[].function");
      if (fn == "take_first") continue;
      if (fn != "regex")
        refuse(origin, "filter_list[].filter[].function",
               "'" + fn + "' is not supported (regex, take_first)");
      RegexFilterSpec r;
      if (step["regex_pattern"])
        r.pattern = scalar(step["regex_pattern"], origin, "filter_list[].filter[].regex_pattern");
      else
        r.pattern = R"(#### (\-?[0-9\.\,]+))";  // lm-eval's default
      if (step["group_select"])
        r.group_select =
            integer(step["group_select"], origin, "filter_list[].filter[].group_select");
      if (step["fallback"])
        r.fallback = scalar(step["fallback"], origin, "filter_list[].filter[].fallback");
      filter.regexes.push_back(r);
    }
    spec.filters.push_back(filter);
  }
}

OutputType output_type_from(const std::string& s, const std::string& origin) {
  if (s == "multiple_choice") return OutputType::kMultipleChoice;
  if (s == "loglikelihood") return OutputType::kLoglikelihood;
  if (s == "loglikelihood_rolling") return OutputType::kLoglikelihoodRolling;
  if (s == "generate_until") return OutputType::kGenerateUntil;
  refuse(
      origin, "output_type",
      "'" + s +
          "' (expected multiple_choice, loglikelihood, loglikelihood_rolling or generate_until)");
}

std::optional<std::string> optional_split(const YAML::Node& n, const std::string& origin,
                                          const std::string& field) {
  if (!n || n.IsNull()) return std::nullopt;
  return scalar(n, origin, field);
}

}  // namespace

const char* output_type_name(OutputType type) {
  switch (type) {
    case OutputType::kMultipleChoice:
      return "multiple_choice";
    case OutputType::kLoglikelihood:
      return "loglikelihood";
    case OutputType::kLoglikelihoodRolling:
      return "loglikelihood_rolling";
    case OutputType::kGenerateUntil:
      return "generate_until";
  }
  return "?";
}

TaskSpec parse_task_yaml(const std::string& text, const std::string& origin,
                         const fs::path& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(ErrorKind::kInvalidArgument, origin + ": not valid YAML: " + e.what());
  }
  if (!root.IsMap())
    throw Error(ErrorKind::kInvalidArgument, origin + ": expected a mapping of task fields");
  TaskSpec spec;
  spec.file = origin;
  const std::map<std::string, std::function<void(const YAML::Node&)>> readers = {
      {"task", [&](const YAML::Node& n) { spec.name = scalar(n, origin, "task"); }},
      {"task_alias", [&](const YAML::Node&) {}},
      {"tag", [&](const YAML::Node&) {}},
      {"dataset_path",
       [&](const YAML::Node& n) {
         if (scalar(n, origin, "dataset_path") != "json")
           refuse(origin, "dataset_path",
                  "only 'json' (local JSON Lines through dataset_kwargs.data_files) is supported");
       }},
      {"dataset_name",
       [&](const YAML::Node& n) {
         if (!n.IsNull())
           refuse(origin, "dataset_name",
                  "dataset configurations are not supported with local JSON files");
       }},
      {"dataset_kwargs", [&](const YAML::Node& n) { read_data_files(n, spec, origin, base_dir); }},
      {"training_split",
       [&](const YAML::Node& n) {
         spec.training_split = optional_split(n, origin, "training_split");
       }},
      {"validation_split",
       [&](const YAML::Node& n) {
         spec.validation_split = optional_split(n, origin, "validation_split");
       }},
      {"test_split",
       [&](const YAML::Node& n) { spec.test_split = optional_split(n, origin, "test_split"); }},
      {"fewshot_split",
       [&](const YAML::Node& n) {
         spec.fewshot_split = optional_split(n, origin, "fewshot_split");
       }},
      {"output_type",
       [&](const YAML::Node& n) {
         spec.output_type = output_type_from(scalar(n, origin, "output_type"), origin);
       }},
      {"doc_to_text",
       [&](const YAML::Node& n) { spec.doc_to_text = field_spec(n, origin, "doc_to_text"); }},
      {"doc_to_target",
       [&](const YAML::Node& n) { spec.doc_to_target = field_spec(n, origin, "doc_to_target"); }},
      {"doc_to_choice",
       [&](const YAML::Node& n) { spec.doc_to_choice = field_spec(n, origin, "doc_to_choice"); }},
      {"description",
       [&](const YAML::Node& n) { spec.description = scalar(n, origin, "description"); }},
      {"target_delimiter",
       [&](const YAML::Node& n) { spec.target_delimiter = scalar(n, origin, "target_delimiter"); }},
      {"fewshot_delimiter",
       [&](const YAML::Node& n) {
         spec.fewshot_delimiter = scalar(n, origin, "fewshot_delimiter");
       }},
      {"num_fewshot",
       [&](const YAML::Node& n) { spec.num_fewshot = integer(n, origin, "num_fewshot"); }},
      {"fewshot_config",
       [&](const YAML::Node& n) {
         check_keys(n, {"sampler"}, origin, "fewshot_config.");
         const std::string s = scalar(n["sampler"], origin, "fewshot_config.sampler");
         if (s != "default" && s != "first_n")
           refuse(origin, "fewshot_config.sampler", "'" + s + "' (default or first_n)");
         spec.fewshot_first_n = s == "first_n";
       }},
      {"metric_list", [&](const YAML::Node& n) { read_metrics(n, spec, origin); }},
      {"generation_kwargs", [&](const YAML::Node& n) { read_generation_kwargs(n, spec, origin); }},
      {"filter_list", [&](const YAML::Node& n) { read_filters(n, spec, origin); }},
      {"repeats",
       [&](const YAML::Node& n) {
         if (integer(n, origin, "repeats") != 1)
           refuse(origin, "repeats", "only 1 is supported (greedy decoding)");
       }},
      {"should_decontaminate",
       [&](const YAML::Node& n) {
         if (boolean(n, origin, "should_decontaminate"))
           refuse(origin, "should_decontaminate", "decontamination is not supported");
       }},
      {"metadata",
       [&](const YAML::Node& n) {
         std::stringstream ss;
         ss << YAML::Dump(n);
         spec.metadata = ss.str();
       }},
  };
  std::string key = "(a key)";
  try {
    for (const auto& kv : root) {
      key = kv.first.as<std::string>();
      const auto reader = readers.find(key);
      if (reader == readers.end()) {
        std::string list;
        for (const auto& [k, unused] : readers) list += (list.empty() ? "" : ", ") + k;
        refuse(origin, key, "not a supported task field (supported: " + list + ")");
      }
      reader->second(kv.second);
    }
  } catch (const YAML::Exception& e) {
    // The readers index maps and lists; a scalar where lm-eval's schema has a mapping (or the
    // reverse) surfaces from yaml-cpp as BadSubscript / BadConversion / InvalidNode.
    throw Error(ErrorKind::kInvalidArgument,
                origin + ": field '" + key +
                    "' does not have the shape lm-eval task files give it (" + e.what() +
                    "); see docs/evaluation.md for the supported fields");
  }
  if (spec.name.empty()) refuse(origin, "task", "missing: every task needs a name");
  if (spec.data_files.empty())
    refuse(origin, "dataset_kwargs.data_files", "missing: name the JSON Lines file of each split");
  if (std::holds_alternative<std::monostate>(spec.doc_to_target) &&
      spec.output_type != OutputType::kLoglikelihoodRolling &&
      spec.output_type != OutputType::kGenerateUntil)
    refuse(origin, "doc_to_target", "missing: needed to score the task");
  if (spec.output_type == OutputType::kMultipleChoice &&
      std::holds_alternative<std::monostate>(spec.doc_to_choice))
    refuse(origin, "doc_to_choice", "missing: multiple_choice needs the list of choices");
  if (spec.num_fewshot < 0) refuse(origin, "num_fewshot", "must be 0 or more");
  if (!spec.test_split && !spec.validation_split)
    refuse(origin, "test_split",
           "missing: name the split to evaluate (test_split or validation_split)");
  for (const std::optional<std::string>* split :
       {&spec.training_split, &spec.validation_split, &spec.test_split, &spec.fewshot_split})
    if (*split && spec.data_files.count(**split) == 0)
      refuse(origin, "dataset_kwargs.data_files",
             "split '" + **split + "' is named but has no file");
  return spec;
}

TaskSpec load_task_file(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw Error(ErrorKind::kNotFound, "task file " + file.string() + " cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  return parse_task_yaml(text.str(), file.string(), file.parent_path());
}

std::vector<MetricSpec> effective_metrics(const TaskSpec& spec) {
  std::vector<MetricSpec> metrics = spec.metrics;
  auto has = [&](const std::string& name) {
    for (const MetricSpec& m : metrics)
      if (m.metric == name) return true;
    return false;
  };
  auto add = [&](const char* name) {
    if (has(name)) return;
    MetricSpec metric;
    metric.metric = name;
    metrics.push_back(metric);
  };
  switch (spec.output_type) {
    case OutputType::kMultipleChoice:
      add("acc");
      add("acc_norm");
      break;
    case OutputType::kLoglikelihood:
      if (metrics.empty()) {
        add("perplexity");
        add("acc");
      }
      break;
    case OutputType::kLoglikelihoodRolling:
      if (metrics.empty()) {
        add("word_perplexity");
        add("byte_perplexity");
        add("bits_per_byte");
      }
      break;
    case OutputType::kGenerateUntil:
      if (metrics.empty()) add("exact_match");
      break;
  }
  return metrics;
}

}  // namespace patchbay::eval
