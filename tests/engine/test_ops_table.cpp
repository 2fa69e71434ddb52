// The C face of the engine: pb_ops_table through raw calls, the SDK's patchbay::Tensor
// wrapper, a custom op registered with C callbacks, and the SDK gradcheck.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/ops_table.hpp"
#include "patchbay/tensor.hpp"
#include "patchbay/testing/gradcheck.hpp"

namespace {
const pb_ops_table* table() { return patchbay::engine::host_ops_table(); }
}  // namespace

TEST_CASE("raw table: create, query, compute, errors as statuses") {
  const pb_ops_table* t = table();
  CHECK(t->struct_size == sizeof(pb_ops_table));
  CHECK(PB_HAS_FIELD(t, pb_ops_table, memory_stats));
  const float data[6] = {1, 2, 3, 4, 5, 6};
  const int64_t shape[2] = {2, 3};
  pb_tensor* x = nullptr;
  REQUIRE(t->from_data(data, shape, 2, PB_DTYPE_F32, &x) == nullptr);
  CHECK(t->ndim(x) == 2);
  CHECK(t->shape(x)[1] == 3);
  CHECK(t->strides(x)[0] == 3);
  CHECK(t->dtype(x) == PB_DTYPE_F32);
  pb_tensor* y = nullptr;
  REQUIRE(t->transpose(x, 0, 1, &y) == nullptr);
  CHECK(!t->is_contiguous(y));
  float out[6];
  REQUIRE(t->copy_to_host(y, out, sizeof(out)) == nullptr);
  CHECK(out[1] == 4.0f);
  pb_tensor* z = nullptr;
  REQUIRE(t->matmul(x, x, 0, 1, &z) == nullptr);  // [2,3] @ [3,2]
  float zz[4];
  REQUIRE(t->copy_to_host(z, zz, sizeof(zz)) == nullptr);
  CHECK(zz[0] == 14.0f);
  CHECK(zz[3] == 77.0f);
  pb_tensor* bad = nullptr;
  pb_status* s = t->matmul(x, x, 0, 0, &bad);  // inner dims 3 vs 2
  REQUIRE(s != nullptr);
  CHECK(t->status_code(s) == PB_STATUS_INVALID_ARGUMENT);
  CHECK(std::string(t->status_message(s)).find("inner dims") != std::string::npos);
  CHECK(bad == nullptr);
  t->status_free(s);
  s = t->copy_to_host(x, out, 4);  // too small
  CHECK(t->status_code(s) == PB_STATUS_INVALID_ARGUMENT);
  t->status_free(s);
  size_t current = 0, peak = 0;
  REQUIRE(t->memory_stats(PB_DEVICE_CPU, 0, &current, &peak) == nullptr);
  CHECK(peak >= current);
  CHECK(current > 0);
  s = t->memory_stats(PB_DEVICE_CUDA, 0, &current, &peak);  // no CUDA backend here
  CHECK(s != nullptr);
  t->status_free(s);
  t->release(x);
  t->release(y);
  t->release(z);
}

TEST_CASE("Tensor wrapper reads like PyTorch and backpropagates") {
  patchbay::Ops ops(table());
  patchbay::Generator gen(table(), 5);
  patchbay::Tensor x = ops.randn({4, 3}, gen);
  patchbay::Tensor w = ops.uniform({3, 2}, gen, -1, 1).requires_grad(true);
  patchbay::Tensor b = ops.zeros({2}).requires_grad(true);
  patchbay::Tensor loss = ((x.matmul(w) + b).gelu() * 2.0).sum();
  CHECK(loss.shape().empty());
  loss.backward();
  CHECK(w.grad().shape() == std::vector<int64_t>{3, 2});
  CHECK(b.grad().defined());
  {
    patchbay::NoGradGuard guard(table());
    CHECK(!(x.matmul(w)).requires_grad());
  }
  CHECK(x.matmul(w).requires_grad());
  CHECK_THROWS_AS(x.matmul(x), patchbay::PluginError);
  patchbay::Tensor logits = ops.randn({5, 7}, gen).requires_grad(true);
  patchbay::Tensor targets = ops.from_vector(std::vector<int64_t>{1, 0, 6, -100, 3}, {5});
  patchbay::Tensor ce = ops.cross_entropy(logits, targets);
  CHECK(std::isfinite(ce.item()));
  ce.backward();
  std::vector<float> g = logits.grad().to_vector();
  for (int j = 0; j < 7; ++j) CHECK(g[3 * 7 + j] == 0.0f);  // ignored row
}

TEST_CASE("gradcheck through the table passes on composed ops and catches a wrong backward") {
  patchbay::Ops ops(table());
  patchbay::Generator gen(table(), 9);
  patchbay::Tensor a = ops.uniform({3, 4}, gen, -1, 1).requires_grad(true);
  patchbay::Tensor g = ops.uniform({4}, gen, 0.5, 1.5).requires_grad(true);
  auto r = patchbay::testing::gradcheck(table(),
                                        [](const std::vector<patchbay::Tensor>& in) {
                                          return in[0].rms_norm(in[1]).softmax().tanh();
                                        },
                                        {a, g});
  CHECK_MESSAGE(r.ok, r.message);
}

namespace {
// y = 2x via C callbacks; `wrong` makes the backward return 3*g to prove gradcheck fails.
struct DoubleOp {
  const pb_ops_table* ops;
  bool wrong;
};
pb_status* double_forward(void* ud, pb_custom_ctx*, pb_tensor* const* in, size_t, pb_tensor** out,
                          size_t) {
  auto* d = static_cast<DoubleOp*>(ud);
  return d->ops->scalar(PB_SCALAR_MUL, in[0], 2.0, &out[0]);
}
pb_status* double_backward(void* ud, pb_custom_ctx* ctx, pb_tensor* const* g, size_t,
                           pb_tensor** gin, size_t) {
  auto* d = static_cast<DoubleOp*>(ud);
  if (!d->ops->ctx_needs_input_grad(ctx, 0)) return nullptr;
  return d->ops->scalar(PB_SCALAR_MUL, g[0], d->wrong ? 3.0 : 2.0, &gin[0]);
}
int destroyed = 0;
void double_destroy(void* ud) {
  delete static_cast<DoubleOp*>(ud);
  ++destroyed;
}
pb_custom_op* make_double(bool wrong) {
  pb_custom_op_desc desc{};
  desc.struct_size = sizeof(desc);
  desc.name = wrong ? "double_wrong" : "double";
  desc.num_outputs = 1;
  desc.user_data = new DoubleOp{table(), wrong};
  desc.forward = double_forward;
  desc.backward = double_backward;
  desc.destroy = double_destroy;
  pb_custom_op* op = nullptr;
  REQUIRE(table()->custom_op_create(&desc, &op) == nullptr);
  return op;
}
patchbay::Tensor apply(pb_custom_op* op, const patchbay::Tensor& x) {
  pb_tensor* in[1] = {x.handle()};
  pb_tensor* out[1] = {nullptr};
  patchbay::check_ops_status(table(), table()->custom_op_apply(op, in, 1, out, 1), "apply");
  return patchbay::Tensor(table(), out[0]);
}
}  // namespace

TEST_CASE("custom op registered through C callbacks") {
  patchbay::Ops ops(table());
  pb_custom_op* good = make_double(false);
  pb_custom_op* wrong = make_double(true);
  patchbay::Tensor x = ops.from_vector(std::vector<float>{1, 2, 3}, {3}).requires_grad(true);
  patchbay::Tensor y = apply(good, x);
  CHECK(y.to_vector() == std::vector<float>{2, 4, 6});
  y.sum().backward();
  CHECK(x.grad().to_vector() == std::vector<float>{2, 2, 2});
  auto ok = patchbay::testing::gradcheck(
      table(), [&](const std::vector<patchbay::Tensor>& in) { return apply(good, in[0]); }, {x});
  CHECK_MESSAGE(ok.ok, ok.message);
  auto bad = patchbay::testing::gradcheck(
      table(), [&](const std::vector<patchbay::Tensor>& in) { return apply(wrong, in[0]); }, {x});
  CHECK(!bad.ok);
  CHECK(bad.message.find("analytic") != std::string::npos);
  y = patchbay::Tensor();
  table()->custom_op_release(good);
  table()->custom_op_release(wrong);
  CHECK(destroyed == 2);  // graphs that referenced the ops are gone
  pb_custom_op_desc incomplete{};
  incomplete.struct_size = sizeof(incomplete);
  pb_custom_op* none = nullptr;
  pb_status* s = table()->custom_op_create(&incomplete, &none);
  CHECK(s != nullptr);
  table()->status_free(s);
}
