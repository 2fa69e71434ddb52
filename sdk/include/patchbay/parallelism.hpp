// Patchbay SDK, header-only C++ layer for parallelism plugins (PB_KIND_PARALLELISM,
// patchbay/parallelism.h): write a plain C++ class, get a pb_component_descriptor.
//
//   class MpiGroup : public patchbay::Parallelism {
//    public:
//     static constexpr pb_parallel_strategy kStrategy = PB_PARALLEL_DATA;
//     MpiGroup(const patchbay::Host& host, const patchbay::ConfigView& config);
//     int64_t rank() const override;
//     int64_t world_size() const override;
//     void all_reduce(const patchbay::Tensor& tensor, pb_collective_op op) override;
//     void broadcast(const patchbay::Tensor& tensor, int64_t root) override;
//     void all_gather(const patchbay::Tensor& in, const patchbay::Tensor& out) override;
//     void reduce_scatter(const patchbay::Tensor& in, const patchbay::Tensor& out,
//                         pb_collective_op op) override;
//     void barrier() override;
//   };
//   inline constexpr pb_component_descriptor kMpi =
//       patchbay::make_parallelism_component<MpiGroup>("mpi", "1.0.0", "summary", kMpiFields);
//
// Tensors are handles: a collective writes into the tensor it is given (data pointer or
// copy_from_host), never replaces it. Before calling T the adapter (detail::ParallelismAdapter)
// checks what parallelism.h promises every implementation: non-NULL tensors, a known
// collective op, root in [0, world), and the shapes and dtypes of all_gather / reduce_scatter
// (check_all_gather_shapes, check_reduce_scatter_shapes), refusing with
// PB_STATUS_INVALID_ARGUMENT and a message naming the shapes. Every exception is caught at the
// boundary: PluginError keeps its code; anything else becomes PB_STATUS_INTERNAL with what().
// rank() and world_size() have no error channel: an exception there reports -1 and 0.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "patchbay/component.hpp"
#include "patchbay/parallelism.h"
#include "patchbay/tensor.hpp"

namespace patchbay {

// A non-blocking collective in flight (SDK 1.1): wait() completes it (may throw).
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void wait() = 0;
};

// Base class of C++ process groups. Methods may throw (PluginError for a chosen code).
class Parallelism {
 public:
  // The strategy the host reads from the vtable; a derived class shadows this constant.
  static constexpr pb_parallel_strategy kStrategy = PB_PARALLEL_SINGLE;

  virtual ~Parallelism() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t world_size() const = 0;
  // In place: every rank ends with op over all ranks' `tensor` (AVG = SUM / world).
  virtual void all_reduce(const Tensor& tensor, pb_collective_op op) = 0;
  // In place: every rank ends with root's `tensor`.
  virtual void broadcast(const Tensor& tensor, int64_t root) = 0;
  // out [world * N, ...] = the ranks' `in` [N, ...] concatenated along dim 0 in rank order.
  virtual void all_gather(const Tensor& in, const Tensor& out) = 0;
  // out [N / world, ...] = rows [rank * N / world, (rank + 1) * N / world) of op over ranks' in.
  virtual void reduce_scatter(const Tensor& in, const Tensor& out, pb_collective_op op) = 0;
  virtual void barrier() = 0;

  // 1.1: starts an in-place all-reduce and returns at once. The default runs the blocking
  // all_reduce now and returns a finished request (correct, without overlap).
  virtual std::unique_ptr<PendingCollective> all_reduce_start(const Tensor& tensor, pb_collective_op op) {
    all_reduce(tensor, op);
    struct Done : PendingCollective {
      void wait() override {}
    };
    return std::make_unique<Done>();
  }
  // 1.1: ends every process of the job. The default can end only this process.
  virtual void abort_job(int32_t exit_code, const std::string& message) {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(exit_code);
  }
};

inline const char* collective_op_name(pb_collective_op op) {
  switch (op) {
    case PB_COLLECTIVE_SUM: return "sum";
    case PB_COLLECTIVE_AVG: return "avg";
    case PB_COLLECTIVE_MAX: return "max";
  }
  return "unknown";
}

inline const char* parallel_strategy_name(pb_parallel_strategy strategy) {
  switch (strategy) {
    case PB_PARALLEL_SINGLE: return "single";
    case PB_PARALLEL_DATA: return "data";
    case PB_PARALLEL_ZERO1: return "zero1";
    case PB_PARALLEL_TENSOR: return "tensor";
  }
  return "unknown";
}

namespace detail {

inline std::string collective_shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
  return s + "]";
}

// `big` must be `small` with dim 0 multiplied by world; same dtype.
inline void check_rows_times_world(const char* what, const Tensor& small, const Tensor& big, int64_t world,
                                   const char* small_name, const char* big_name) {
  const std::vector<int64_t> s = small.shape();
  const std::vector<int64_t> b = big.shape();
  if (s.empty()) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      std::string(what) + ": " + small_name + " must have at least one dim (rows), got a scalar");
  }
  std::vector<int64_t> expected = s;
  expected[0] *= world;
  if (b != expected) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      std::string(what) + ": " + big_name + " must be " + collective_shape_text(expected) + " (world " +
                          std::to_string(world) + " x " + small_name + " " + collective_shape_text(s) + ") but is " +
                          collective_shape_text(b));
  }
  if (small.dtype() != big.dtype()) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, std::string(what) + ": in and out have different dtypes (" +
                                                      std::to_string(static_cast<int>(small.dtype())) + " vs " +
                                                      std::to_string(static_cast<int>(big.dtype())) + ")");
  }
}

}  // namespace detail

// Throws PluginError(INVALID_ARGUMENT) unless out is [world * N, ...] for in [N, ...], same dtype.
inline void check_all_gather_shapes(const Tensor& in, const Tensor& out, int64_t world) {
  detail::check_rows_times_world("all_gather", in, out, world, "in", "out");
}
// Throws PluginError(INVALID_ARGUMENT) unless in is [world * M, ...] for out [M, ...], same dtype.
inline void check_reduce_scatter_shapes(const Tensor& in, const Tensor& out, int64_t world) {
  detail::check_rows_times_world("reduce_scatter", out, in, world, "out", "in");
}

namespace detail {

template <class T>
struct ParallelismObject {
  ParallelismObject(const pb_host_api* h, const pb_config_view* config)
      : host(h), impl(Host(h), ConfigView(config)) {}

  const pb_host_api* host;  // borrowed; outlives the object (component.h)
  T impl;
};

template <class T>
struct ParallelismAdapter {
  using Object = ParallelismObject<T>;
  static Object* self(void* p) { return static_cast<Object*>(p); }
  static const Object* self(const void* p) { return static_cast<const Object*>(p); }

  static pb_status* create(const pb_host_api* host, const pb_config_view* config,
                           void** out_instance) {
    *out_instance = nullptr;
    return guarded(host, "parallelism create", [&] { *out_instance = new Object(host, config); });
  }
  static void destroy(void* instance) { delete self(instance); }

  static int64_t rank(const void* p) {
    try {
      return self(p)->impl.rank();
    } catch (...) {
      return -1;  // no error channel in the C signature; -1 is never a rank
    }
  }
  static int64_t world_size(const void* p) {
    try {
      return self(p)->impl.world_size();
    } catch (...) {
      return 0;  // no error channel; 0 is never a world size
    }
  }

  // A Tensor holding its own reference to a borrowed handle.
  static Tensor borrow(const Object* o, const pb_tensor* t, const char* name) {
    if (o->host->ops == nullptr) {
      throw PluginError(PB_STATUS_UNSUPPORTED, "the host has no tensor engine (pb_host_api::ops is NULL)");
    }
    if (t == nullptr) throw PluginError(PB_STATUS_INVALID_ARGUMENT, std::string(name) + " is NULL");
    o->host->ops->retain(const_cast<pb_tensor*>(t));
    return Tensor(o->host->ops, const_cast<pb_tensor*>(t));
  }
  static void check_op(pb_collective_op op) {
    if (op != PB_COLLECTIVE_SUM && op != PB_COLLECTIVE_AVG && op != PB_COLLECTIVE_MAX) {
      throw PluginError(PB_STATUS_INVALID_ARGUMENT, "unknown collective op " + std::to_string(static_cast<int>(op)) +
                                                        " (expected SUM 0, AVG 1 or MAX 2)");
    }
  }

  static pb_status* all_reduce(void* p, pb_tensor* tensor, pb_collective_op op) {
    Object* o = self(p);
    return guarded(o->host, "parallelism all_reduce", [&] {
      Tensor t = borrow(o, tensor, "tensor");
      check_op(op);
      o->impl.all_reduce(t, op);
    });
  }
  static pb_status* broadcast(void* p, pb_tensor* tensor, int64_t root) {
    Object* o = self(p);
    return guarded(o->host, "parallelism broadcast", [&] {
      Tensor t = borrow(o, tensor, "tensor");
      const int64_t world = o->impl.world_size();
      if (root < 0 || root >= world) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT, "broadcast root " + std::to_string(root) +
                                                          " is not a rank of a world of " + std::to_string(world));
      }
      o->impl.broadcast(t, root);
    });
  }
  static pb_status* all_gather(void* p, const pb_tensor* in, pb_tensor* out) {
    Object* o = self(p);
    return guarded(o->host, "parallelism all_gather", [&] {
      Tensor tin = borrow(o, in, "in");
      Tensor tout = borrow(o, out, "out");
      check_all_gather_shapes(tin, tout, o->impl.world_size());
      o->impl.all_gather(tin, tout);
    });
  }
  static pb_status* reduce_scatter(void* p, const pb_tensor* in, pb_tensor* out, pb_collective_op op) {
    Object* o = self(p);
    return guarded(o->host, "parallelism reduce_scatter", [&] {
      Tensor tin = borrow(o, in, "in");
      Tensor tout = borrow(o, out, "out");
      check_op(op);
      check_reduce_scatter_shapes(tin, tout, o->impl.world_size());
      o->impl.reduce_scatter(tin, tout, op);
    });
  }
  static pb_status* barrier(void* p) {
    Object* o = self(p);
    return guarded(o->host, "parallelism barrier", [&] { o->impl.barrier(); });
  }

  static pb_status* all_reduce_start(void* p, pb_tensor* tensor, pb_collective_op op,
                                     pb_collective_request** out_request) {
    Object* o = self(p);
    return guarded(o->host, "parallelism all_reduce_start", [&] {
      if (out_request == nullptr) throw PluginError(PB_STATUS_INVALID_ARGUMENT, "out_request is NULL");
      *out_request = nullptr;
      Tensor t = borrow(o, tensor, "tensor");
      check_op(op);
      std::unique_ptr<PendingCollective> pending = o->impl.all_reduce_start(t, op);
      *out_request = reinterpret_cast<pb_collective_request*>(pending.release());
    });
  }
  static pb_status* wait(void* p, pb_collective_request* request) {
    Object* o = self(p);
    return guarded(o->host, "parallelism wait", [&] {
      if (request == nullptr) throw PluginError(PB_STATUS_INVALID_ARGUMENT, "request is NULL");
      std::unique_ptr<PendingCollective> pending(reinterpret_cast<PendingCollective*>(request));
      pending->wait();
    });
  }
  static void abort_job(void* p, int32_t exit_code, const char* message) {
    try {
      self(p)->impl.abort_job(exit_code, message != nullptr ? message : "");
    } catch (...) {
      // no error channel: the host exits by itself when abort_job returns
    }
  }

  static constexpr pb_parallelism_vtable kVtable = {sizeof(pb_parallelism_vtable), T::kStrategy, &rank,
                                                    &world_size, &all_reduce, &broadcast, &all_gather,
                                                    &reduce_scatter, &barrier, &all_reduce_start, &wait,
                                                    &abort_job};
};

}  // namespace detail

// The component descriptor of parallelism class T (derived from patchbay::Parallelism and
// constructible from (const Host&, const ConfigView&)). `fields` must have static storage.
template <class T>
constexpr pb_component_descriptor make_parallelism_component(const char* name, const char* version,
                                                             const char* summary,
                                                             std::span<const pb_config_field> fields = {}) {
  static_assert(std::is_base_of_v<Parallelism, T>, "T must derive from patchbay::Parallelism");
  static_assert(std::is_constructible_v<T, const Host&, const ConfigView&>,
                "T needs a constructor T(const patchbay::Host&, const patchbay::ConfigView&)");
  return pb_component_descriptor{sizeof(pb_component_descriptor),
                                 PB_KIND_PARALLELISM,
                                 PB_PARALLELISM_INTERFACE_MAJOR,
                                 PB_PARALLELISM_INTERFACE_MINOR,
                                 name,
                                 version,
                                 summary,
                                 fields.empty() ? nullptr : fields.data(),
                                 fields.size(),
                                 &detail::ParallelismAdapter<T>::create,
                                 &detail::ParallelismAdapter<T>::destroy,
                                 &detail::ParallelismAdapter<T>::kVtable};
}

}  // namespace patchbay
