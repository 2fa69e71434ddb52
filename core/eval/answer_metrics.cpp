// Choice selection, the regex filter and exact_match (answer_metrics.hpp).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "eval/answer_metrics.hpp"

#include <pcre2.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <memory>

#include "common/error.hpp"
#include "eval/token_requests.hpp"

namespace patchbay::eval {
namespace {

int64_t argmax(const std::vector<double>& v) {
  int64_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[static_cast<size_t>(best)]) best = static_cast<int64_t>(i);
  return best;
}

struct Pcre2Code {
  pcre2_code* code;
  ~Pcre2Code() { pcre2_code_free(code); }
};

std::unique_ptr<Pcre2Code> compile(const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw Error(ErrorKind::kInvalidArgument, "regex '" + pattern + "' at offset " +
                                                 std::to_string(offset) + ": " +
                                                 reinterpret_cast<const char*>(message));
  }
  return std::unique_ptr<Pcre2Code>(new Pcre2Code{code});
}

// Python re.findall: per match, the whole match (no groups), group 1 (one group) or every group.
std::vector<std::vector<std::string>> findall(const std::string& pattern, const std::string& text) {
  const auto code = compile(pattern);
  uint32_t groups = 0;
  pcre2_pattern_info(code->code, PCRE2_INFO_CAPTURECOUNT, &groups);
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(code->code, nullptr);
  std::vector<std::vector<std::string>> out;
  size_t offset = 0;
  while (offset <= text.size()) {
    const int rc = pcre2_match(code->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                               offset, 0, match, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
    std::vector<std::string> found;
    auto group = [&](uint32_t g) {
      if (g >= static_cast<uint32_t>(rc) || ov[2 * g] == PCRE2_UNSET) return std::string();
      return text.substr(ov[2 * g], ov[2 * g + 1] - ov[2 * g]);
    };
    if (groups == 0) found.push_back(group(0));
    for (uint32_t g = 1; g <= groups; ++g) found.push_back(group(g));
    out.push_back(found);
    offset = ov[1] > ov[0] ? ov[1] : ov[1] + 1;
  }
  pcre2_match_data_free(match);
  return out;
}

std::string strip_spaces(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a])) != 0) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1])) != 0) --b;
  return s.substr(a, b - a);
}

std::string remove_matches(const std::string& pattern, const std::string& text) {
  const auto code = compile(pattern);
  std::string out(text.size() * 2 + 16, '\0');
  PCRE2_SIZE length = out.size();
  const int rc =
      pcre2_substitute(code->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
                       PCRE2_SUBSTITUTE_GLOBAL, nullptr, nullptr, reinterpret_cast<PCRE2_SPTR>(""),
                       0, reinterpret_cast<PCRE2_UCHAR*>(out.data()), &length);
  if (rc < 0)
    throw Error(ErrorKind::kInvalidArgument,
                "regexes_to_ignore '" + pattern + "' could not be applied");
  out.resize(length);
  return out;
}

}  // namespace

ChoiceScores choose(const std::vector<double>& ll, const std::vector<std::string>& choices) {
  std::vector<double> norm(ll.size()), bytes(ll.size());
  for (size_t i = 0; i < ll.size(); ++i) {
    norm[i] =
        ll[i] / static_cast<double>(count_code_points(choices[i]));  // len 0: ±inf/NaN as numpy
    bytes[i] = ll[i] / static_cast<double>(choices[i].size());
  }
  return {argmax(ll), argmax(norm), argmax(bytes)};
}

std::string apply_regex_filter(const RegexFilterSpec& filter, const std::string& response) {
  const std::vector<std::vector<std::string>> matches = findall(filter.pattern, response);
  if (matches.empty()) return filter.fallback;
  int64_t index = filter.group_select < 0
                      ? filter.group_select + static_cast<int64_t>(matches.size())
                      : filter.group_select;
  if (index < 0 || index >= static_cast<int64_t>(matches.size()))
    return filter.fallback;  // lm-eval would raise IndexError
  const std::vector<std::string>& m = matches[static_cast<size_t>(index)];
  for (const std::string& g : m)
    if (!g.empty() || m.size() == 1) return strip_spaces(g);
  return filter.fallback;
}

bool exact_match(const MetricSpec& options, std::string prediction, std::string reference) {
  for (const std::string& r : options.regexes_to_ignore) {
    prediction = remove_matches(r, prediction);
    reference = remove_matches(r, reference);
  }
  auto normalise = [&](std::string& s) {
    if (options.ignore_case)
      for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (options.ignore_punctuation)
      std::erase_if(s, [](char c) { return std::ispunct(static_cast<unsigned char>(c)) != 0; });
  };
  normalise(prediction);
  normalise(reference);
  return prediction == reference;
}

Aggregate mean_with_stderr(const std::vector<double>& values) {
  Aggregate a;
  const double n = static_cast<double>(values.size());
  if (values.empty())
    return {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
  for (double v : values) a.value += v;
  a.value /= n;
  if (values.size() < 2) {
    a.stderr_value = std::numeric_limits<double>::quiet_NaN();
    return a;
  }
  double ss = 0;
  for (double v : values) ss += (v - a.value) * (v - a.value);
  a.stderr_value = std::sqrt(ss / (n - 1)) / std::sqrt(n);
  return a;
}

}  // namespace patchbay::eval
