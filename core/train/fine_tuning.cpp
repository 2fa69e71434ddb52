// init_from weights, name patterns and freezing; see fine_tuning.hpp.
#include "train/fine_tuning.hpp"

#include <spdlog/spdlog.h>

#include <cctype>
#include <charconv>
#include <limits>
#include <set>
#include <string_view>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "train/checkpoint.hpp"

namespace patchbay::train {

namespace fs = std::filesystem;

InitialWeights read_checkpoint_weights(const fs::path& path) {
  const Checkpoint checkpoint = load_checkpoint(path);
  if (checkpoint.metadata().count(kMetaLora) != 0)
    throw Error(ErrorKind::kInvalidArgument,
                "train.init_from: " + checkpoint.path().string() +
                    " holds LoRA adapters only; merge them into a plain run first (`patchbay "
                    "export " +
                    path.string() + " --merge-lora OUT/`) and start from OUT/");
  InitialWeights weights;
  weights.origin = "checkpoint " + checkpoint.path().string();
  for (const std::string& name : checkpoint.names())
    if (name.rfind(kOptimizerPrefix, 0) != 0) weights.tensors[name] = checkpoint.tensor(name);
  return weights;
}

namespace {

// At most `limit` names, then how many more.
std::string name_list(const std::vector<std::string>& names, size_t limit = 12) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < limit; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > limit) text += ", ... (" + std::to_string(names.size()) + " in all)";
  return text;
}

}  // namespace

void load_initial_weights(const std::vector<model::NamedParameter>& parameters,
                          const InitialWeights& weights) {
  std::vector<std::string> missing, mismatched, extra;
  std::set<std::string> used;
  for (const model::NamedParameter& p : parameters) {
    const auto found = weights.tensors.find(p.name);
    if (found == weights.tensors.end()) {
      missing.push_back(p.name);
      continue;
    }
    used.insert(p.name);
    if (found->second.shape() != p.tensor.shape())
      mismatched.push_back(p.name + " (" + engine::shape_str(found->second.shape()) +
                           " there, the config's model has " + engine::shape_str(p.tensor.shape()) +
                           ")");
  }
  for (const auto& [name, tensor] : weights.tensors)
    if (used.count(name) == 0) extra.push_back(name);
  if (!missing.empty() || !mismatched.empty() || !extra.empty()) {
    std::string message = "train.init_from: the weights of " + weights.origin +
                          " do not fit the model the config describes:";
    if (!mismatched.empty()) message += "\n  shapes differ: " + name_list(mismatched);
    if (!missing.empty()) message += "\n  missing there: " + name_list(missing);
    if (!extra.empty()) message += "\n  not in the model: " + name_list(extra);
    message +=
        "\nStart from the same [model] (and [model.attention] / [model.feedforward]) settings as "
        "the source: include its config.toml (include = [\"RUN/config.toml\"]) and change only "
        "[train] / [data].";
    throw Error(ErrorKind::kInvalidArgument, message);
  }
  engine::NoGradGuard no_grad;
  for (const model::NamedParameter& p : parameters) {
    engine::Tensor destination = p.tensor;
    const engine::Tensor& source = weights.tensors.at(p.name);
    engine::copy_(destination, source.to(p.tensor.dtype()).to(p.tensor.device()));
  }
  spdlog::info("train.init_from: {} parameters from {} (weights only)", parameters.size(),
               weights.origin);
}

namespace {

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// The decimal number in `digits` (digits only), saturated at LLONG_MAX: a range bound of any
// length in a pattern is a valid bound, never an out-of-range error.
long long saturated_number(std::string_view digits) {
  long long value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  (void)end;
  return error == std::errc::result_out_of_range ? std::numeric_limits<long long>::max() : value;
}

// "A-B" at pattern[p]: both numbers and where the range ends; false when there is none.
bool read_range(const std::string& pattern, size_t p, long long* low, long long* high,
                size_t* end) {
  size_t i = p;
  while (i < pattern.size() && is_digit(pattern[i])) ++i;
  if (i == p || i >= pattern.size() || pattern[i] != '-') return false;
  size_t j = i + 1;
  while (j < pattern.size() && is_digit(pattern[j])) ++j;
  if (j == i + 1) return false;
  *low = saturated_number(std::string_view(pattern).substr(p, i - p));
  *high = saturated_number(std::string_view(pattern).substr(i + 1, j - i - 1));
  *end = j;
  return true;
}

// Whole-string match of pattern[p..] against name[n..].
bool glob_match(const std::string& pattern, size_t p, const std::string& name, size_t n) {
  if (p == pattern.size()) return n == name.size();
  const char c = pattern[p];
  if (c == '*') {
    for (size_t k = n; k <= name.size(); ++k)
      if (glob_match(pattern, p + 1, name, k)) return true;
    return false;
  }
  long long low = 0, high = 0;
  size_t range_end = 0;
  if (is_digit(c) && (p == 0 || !is_digit(pattern[p - 1])) &&
      read_range(pattern, p, &low, &high, &range_end)) {
    size_t k = n;
    while (k < name.size() && is_digit(name[k])) ++k;
    if (k == n || k - n > 18) return false;
    const long long value = saturated_number(std::string_view(name).substr(n, k - n));
    return value >= low && value <= high && glob_match(pattern, range_end, name, k);
  }
  if (n == name.size()) return false;
  if (c == '?' || c == name[n]) return glob_match(pattern, p + 1, name, n + 1);
  return false;
}

// The pattern with the aliases of the header resolved (one pattern may become two).
std::vector<std::string> expand_aliases(const std::string& pattern) {
  if (pattern == "embedding" || pattern == "embeddings") return {"wte", "wpe"};
  if (pattern.rfind("layers.", 0) == 0) return {"blocks." + pattern.substr(7)};
  return {pattern};
}

}  // namespace

bool name_matches(const std::string& pattern, const std::string& name) {
  for (const std::string& p : expand_aliases(pattern)) {
    if (glob_match(p, 0, name, 0)) return true;
    for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
      if (glob_match(p, 0, name.substr(0, dot), 0)) return true;
  }
  return false;
}

std::vector<std::string> names_matching(const std::vector<std::string>& patterns,
                                        const std::vector<model::NamedParameter>& parameters,
                                        const std::string& key) {
  std::set<std::string> selected;
  for (const std::string& pattern : patterns) {
    bool any = false;
    for (const model::NamedParameter& p : parameters)
      if (name_matches(pattern, p.name)) {
        selected.insert(p.name);
        any = true;
      }
    if (!any) {
      std::vector<std::string> names;
      for (const model::NamedParameter& p : parameters)
        if (p.name.rfind("blocks.", 0) != 0 || p.name.rfind("blocks.0.", 0) == 0)
          names.push_back(p.name);
      throw Error(
          ErrorKind::kInvalidArgument,
          key + ": the pattern '" + pattern + "' matches no parameter. The model's names are " +
              name_list(names, 40) +
              " (blocks.1, blocks.2, ... as blocks.0); '*' matches any characters, \"0-3\" a "
              "number in that range, and a pattern may stop at a dot (\"blocks.0\")");
    }
  }
  std::vector<std::string> ordered;
  for (const model::NamedParameter& p : parameters)
    if (selected.count(p.name) != 0) ordered.push_back(p.name);
  return ordered;
}

std::vector<std::string> freeze_parameters(const std::vector<std::string>& patterns,
                                           const std::vector<model::NamedParameter>& parameters) {
  const std::vector<std::string> names = names_matching(patterns, parameters, "train.freeze");
  const std::set<std::string> frozen(names.begin(), names.end());
  for (const model::NamedParameter& p : parameters) {
    if (frozen.count(p.name) == 0) continue;
    engine::Tensor tensor = p.tensor;
    tensor.zero_grad();
    tensor.set_requires_grad(false);
  }
  if (!names.empty())
    spdlog::info("train.freeze: {} of {} parameters frozen ({})", names.size(), parameters.size(),
                 name_list(names, 6));
  return names;
}

}  // namespace patchbay::train
