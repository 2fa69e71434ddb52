// Packed sequences in the dense plugin (attention interface 1.5, PB_ATTENTION_CAP_PACKED),
// through the host's AttentionHandle: forward_packed on rows holding several segments equals
// forward() on each segment alone (output and input gradient), with rotary positions
// restarting per segment; the other built-in kinds do not declare it and refuse by name; the
// host's vtable check refuses a layer that declares it without forward_packed.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "attention_fixture.hpp"
#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "runtime/plugin_validation.hpp"

namespace {

namespace rt = patchbay::runtime;
namespace eng = patchbay::engine;

eng::Tensor i64(const std::vector<int64_t>& values, int64_t rows) {
  return eng::Tensor::from_data(values.data(), {rows, static_cast<int64_t>(values.size()) / rows},
                                eng::DType::kI64);
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
  return worst;
}

}  // namespace

TEST_CASE("dense forward_packed equals each segment alone (rotary restarts per segment)") {
  for (const pb_positional_kind positional :
       {PB_POSITIONAL_ROTARY, PB_POSITIONAL_ALIBI, PB_POSITIONAL_NONE}) {
    CAPTURE(positional);
    rt::AttentionHandle attn = attention_test::dense_handle();
    attn.init(attention_test::layer_context(16, 2, 80, positional));
    REQUIRE(attn.can_pack());
    // Two rows of 70: segments of 10, 45, 15 (row 0) and 70 (row 1), crossing 64-key tiles.
    const std::vector<std::vector<int64_t>> lengths = {{10, 45, 15}, {70}};
    std::vector<int64_t> ids;
    for (const auto& row : lengths)
      for (size_t s = 0; s < row.size(); ++s) ids.insert(ids.end(), size_t(row[s]), int64_t(s));
    eng::Generator gen(3);
    eng::Tensor x = eng::uniform({2, 70, 16}, gen, -1.0, 1.0);
    x.set_requires_grad(true);
    const eng::Tensor y = attn.forward_packed(x, i64(ids, 2), /*training=*/false);
    eng::backward(eng::sum(y * y));
    const eng::Tensor packed_grad = x.grad();
    for (size_t r = 0; r < lengths.size(); ++r) {
      int64_t begin = 0;
      for (const int64_t len : lengths[r]) {
        CAPTURE(r);
        CAPTURE(begin);
        eng::Tensor part =
            eng::narrow(eng::narrow(x.detach(), 0, int64_t(r), 1), 1, begin, len).contiguous();
        part.set_requires_grad(true);
        const eng::Tensor alone = attn.forward(part, false);
        eng::backward(eng::sum(alone * alone));
        auto rows_of = [&](const eng::Tensor& t) {
          return eng::narrow(eng::narrow(t, 0, int64_t(r), 1), 1, begin, len)
              .contiguous()
              .to_vector();
        };
        CHECK(max_diff(alone.to_vector(), rows_of(y.detach())) < 2e-5);
        CHECK(max_diff(part.grad().to_vector(), rows_of(packed_grad)) < 1e-4);
        begin += len;
      }
    }
  }
}

TEST_CASE("attention kinds without PB_ATTENTION_CAP_PACKED refuse packed sequences, by name") {
  attention_test::registry();  // wires the host api to the engine's ops table
  const char* env = std::getenv("PATCHBAY_PLUGIN_PATH");
  REQUIRE(env != nullptr);
  rt::Registry others(rt::host_api());
  for (const char* file : {"attention_linear.so", "attention_linformer.so", "attention_lsh.so",
                           "attention_performer.so", "attention_sparse.so"})
    others.scan_file(std::filesystem::path(env) / file);
  for (const rt::RefusedPlugin& refused : others.refused()) FAIL_CHECK(refused.reason);
  int refused_kinds = 0;
  for (const auto& plugin : others.plugins()) {
    for (const rt::ComponentEntry& component : plugin->components) {
      if (component.kind != PB_KIND_ATTENTION) continue;
      CAPTURE(component.name);
      rt::ComponentConfig config(*component.descriptor);
      rt::AttentionHandle handle(others.create(PB_KIND_ATTENTION, component.name, config.view()),
                                 others.host());
      CHECK(!handle.can_pack());
      ++refused_kinds;
      try {
        handle.require_packed();
        FAIL("no refusal");
      } catch (const patchbay::Error& e) {
        const std::string message = e.what();
        CHECK(message.find("attention '" + component.name + "'") != std::string::npos);
        CHECK(message.find("cannot run packed sequences") != std::string::npos);
        CHECK(message.find(plugin->file.filename().string()) != std::string::npos);
      }
      CHECK_THROWS_AS(handle.forward_packed(eng::zeros({1, 2, 16}), i64({0, 1}, 1), false),
                      patchbay::Error);
    }
  }
  CHECK(refused_kinds >= 5);
}

TEST_CASE("the host refuses a vtable declaring packed sequences without forward_packed") {
  const rt::KindInterface* attention = rt::kind_interface(PB_KIND_ATTENTION);
  REQUIRE(attention != nullptr);
  pb_attention_vtable vt =
      *static_cast<const pb_attention_vtable*>(attention_test::dense_descriptor().vtable);
  REQUIRE((vt.capabilities & PB_ATTENTION_CAP_PACKED) != 0);
  CHECK(attention->check_vtable(&vt).empty());
  pb_attention_vtable missing = vt;
  missing.forward_packed = nullptr;
  std::vector<std::string> problems = attention->check_vtable(&missing);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("'forward_packed' is NULL") != std::string::npos);
  pb_attention_vtable old = vt;
  old.struct_size = offsetof(pb_attention_vtable, forward_packed);  // an interface 1.3 size
  problems = attention->check_vtable(&old);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("predates forward_packed") != std::string::npos);
  old.capabilities &= ~static_cast<uint64_t>(PB_ATTENTION_CAP_PACKED);  // a 1.3 layer: fine
  CHECK(attention->check_vtable(&old).empty());
}
