// attention "sparse" loaded as the real .so: the SDK attention conformance kit (shapes,
// determinism, causality leak, decoding == whole forward, finite-difference gradients,
// refusals) for every pattern and way of combining; and the ops-table entry itself: an
// all-ones layout equals the dense fused attention, forward and gradients, and the entry's
// gradients equal finite differences.
#include <doctest/doctest.h>

#include "sparse_fixture.hpp"

namespace pt = patchbay::testing;
namespace sat = structured_attention_test;

TEST_CASE("attention 'sparse' passes the conformance kit for every pattern and combination") {
  struct Variant {
    const char* pattern;
    const char* combine;
    int64_t block_size, stride, summary;
  };
  // Every pattern and every way of combining at least once (the kernel test covers all pairs).
  const Variant variants[] = {{"fixed", "union", 2, 4, 2},
                              {"strided", "heads", 1, 3, 1},
                              {"strided", "alternate", 3, 3, 3},
                              {"local", "union", 2, 4, 2}};
  for (const Variant& v : variants) {
    CAPTURE(v.pattern);
    CAPTURE(v.combine);
    pt::AttentionConformanceOptions options;
    options.causality_tolerance = 0.0;  // bit for bit (issue 39: batch invariance)
    options.n_heads = 4;
    options.grad_n_heads = 2;
    options.grad_seq_len = 5;
    options.state_reorder_required = true;  // beam search reuses the cache
    options.state_fork_required = true;     // shared-context task scoring (issue 38)
    pt::check_attention_conformance(sat::factory("sparse",
                                                 [v](patchbay::runtime::ComponentConfig& c) {
                                                   c.set_string("mode", v.pattern);
                                                   c.set_string("combine", v.combine);
                                                   c.set_int("block_size", v.block_size);
                                                   c.set_int("stride", v.stride);
                                                   c.set_int("summary", v.summary);
                                                 }),
                                    options);
  }
}

TEST_CASE("attention_with_options: an all-ones layout equals dense fused attention") {
  const pb_ops_table* ops = patchbay::engine::host_ops_table();
  sat::registry();  // wires the status functions
  patchbay::Ops make(ops);
  patchbay::Generator gen(ops, 3);
  const int64_t b = 2, h = 2, t = 11, d = 4, bs = 3, nb = 4;
  patchbay::Tensor q = make.randn({b, h, t, d}, gen), k = make.randn({b, h, t, d}, gen),
                   v = make.randn({b, h, t, d}, gen);
  std::vector<int32_t> ones(static_cast<size_t>(h * nb * nb), 1);
  const int64_t layout_shape[3] = {h, nb, nb};
  pb_tensor* layout_handle = nullptr;
  REQUIRE(ops->from_data(ones.data(), layout_shape, 3, PB_DTYPE_I32, &layout_handle) == nullptr);
  patchbay::Tensor layout(ops, layout_handle);
  auto sparse = [&](const std::vector<patchbay::Tensor>& in) {
    pb_attention_options o{};
    o.struct_size = sizeof(o);
    o.causal = 1;
    o.block_layout = layout.handle();
    o.block_size = bs;
    pb_tensor* out = nullptr;
    patchbay::check_ops_status(
        ops, ops->attention_with_options(in[0].handle(), in[1].handle(), in[2].handle(), &o, &out),
        "attention_with_options");
    return patchbay::Tensor(ops, out);
  };
  for (patchbay::Tensor* x : {&q, &k, &v}) x->requires_grad(true);
  patchbay::Tensor ys = sparse({q, k, v});
  patchbay::Tensor yd = make.attention(q, k, v, true, 0.0);
  const std::vector<float> a = ys.to_vector(), r = yd.to_vector();
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == doctest::Approx(r[i]).epsilon(1e-5));
  pt::GradcheckResult g = pt::gradcheck(ops, sparse, {q, k, v});
  CHECK_MESSAGE(g.ok, g.message);

  // A wrong layout shape is refused with the expected shape in the message.
  std::vector<int32_t> small(8, 1);
  const int64_t small_shape[3] = {h, 2, 2};
  pb_tensor* bad = nullptr;
  REQUIRE(ops->from_data(small.data(), small_shape, 3, PB_DTYPE_I32, &bad) == nullptr);
  pb_attention_options o{};
  o.struct_size = sizeof(o);
  o.causal = 1;
  o.block_layout = bad;
  o.block_size = bs;
  pb_tensor* out = nullptr;
  pb_status* s = ops->attention_with_options(q.handle(), k.handle(), v.handle(), &o, &out);
  REQUIRE(s != nullptr);
  CHECK(std::string(ops->status_message(s)).find("[2, 4, 4]") != std::string::npos);
  ops->status_free(s);
  ops->release(bad);
}
