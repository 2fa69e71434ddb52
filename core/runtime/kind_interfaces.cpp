// The component interfaces this host implements, one row per kind, with the check of each
// kind's vtable: struct_size at least the interface 1.0 layout, required functions non-null,
// optional ones only where the interface header allows NULL. Append a row when a kind's
// header lands in the SDK (see sdk/ABI.md, "How to change the ABI").
#include <cstddef>
#include <initializer_list>

#include "patchbay/attention.h"
#include "patchbay/feedforward.h"
#include "patchbay/optimizer.h"
#include "patchbay/parallelism.h"
#include "patchbay/sampler.h"
#include "patchbay/tokenizer.h"
#include "runtime/plugin_validation.hpp"

namespace patchbay::runtime {
namespace {

struct Function {
  const void* address;
  const char* name;
};

template <class Fn>
Function fn(Fn f, const char* name) {
  return Function{reinterpret_cast<const void*>(f), name};
}

// Size check first: nothing past struct_size may be read.
bool too_small(size_t struct_size, size_t layout_10, const char* type,
               std::vector<std::string>& problems) {
  if (struct_size >= layout_10) return false;
  problems.push_back(std::string(type) + " struct_size " + std::to_string(struct_size) +
                     " is smaller than the interface 1.0 layout (" + std::to_string(layout_10) +
                     " bytes); rebuild against this host's SDK");
  return true;
}

void require(const char* kind, std::initializer_list<Function> functions,
             std::vector<std::string>& problems) {
  for (const Function& f : functions) {
    if (f.address == nullptr) {
      problems.push_back(std::string("required ") + kind + " callback '" + f.name +
                         "' is NULL; the interface header says it must be set");
    }
  }
}

#define LAYOUT_10(type, last_field) \
  (offsetof(type, last_field) + sizeof(((type*)nullptr)->last_field))

std::vector<std::string> check_tokenizer(const void* vtable) {
  const auto* vt = static_cast<const pb_tokenizer_vtable*>(vtable);
  std::vector<std::string> problems;
  if (too_small(vt->struct_size, LAYOUT_10(pb_tokenizer_vtable, load), "pb_tokenizer_vtable",
                problems)) {
    return problems;
  }
  require("tokenizer",
          {fn(vt->train, "train"), fn(vt->vocab_size, "vocab_size"), fn(vt->encode, "encode"),
           fn(vt->decode, "decode"), fn(vt->special_token_count, "special_token_count"),
           fn(vt->special_token, "special_token"), fn(vt->save, "save"), fn(vt->load, "load")},
          problems);
  return problems;
}

std::vector<std::string> check_attention(const void* vtable) {
  const auto* vt = static_cast<const pb_attention_vtable*>(vtable);
  std::vector<std::string> problems;
  if (too_small(vt->struct_size, LAYOUT_10(pb_attention_vtable, state_length),
                "pb_attention_vtable", problems)) {
    return problems;
  }
  require("attention",
          {fn(vt->init, "init"), fn(vt->parameter_count, "parameter_count"),
           fn(vt->parameter, "parameter"), fn(vt->forward, "forward")},
          problems);
  if (vt->cache_kind != PB_ATTENTION_CACHE_NONE) {
    require("attention (with a cache)",
            {fn(vt->state_create, "state_create"), fn(vt->state_destroy, "state_destroy"),
             fn(vt->forward_step, "forward_step"), fn(vt->state_length, "state_length")},
            problems);
  }
  if ((vt->capabilities & PB_ATTENTION_CAP_CROSS) != 0) {  // interface 1.3
    if (!PB_HAS_FIELD(vt, pb_attention_vtable, forward_cross)) {
      problems.push_back(
          "declares PB_ATTENTION_CAP_CROSS but its pb_attention_vtable (struct_size " +
          std::to_string(vt->struct_size) +
          ") predates the cross-attention functions of interface 1.3; rebuild against this "
          "host's SDK");
    } else {
      require("attention (cross-attention)",
              {fn(vt->cross_memory_create, "cross_memory_create"),
               fn(vt->cross_memory_destroy, "cross_memory_destroy"),
               fn(vt->forward_cross, "forward_cross")},
              problems);
    }
  }
  if ((vt->capabilities & PB_ATTENTION_CAP_CROSS_POSITIONAL) != 0 &&
      (vt->capabilities & PB_ATTENTION_CAP_CROSS) == 0)  // interface 1.6
    problems.push_back(
        "declares PB_ATTENTION_CAP_CROSS_POSITIONAL (its cross-attention weighs keys by "
        "position) without PB_ATTENTION_CAP_CROSS; declare both or neither");
  if ((vt->capabilities & PB_ATTENTION_CAP_PACKED) != 0) {  // interface 1.5
    if (!PB_HAS_FIELD(vt, pb_attention_vtable, forward_packed)) {
      problems.push_back(
          "declares PB_ATTENTION_CAP_PACKED but its pb_attention_vtable (struct_size " +
          std::to_string(vt->struct_size) +
          ") predates forward_packed of interface 1.5; rebuild against this host's SDK");
    } else {
      require("attention (packed sequences)", {fn(vt->forward_packed, "forward_packed")}, problems);
    }
  }
  return problems;
}

std::vector<std::string> check_feedforward(const void* vtable) {
  const auto* vt = static_cast<const pb_feedforward_vtable*>(vtable);
  std::vector<std::string> problems;
  if (too_small(vt->struct_size, LAYOUT_10(pb_feedforward_vtable, forward), "pb_feedforward_vtable",
                problems)) {
    return problems;
  }
  require("feedforward",
          {fn(vt->init, "init"), fn(vt->parameter_count, "parameter_count"),
           fn(vt->parameter, "parameter"), fn(vt->forward, "forward")},
          problems);
  return problems;
}

std::vector<std::string> check_optimizer(const void* vtable) {
  const auto* vt = static_cast<const pb_optimizer_vtable*>(vtable);
  std::vector<std::string> problems;
  if (too_small(vt->struct_size, LAYOUT_10(pb_optimizer_vtable, state_tensor),
                "pb_optimizer_vtable", problems)) {
    return problems;
  }
  // set_shard is optional (NULL: no sharding support).
  require("optimizer",
          {fn(vt->add_parameter, "add_parameter"), fn(vt->step, "step"),
           fn(vt->state_count, "state_count"), fn(vt->state_tensor, "state_tensor")},
          problems);
  return problems;
}

std::vector<std::string> check_parallelism(const void* vtable) {
  const auto* vt = static_cast<const pb_parallelism_vtable*>(vtable);
  std::vector<std::string> problems;
  if (too_small(vt->struct_size, LAYOUT_10(pb_parallelism_vtable, barrier), "pb_parallelism_vtable",
                problems)) {
    return problems;
  }
  require("parallelism",
          {fn(vt->rank, "rank"), fn(vt->world_size, "world_size"), fn(vt->all_reduce, "all_reduce"),
           fn(vt->broadcast, "broadcast"), fn(vt->all_gather, "all_gather"),
           fn(vt->reduce_scatter, "reduce_scatter"), fn(vt->barrier, "barrier")},
          problems);
  return problems;
}

std::vector<std::string> check_sampler(const void* vtable) {
  const auto* vt = static_cast<const pb_sampler_vtable*>(vtable);
  std::vector<std::string> problems;
  if (too_small(vt->struct_size, LAYOUT_10(pb_sampler_vtable, clone), "pb_sampler_vtable",
                problems)) {
    return problems;
  }
  const bool processor = (vt->capabilities & PB_SAMPLER_CAP_PROCESSOR) != 0;
  const bool selector = (vt->capabilities & PB_SAMPLER_CAP_SELECTOR) != 0;
  if (processor == selector) {
    problems.push_back(
        "sampler capabilities must hold exactly one of PB_SAMPLER_CAP_PROCESSOR "
        "and PB_SAMPLER_CAP_SELECTOR");
  }
  if (processor) require("sampler (processor)", {fn(vt->apply, "apply")}, problems);
  if (selector) require("sampler (selector)", {fn(vt->select, "select")}, problems);
  require("sampler", {fn(vt->accept, "accept"), fn(vt->reset, "reset"), fn(vt->clone, "clone")},
          problems);
  if ((vt->capabilities & PB_SAMPLER_CAP_NEEDS_VOCABULARY) != 0) {  // sampler 1.1
    if (!PB_HAS_FIELD(vt, pb_sampler_vtable, set_vocabulary) || vt->set_vocabulary == nullptr) {
      problems.push_back(
          "sampler declares PB_SAMPLER_CAP_NEEDS_VOCABULARY but has no set_vocabulary (sampler "
          "interface 1.1)");
    }
  }
  return problems;
}

#undef LAYOUT_10

}  // namespace

const std::vector<KindInterface>& kind_interfaces() {
  static const std::vector<KindInterface> table = {
      {PB_KIND_TOKENIZER, "tokenizer", PB_TOKENIZER_INTERFACE_MAJOR, PB_TOKENIZER_INTERFACE_MINOR,
       &check_tokenizer},
      {PB_KIND_ATTENTION, "attention", PB_ATTENTION_INTERFACE_MAJOR, PB_ATTENTION_INTERFACE_MINOR,
       &check_attention},
      {PB_KIND_FEEDFORWARD, "feedforward", PB_FEEDFORWARD_INTERFACE_MAJOR,
       PB_FEEDFORWARD_INTERFACE_MINOR, &check_feedforward},
      {PB_KIND_OPTIMIZER, "optimizer", PB_OPTIMIZER_INTERFACE_MAJOR, PB_OPTIMIZER_INTERFACE_MINOR,
       &check_optimizer},
      {PB_KIND_PARALLELISM, "parallelism", PB_PARALLELISM_INTERFACE_MAJOR,
       PB_PARALLELISM_INTERFACE_MINOR, &check_parallelism},
      {PB_KIND_SAMPLER, "sampler", PB_SAMPLER_INTERFACE_MAJOR, PB_SAMPLER_INTERFACE_MINOR,
       &check_sampler},
  };
  return table;
}

}  // namespace patchbay::runtime
