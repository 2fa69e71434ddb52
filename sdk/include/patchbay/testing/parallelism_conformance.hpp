// Patchbay SDK conformance kit for parallelism plugins (PB_KIND_PARALLELISM): the checks every
// process-group plugin, built-in or third-party, must pass. Header-only, test-framework-
// agnostic: the check returns a report whose failures list is empty on success.
//
//   #include <patchbay/testing/parallelism_conformance.hpp>
//   namespace pt = patchbay::testing;
//   const pt::ParallelismConformanceReport report =
//       pt::check_parallelism_conformance(kMyDescriptor, config_view, host);
//   CHECK_MESSAGE(report.ok(), report.message());
//
// `host` must carry the tensor engine (pb_host_api::ops non-NULL). Run it in every process of
// the group (under mpirun for a multi-process plugin; a world of one runs as a plain test):
// the collectives are called in the same order on every rank. What is checked
// (patchbay/parallelism.h is the contract), with r = rank, W = world size:
//  descriptor  kind, interface major, vtable struct_size, every callback present, a known
//              strategy;
//  identity    W >= 1, 0 <= r < W, both stable across calls;
//  all_reduce  x = full(r + 1) [4, 3]: SUM gives W (W + 1) / 2, AVG (W + 1) / 2, MAX W, in
//              place (the same handle, values changed where W > 1);
//  broadcast   x = full(r) from root W - 1 gives W - 1 everywhere;
//  all_gather  in = full(r) [2, 3] gives out [2W, 3] whose rows 2k, 2k + 1 equal k;
//  reduce_scatter  in [2W, 3] with row i = i + r, SUM: out [2, 3] row j = W (2r + j) + W(W-1)/2;
//  barrier     returns OK;
//  refusals    NULL tensors, an unknown op, root outside [0, W), an all_gather out of the
//              wrong shape, a reduce_scatter in whose dim 0 is not a multiple of W and
//              mismatched dtypes: PB_STATUS_INVALID_ARGUMENT with a non-empty message.
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "patchbay/component.h"
#include "patchbay/parallelism.h"
#include "patchbay/tensor.hpp"

namespace patchbay::testing {

struct ParallelismConformanceReport {
  std::vector<std::string> failures;
  bool ok() const { return failures.empty(); }
  std::string message() const {
    std::string out;
    for (const std::string& f : failures) out += (out.empty() ? "" : "\n") + f;
    return out.empty() ? "ok" : out;
  }
};

namespace parallelism_kit_detail {

struct Group {  // an object and its destroy
  const pb_component_descriptor* component = nullptr;
  void* object = nullptr;
  ~Group() {
    if (object != nullptr) component->destroy(object);
  }
};

inline std::pair<pb_status_code, std::string> take(const pb_host_api* host, pb_status* st) {
  if (st == nullptr) return {PB_STATUS_OK, ""};
  std::pair<pb_status_code, std::string> out{host->status_code(st), host->status_message(st)};
  host->status_free(st);
  return out;
}

// Every element of `t` equals expected(flat index); else a failure naming `what`.
template <class Expected>
void expect_values(std::vector<std::string>& failures, const std::string& what, const Tensor& t,
                   Expected expected) {
  const std::vector<float> v = t.to_vector();
  for (size_t i = 0; i < v.size(); ++i) {
    const double want = expected(i);
    if (std::fabs(v[i] - want) > 1e-5 * (1.0 + std::fabs(want))) {
      failures.push_back(what + ": element " + std::to_string(i) + " is " + std::to_string(v[i]) +
                         ", expected " + std::to_string(want));
      return;
    }
  }
}

}  // namespace parallelism_kit_detail

inline ParallelismConformanceReport check_parallelism_conformance(
    const pb_component_descriptor& component, const pb_config_view* config,
    const pb_host_api* host) {
  namespace d = parallelism_kit_detail;
  ParallelismConformanceReport report;
  std::vector<std::string>& failures = report.failures;
  if (component.kind != PB_KIND_PARALLELISM) failures.push_back("descriptor kind is not PB_KIND_PARALLELISM");
  if (component.interface_major != PB_PARALLELISM_INTERFACE_MAJOR)
    failures.push_back("interface_major " + std::to_string(component.interface_major) +
                       " differs from the SDK's " + std::to_string(PB_PARALLELISM_INTERFACE_MAJOR));
  const auto* vt = static_cast<const pb_parallelism_vtable*>(component.vtable);
  if (vt == nullptr || vt->struct_size < sizeof(pb_parallelism_vtable) || !vt->rank ||
      !vt->world_size || !vt->all_reduce || !vt->broadcast || !vt->all_gather ||
      !vt->reduce_scatter || !vt->barrier) {
    failures.push_back("vtable is NULL, shorter than pb_parallelism_vtable or misses a callback");
    return report;
  }
  if (vt->strategy < PB_PARALLEL_SINGLE || vt->strategy > PB_PARALLEL_TENSOR)
    failures.push_back("unknown strategy " + std::to_string(static_cast<int>(vt->strategy)));
  if (host == nullptr || host->ops == nullptr) {
    failures.push_back("the host has no tensor engine (pb_host_api::ops is NULL); use a Patchbay host");
    return report;
  }
  d::Group g{&component, nullptr};
  auto [code, message] = d::take(host, component.create(host, config, &g.object));
  if (code != PB_STATUS_OK || g.object == nullptr) {
    failures.push_back("create failed: " + message);
    return report;
  }
  const Ops ops(host->ops);
  const int64_t r = vt->rank(g.object), w = vt->world_size(g.object);
  if (w < 1 || r < 0 || r >= w) {
    failures.push_back("rank " + std::to_string(r) + " / world size " + std::to_string(w) +
                       " is not 0 <= rank < world");
    return report;
  }
  if (vt->rank(g.object) != r || vt->world_size(g.object) != w)
    failures.push_back("rank or world size changed between calls");
  const double wd = static_cast<double>(w), rd = static_cast<double>(r);
  auto expect_ok = [&](pb_status* st, const std::string& what) {
    auto [c, m] = d::take(host, st);
    if (c != PB_STATUS_OK) failures.push_back(what + " failed: " + m);
    return c == PB_STATUS_OK;
  };

  const std::pair<pb_collective_op, double> reductions[] = {
      {PB_COLLECTIVE_SUM, wd * (wd + 1) / 2}, {PB_COLLECTIVE_AVG, (wd + 1) / 2}, {PB_COLLECTIVE_MAX, wd}};
  for (const auto& [op, want] : reductions) {
    Tensor x = ops.full({4, 3}, rd + 1);
    const std::string what = "all_reduce op " + std::to_string(static_cast<int>(op));
    if (expect_ok(vt->all_reduce(g.object, x.handle(), op), what))
      d::expect_values(failures, what, x, [want = want](size_t) { return want; });
  }
  {
    Tensor x = ops.full({5}, rd);
    if (expect_ok(vt->broadcast(g.object, x.handle(), w - 1), "broadcast from root W - 1"))
      d::expect_values(failures, "broadcast from root W - 1", x, [&](size_t) { return wd - 1; });
  }
  {
    Tensor in = ops.full({2, 3}, rd), out = ops.zeros({2 * w, 3});
    if (expect_ok(vt->all_gather(g.object, in.handle(), out.handle()), "all_gather"))
      d::expect_values(failures, "all_gather", out,
                       [](size_t i) { return static_cast<double>(i / 3 / 2); });
  }
  {
    std::vector<float> rows;
    for (int64_t i = 0; i < 2 * w; ++i)
      for (int c = 0; c < 3; ++c) rows.push_back(static_cast<float>(i + r));
    Tensor in = ops.from_vector(rows, {2 * w, 3}), out = ops.zeros({2, 3});
    if (expect_ok(vt->reduce_scatter(g.object, in.handle(), out.handle(), PB_COLLECTIVE_SUM),
                  "reduce_scatter SUM"))
      d::expect_values(failures, "reduce_scatter SUM", out, [&](size_t i) {
        const double j = static_cast<double>(i / 3);
        return wd * (2 * rd + j) + wd * (wd - 1) / 2;
      });
  }
  expect_ok(vt->barrier(g.object), "barrier");

  auto expect_refused = [&](pb_status* st, const std::string& what) {
    auto [c, m] = d::take(host, st);
    if (c != PB_STATUS_INVALID_ARGUMENT || m.empty())
      failures.push_back(what + " must be refused with PB_STATUS_INVALID_ARGUMENT and a message, got code " +
                         std::to_string(static_cast<int>(c)));
  };
  Tensor x = ops.zeros({4, 3});
  expect_refused(vt->all_reduce(g.object, nullptr, PB_COLLECTIVE_SUM), "all_reduce of NULL");
  expect_refused(vt->all_reduce(g.object, x.handle(), static_cast<pb_collective_op>(99)),
                 "all_reduce with op 99");
  expect_refused(vt->broadcast(g.object, x.handle(), w), "broadcast from root W");
  expect_refused(vt->broadcast(g.object, x.handle(), -1), "broadcast from root -1");
  expect_refused(vt->all_gather(g.object, x.handle(), ops.zeros({4 * w + 1, 3}).handle()),
                 "all_gather into out of the wrong shape");
  expect_refused(vt->all_gather(g.object, nullptr, x.handle()), "all_gather of NULL");
  expect_refused(vt->reduce_scatter(g.object, ops.zeros({2 * w + 1, 3}).handle(),
                                    ops.zeros({2, 3}).handle(), PB_COLLECTIVE_SUM),
                 "reduce_scatter of an in whose dim 0 is not a multiple of W (+1)");
  expect_refused(vt->all_gather(g.object, x.handle(), ops.zeros({4 * w, 3}, PB_DTYPE_I64).handle()),
                 "all_gather into out of another dtype");
  return report;
}

}  // namespace patchbay::testing
