// parallel_single.so loaded through the host registry: strategy, rank and world; every
// collective is the identity on a world of one (values and integer bits preserved, AVG
// divides by 1); wrong roots, ops, shapes and dtypes are refused with messages naming the
// component, the file and the shapes; the SDK adapter's checks through the raw vtable.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../feedforward/engine_host.hpp"
#include "engine/generator.hpp"
#include "engine/ops.hpp"
#include "runtime/parallelism_handle.hpp"

namespace rt = patchbay::runtime;
namespace eng = patchbay::engine;

namespace {

struct Loaded {
  rt::Registry registry{patchbay::test::engine_host_api()};
  Loaded() {
    registry.scan_file(patchbay::test::built_plugin("parallel_single.so"));
    REQUIRE(registry.refused().empty());
  }
  rt::ParallelismHandle make() {
    rt::ComponentConfig config(*registry.find(PB_KIND_PARALLELISM, "single").descriptor);
    return rt::ParallelismHandle(registry.create(PB_KIND_PARALLELISM, "single", config.view()), registry.host());
  }
};

std::string error_of(auto&& call) {
  try {
    call();
  } catch (const patchbay::Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("single is rank 0 of a world of 1 with strategy SINGLE") {
  Loaded loaded;
  rt::ParallelismHandle group = loaded.make();
  CHECK(group.strategy() == PB_PARALLEL_SINGLE);
  CHECK(rt::parallel_strategy_name(group.strategy()) == "single");
  CHECK(group.rank() == 0);
  CHECK(group.world_size() == 1);
  group.barrier();
}

TEST_CASE("collectives on a world of one leave values as they are") {
  Loaded loaded;
  rt::ParallelismHandle group = loaded.make();
  eng::Generator gen(4);
  eng::Tensor t = eng::randn({3, 4}, gen);
  const std::vector<float> before = t.to_vector();
  for (pb_collective_op op : {PB_COLLECTIVE_SUM, PB_COLLECTIVE_AVG, PB_COLLECTIVE_MAX}) {
    group.all_reduce(t, op);
    CHECK(t.to_vector() == before);
  }
  group.broadcast(t, 0);
  CHECK(t.to_vector() == before);

  const eng::Tensor gathered = group.all_gather(t);
  CHECK(gathered.shape() == eng::Shape{3, 4});
  CHECK(gathered.to_vector() == before);
  CHECK(gathered.data_ptr() != t.data_ptr());  // a copy, not an alias
  const eng::Tensor scattered = group.reduce_scatter(t, PB_COLLECTIVE_SUM);
  CHECK(scattered.to_vector() == before);

  // A strided view (not contiguous) is copied element by element in row-major order.
  const eng::Tensor transposed = t.transpose(0, 1);
  CHECK(group.all_gather(transposed).to_vector() == transposed.to_vector());

  // Integers are copied bit for bit (2^53 + 1 is not a float or double value).
  const std::vector<int64_t> big = {(int64_t{1} << 53) + 1, -7, 0};
  const eng::Tensor ids = eng::Tensor::from_data(big.data(), {3}, eng::DType::kI64);
  const eng::Tensor ids_out = group.all_gather(ids);
  CHECK(std::vector<int64_t>(ids_out.data<int64_t>(), ids_out.data<int64_t>() + 3) == big);
}

TEST_CASE("wrong roots, ops, shapes and dtypes are refused with messages") {
  Loaded loaded;
  rt::ParallelismHandle group = loaded.make();
  eng::Tensor t = eng::zeros({3, 4});
  const std::string root = error_of([&] { group.broadcast(t, 1); });
  CHECK(root.find("parallelism 'single'") != std::string::npos);
  CHECK(root.find("parallel_single.so") != std::string::npos);
  CHECK(root.find("broadcast root 1 is not a rank of a world of 1") != std::string::npos);

  CHECK(error_of([&] { group.all_reduce(t, static_cast<pb_collective_op>(7)); }).find("unknown collective op 7") !=
        std::string::npos);

  eng::Tensor wrong = eng::zeros({2, 4});
  CHECK(error_of([&] { group.all_gather(t, wrong); })
            .find("all_gather: out must be [3, 4] (world 1 x in [3, 4]) but is [2, 4]") != std::string::npos);
  CHECK(error_of([&] { group.reduce_scatter(t, wrong, PB_COLLECTIVE_SUM); })
            .find("reduce_scatter: in must be [2, 4] (world 1 x out [2, 4]) but is [3, 4]") != std::string::npos);
  eng::Tensor ints = eng::zeros({3, 4}, eng::DType::kI32);
  CHECK(error_of([&] { group.all_gather(t, ints); }).find("different dtypes") != std::string::npos);
  eng::Tensor scalar = eng::zeros({});
  CHECK(error_of([&] { group.all_gather(scalar, scalar); }).find("at least one dim") != std::string::npos);
}

TEST_CASE("the adapter refuses NULL tensors through the raw vtable") {
  Loaded loaded;
  const pb_component_descriptor& d = *loaded.registry.find(PB_KIND_PARALLELISM, "single").descriptor;
  const auto* vt = static_cast<const pb_parallelism_vtable*>(d.vtable);
  rt::ComponentConfig config(d);
  rt::ComponentInstance instance = loaded.registry.create(PB_KIND_PARALLELISM, "single", config.view());
  const pb_host_api* host = loaded.registry.host();
  pb_status* st = vt->all_reduce(instance.get(), nullptr, PB_COLLECTIVE_SUM);
  REQUIRE(st != nullptr);
  CHECK(host->status_code(st) == PB_STATUS_INVALID_ARGUMENT);
  CHECK(std::string(host->status_message(st)) == "parallelism all_reduce: tensor is NULL");
  host->status_free(st);
  CHECK(vt->barrier(instance.get()) == nullptr);
}
